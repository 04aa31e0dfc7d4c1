import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex, hexToBytes } from "@noble/hashes/utils.js"
import { Clock, Context, Effect, Layer, Option, Result } from "effect"
import { Agents } from "../agents/Agents.ts"
import { Capabilities } from "../capabilities/Capabilities.ts"
import type { EstimateError } from "../capabilities/results.ts"
import type { BuiltCapability, CapabilityIO } from "../capabilities/schemas.ts"
import type { Principal } from "../domain/Agent.ts"
import { AgentKilled, type Forbidden, type InvalidAmount, RateUnavailable, type SpendRefusal } from "../domain/errors.ts"
import { ceilDivide, MSAT_PER_SAT, type MicroUsd, usdToMsatForCharge } from "../domain/Money.ts"
import { Funding } from "../funding/Funding.ts"
import { L402Store, type SalesAccount } from "../ports/L402Store.ts"
import { PaymentSink, type RailError } from "../ports/Rails.ts"
import { RateSource } from "../ports/RateSource.ts"
import { Store } from "../ports/Store.ts"
import { checkCaveats, type TokenTerms, termsCaveats } from "./caveats.ts"
import { L402PriceExceeded, type L402Refusal, L402TokenInvalid, L402TokenUsed } from "./errors.ts"
import {
  constantTimeEqual,
  decodeBase64Result,
  decodeIdentifier,
  encodeBase64,
  encodeIdentifier,
  MalformedMacaroon,
  mint,
  verifySignature
} from "./macaroon.ts"

/**
 * Selling capabilities over L402 to callers with no account.
 *
 * Where the money goes: an internal **sales account** (created on first
 * start, owner agent "L402 sales") is the payee. The challenge's invoice is
 * an ordinary Lightning funding invoice of that account, so its payment
 * credits the sales wallet's sats pocket exactly once, like any funding
 * (`PaymentSink.record`). The paid call then runs through the one spend
 * pipeline **as the sales agent**: quote, hold, provider, settle, receipt
 * and audit entry, as for every call. The call is charged at its quote
 * (or less); what the buyer paid above that (the margin, and the rounding
 * up to whole sats) stays in the sales wallet as revenue. The books stay
 * exact: every sat that arrives is a funding credit, every call a charge.
 *
 * The operator governs sales like any agent: the sales agent's policy (caps,
 * allowed capabilities) limits what is sold, and killing it stops sales.
 *
 * The token: a macaroon whose identifier commits to the invoice's payment
 * hash (Aperture's layout) and whose caveats say what it buys (caveats.ts).
 * Redeeming checks the signature under the root key, sha256(preimage) ==
 * payment hash, the caveats, the request's quote against the maximum price,
 * and counts the use atomically (L402Store.useToken). A preimage proves the
 * payment, so the invoice is recorded as paid on redemption if the rail has
 * not yet said so (idempotent: credited once whatever arrives first).
 */

export interface L402SellSettings {
  /** Added to the quote, in percent (0 to 1000). */
  readonly marginPercent: number
  /** How long a token is accepted after its challenge, in seconds. */
  readonly tokenTtlSeconds: number
  /** Calls one token pays for (its `calls` caveat). */
  readonly callsPerToken: number
  /**
   * Told once, when the sales account is created, its owner agent's API key
   * (the only time the key exists in plain text), so that the operator can
   * read the sales wallet and set the sales agent's policy (the server keeps
   * it in a private file under DATA_DIR).
   */
  readonly onSalesAccountCreated?: ((created: SalesAccount & { readonly apiKey: string }) => Effect.Effect<void>) | undefined
}

export const defaultL402SellSettings: L402SellSettings = { marginPercent: 10, tokenTtlSeconds: 3600, callsPerToken: 1 }

export const SALES_AGENT_NAME = "L402 sales"
export const MACAROON_LOCATION = "spendgate"

export interface L402Challenge {
  readonly capability: BuiltCapability
  /** Base64 binary V2 macaroon. */
  readonly macaroon: string
  /** BOLT11 payment request. */
  readonly invoice: string
  readonly paymentHash: string
  /** The request's quote, per call. */
  readonly quotedMicroUsd: bigint
  /** What the invoice asks, in USD before conversion: quote x calls + margin. */
  readonly priceMicroUsd: bigint
  readonly amountSats: number
  readonly calls: number
  readonly expiresAt: Date
}

export interface L402Token {
  readonly macaroon: string
  /** 64 hex characters. */
  readonly preimage: string
}

export interface Redemption {
  /** The sales agent, as whom the paid call runs. */
  readonly principal: Principal
  readonly terms: TokenTerms
  /** Gives the use back when the paid call did not run (refused or failed, nothing charged). */
  readonly giveBack: Effect.Effect<void>
}

export type ChallengeError = EstimateError | SpendRefusal | RateUnavailable | RailError | InvalidAmount | Forbidden

const randomBytes = (length: number): Uint8Array => globalThis.crypto.getRandomValues(new Uint8Array(length))

const HEX_64 = /^[0-9a-fA-F]{64}$/

/** Whole sats for a USD price at a rate, rounded up (a charge); at least 1. */
export const priceInSats = (priceMicroUsd: MicroUsd, rate: Parameters<typeof usdToMsatForCharge>[1]): number => {
  const sats = ceilDivide(usdToMsatForCharge(priceMicroUsd, rate), MSAT_PER_SAT)
  return Number(sats < 1n ? 1n : sats)
}

export class L402Seller extends Context.Service<L402Seller, {
  readonly salesAccount: SalesAccount
  /** The 402 challenge for this request: its quote plus the margin, as an invoice of the sales account and a macaroon. */
  readonly challenge: <C extends BuiltCapability>(
    capability: C,
    input: CapabilityIO[C]["input"]
  ) => Effect.Effect<L402Challenge, ChallengeError>
  /** Checks a token for this request and counts its use; the call then runs as `principal`. */
  readonly redeem: <C extends BuiltCapability>(
    capability: C,
    input: CapabilityIO[C]["input"],
    token: L402Token
  ) => Effect.Effect<Redemption, L402Refusal | EstimateError | AgentKilled>
}>()("spendgate/L402Seller") {
  static readonly layer = (settings: L402SellSettings) =>
    Layer.effect(
      L402Seller,
      Effect.gen(function*() {
        const l402 = yield* L402Store
        const store = yield* Store
        const agents = yield* Agents
        const funding = yield* Funding
        const capabilities = yield* Capabilities
        const rates = yield* RateSource
        const sink = yield* PaymentSink

        const rootKey = yield* l402.rootKey(randomBytes(32))
        const salesAccount = yield* Effect.flatMap(
          l402.salesAccount,
          Option.match({
            onSome: Effect.succeed,
            onNone: () =>
              Effect.gen(function*() {
                const created = yield* agents.signup({ name: SALES_AGENT_NAME })
                const saved = yield* l402.saveSalesAccount({ accountId: created.accountId, agentId: created.agent.id })
                // Another instance may have recorded its own first: only the recorded account's key is handed on.
                if (saved.agentId === created.agent.id && settings.onSalesAccountCreated !== undefined) {
                  yield* settings.onSalesAccountCreated({ ...saved, apiKey: created.apiKey })
                }
                return saved
              })
          })
        )

        /** The sales agent, read afresh (the operator may have changed its policy or killed it). */
        const salesPrincipal = Effect.gen(function*() {
          const found = yield* store.getAgent(salesAccount.accountId, salesAccount.agentId)
          if (Option.isNone(found)) return yield* Effect.die(new Error("the L402 sales agent is missing"))
          if (found.value.agent.killed) return yield* new AgentKilled()
          return { agent: found.value.agent } satisfies Principal
        })

        const quoteFor = <C extends BuiltCapability>(principal: Principal, capability: C, input: CapabilityIO[C]["input"]) =>
          capabilities.estimate(principal, capability, input)

        const challenge = Effect.fn("L402Seller.challenge")(function*<C extends BuiltCapability>(
          capability: C,
          input: CapabilityIO[C]["input"]
        ) {
          const principal = yield* salesPrincipal
          const estimate = yield* quoteFor(principal, capability, input)
          // An empty sales wallet is expected (the buyer is about to fund it); any
          // other refusal (a cap or allow-list the operator set on the sales agent) stands.
          if (estimate.refusal !== null && estimate.refusal._tag !== "InsufficientBalance") {
            return yield* Effect.fail(estimate.refusal)
          }
          const snapshot = yield* rates.current
          if (Option.isNone(snapshot)) return yield* new RateUnavailable()
          const calls = settings.callsPerToken
          const base = estimate.quotedMicroUsd * BigInt(calls)
          const priceMicroUsd = ceilDivide(base * BigInt(100 + settings.marginPercent), 100n) as MicroUsd
          const amountSats = priceInSats(priceMicroUsd, snapshot.value.rate)
          const invoice = yield* funding.fundLightning(principal, amountSats)
          const nowMs = yield* Clock.currentTimeMillis
          const validUntilSeconds = Math.floor(nowMs / 1000) + settings.tokenTtlSeconds
          const identifier = encodeIdentifier({ version: 0, paymentHash: invoice.externalId, tokenId: bytesToHex(randomBytes(32)) })
          const macaroon = mint({
            rootKey,
            identifier,
            location: MACAROON_LOCATION,
            caveats: termsCaveats({ capability, maxPriceMicroUsd: estimate.quotedMicroUsd, validUntilSeconds, calls })
          })
          return {
            capability,
            macaroon: encodeBase64(macaroon),
            invoice: invoice.paymentRequest ?? "",
            paymentHash: invoice.externalId,
            quotedMicroUsd: estimate.quotedMicroUsd,
            priceMicroUsd,
            amountSats,
            calls,
            expiresAt: new Date(validUntilSeconds * 1000)
          } satisfies L402Challenge
        })

        const invalid = (reason: string) => Effect.fail(new L402TokenInvalid({ reason }))

        const redeem = Effect.fn("L402Seller.redeem")(function*<C extends BuiltCapability>(
          capability: C,
          input: CapabilityIO[C]["input"],
          token: L402Token
        ) {
          const decoded = decodeBase64Result(token.macaroon)
          if (Result.isFailure(decoded)) return yield* invalid(decoded.failure.reason)
          const macaroon = decoded.success
          const identifier = yield* Effect.try({
            try: () => decodeIdentifier(macaroon.identifier),
            catch: (error) => new L402TokenInvalid({ reason: error instanceof MalformedMacaroon ? error.reason : "bad identifier" })
          })
          if (!verifySignature(macaroon, rootKey)) return yield* invalid("signature does not verify")
          if (!HEX_64.test(token.preimage)) return yield* invalid("the preimage must be 64 hex characters")
          if (!constantTimeEqual(sha256(hexToBytes(token.preimage.toLowerCase())), hexToBytes(identifier.paymentHash))) {
            return yield* invalid("the preimage does not match the payment hash")
          }
          const nowMs = yield* Clock.currentTimeMillis
          const terms = yield* Effect.fromResult(checkCaveats(macaroon.caveats, { capability, nowMs }))
          const principal = yield* salesPrincipal
          const estimate = yield* quoteFor(principal, capability, input)
          if (estimate.quotedMicroUsd > terms.maxPriceMicroUsd) {
            return yield* new L402PriceExceeded({ quotedMicroUsd: estimate.quotedMicroUsd, maxPriceMicroUsd: terms.maxPriceMicroUsd })
          }
          // The preimage proves the payment: credit the invoice now if the rail has not yet (exactly once either way).
          const outcome = yield* sink.record({
            type: "lightning",
            externalId: identifier.paymentHash,
            paidAt: new Date(nowMs),
            source: "l402"
          })
          if (outcome !== "credited" && outcome !== "duplicate") {
            return yield* invalid(`the invoice's payment was not credited (${outcome})`)
          }
          const counted = yield* l402.useToken({
            tokenId: identifier.tokenId,
            paymentHash: identifier.paymentHash,
            callsAllowed: terms.calls,
            at: new Date(nowMs)
          })
          if (!counted) return yield* new L402TokenUsed({ callsAllowed: terms.calls })
          return { principal, terms, giveBack: l402.returnUse(identifier.tokenId) } satisfies Redemption
        })

        return L402Seller.of({ salesAccount, challenge, redeem })
      })
    )
}
