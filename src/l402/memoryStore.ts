import { Effect, Option } from "effect"
import type { AccountId } from "../domain/ids.ts"
import { L402PaymentStore } from "../ports/L402PaymentStore.ts"

/**
 * Without a durable store (memory deployments): records live as long as the
 * process, and no `pay.*` webhook events are written (no outbox here).
 */
export const memoryFallback: Effect.Effect<L402PaymentStore["Service"]> = Effect.sync(() => {
  const hosts = new Map<AccountId, ReadonlyArray<string>>()
  const payments = new Map<string, Parameters<L402PaymentStore["Service"]["beginPayment"]>[0]>()
  return L402PaymentStore.of({
    payeeHosts: (accountId) => Effect.sync(() => hosts.get(accountId) ?? []),
    setPayeeHosts: (accountId, list) => Effect.sync(() => void hosts.set(accountId, [...list])),
    beginPayment: (payment) =>
      Effect.sync(() => {
        const existing = payments.get(payment.paymentHash)
        if (existing !== undefined && existing.status !== "failed") return false
        payments.set(payment.paymentHash, payment)
        return true
      }),
    resolvePayment: (hash, resolution) =>
      Effect.sync(() => {
        const existing = payments.get(hash)
        if (existing !== undefined && existing.status === "pending") payments.set(hash, { ...existing, ...resolution })
      }),
    findPayment: (hash) => Effect.sync(() => Option.fromNullishOr(payments.get(hash))),
    pendingPayments: (limit) =>
      Effect.sync(() => [...payments.values()].filter((p) => p.status === "pending").slice(0, limit))
  })
})
