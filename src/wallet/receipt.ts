import { microUsdToCents, msatToSats } from "../domain/Money.ts"
import type { SpendReceipt } from "./Spend.ts"

/**
 * The receipt of a paid call as the API shows it: the `metadata` of a
 * capability call and of a proxied call, and the data of the last
 * `event: spendgate.metadata` of a streamed call. Built here, once, for every
 * route and stream, in USD cents and sats (decisions §7).
 *
 * `latencyMs` is the time the upstream call took: from the request being sent
 * until the last byte of its answer was in; for a streamed answer, until the
 * stream ended (it finished, broke off, or the caller went away). It is
 * measured by the spend pipeline around the call itself, so it never includes
 * the hold before nor the settlement after, and it means the same on every
 * route (see `SpendReceipt.latencyMs`).
 */
export interface CallReceipt {
  /** Actual cost, USD cents. */
  readonly chargedUsdCents: number
  /** The same cost in sats at the call's rate snapshot; absent when no rate is known. */
  readonly chargedSats?: number
  /** The upper bound held before the call, USD cents. */
  readonly quotedUsdCents: number
  /** Spendable value of the wallet after the charge, USD cents. */
  readonly balanceAfter: number
  readonly auditId: string
  /** The provider that answered (capabilities) or the service's slug (proxy). */
  readonly provider: string
  /** The upstream call's time (see above). */
  readonly latencyMs: number
  /** The model that answered, when the call had one. */
  readonly model?: string
  /** What each wallet pocket actually lost. */
  readonly debited: { readonly usdCents: number; readonly sats: number }
}

export const callReceipt = (
  receipt: SpendReceipt,
  call: { readonly provider: string; readonly model: string | undefined }
): CallReceipt => ({
  chargedUsdCents: microUsdToCents(receipt.chargedMicroUsd),
  ...(receipt.chargedMsat === null ? {} : { chargedSats: msatToSats(receipt.chargedMsat) }),
  quotedUsdCents: microUsdToCents(receipt.quotedMicroUsd),
  balanceAfter: microUsdToCents(receipt.balanceAfterMicroUsd),
  auditId: receipt.auditId,
  provider: call.provider,
  latencyMs: receipt.latencyMs,
  ...(call.model === undefined ? {} : { model: call.model }),
  debited: { usdCents: microUsdToCents(receipt.debitedUsdMicroUsd), sats: msatToSats(receipt.debitedSatsMsat) }
})
