import { Context, type Effect, type Option } from "effect"
import type { AccountId, AgentId } from "../domain/ids.ts"
import type { OutboxEvent } from "../webhooks/events.ts"

/**
 * What outbound L402 keeps (src/l402/): each account's allow-list of payee
 * hosts, and one record per Lightning payment the gateway made for a caller,
 * written before the payment is sent, so that a payment whose outcome a
 * crash left unknown is found and resolved from the node on restart.
 */

export type OutboundPaymentStatus = "pending" | "succeeded" | "failed"

export interface OutboundPayment {
  /** 64 lower-case hex characters; at most one live payment per hash. */
  readonly paymentHash: string
  readonly accountId: AccountId
  readonly agentId: AgentId
  /** The hold the payment is charged against. */
  readonly reservationId: string
  /** The paywalled URL (origin and path, no query). */
  readonly url: string
  readonly paymentRequest: string
  readonly amountMsat: bigint
  readonly feeLimitMsat: bigint
  /** The BTC/USD rate the hold was quoted at (µUSD per BTC), for the settle after a restart. */
  readonly rateMicroUsdPerBtc: bigint
  readonly status: OutboundPaymentStatus
  readonly preimage: string | null
  readonly feeMsat: bigint | null
  /** The charge, once settled. */
  readonly transactionId: string | null
  readonly createdAt: Date
  readonly resolvedAt: Date | null
}

export interface PaymentResolution {
  readonly status: "succeeded" | "failed"
  readonly preimage: string | null
  readonly feeMsat: bigint | null
  readonly transactionId: string | null
  readonly resolvedAt: Date
}

export class L402PaymentStore extends Context.Service<L402PaymentStore, {
  readonly payeeHosts: (accountId: AccountId) => Effect.Effect<ReadonlyArray<string>>
  /** Replaces the account's list. */
  readonly setPayeeHosts: (accountId: AccountId, hosts: ReadonlyArray<string>, now: Date) => Effect.Effect<void>
  /**
   * Records a payment about to be sent. False when the hash already has a
   * pending or succeeded payment (then nothing is written and nothing may be
   * sent); a failed one is replaced.
   */
  readonly beginPayment: (payment: OutboundPayment) => Effect.Effect<boolean>
  /**
   * Ends a pending payment, writing its webhook events (`pay.succeeded`,
   * `pay.failed`) in the same transaction where the store keeps an outbox;
   * a payment already resolved is left as it is, and no event is written.
   */
  readonly resolvePayment: (
    paymentHash: string,
    resolution: PaymentResolution,
    events?: ReadonlyArray<OutboxEvent>
  ) => Effect.Effect<void>
  readonly findPayment: (paymentHash: string) => Effect.Effect<Option.Option<OutboundPayment>>
  /** Pending payments, oldest first (the restart resolves them). */
  readonly pendingPayments: (limit: number) => Effect.Effect<ReadonlyArray<OutboundPayment>>
}>()("spendgate/L402PaymentStore") {}
