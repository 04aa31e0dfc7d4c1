import { Effect, Option } from "effect"
import type { AccountId } from "../domain/ids.ts"
import { L402PaymentStore } from "../ports/L402PaymentStore.ts"

/** Resolved payments kept by the memory fallback; older ones are forgotten first (pending ones never). */
export const MAX_RESOLVED_PAYMENTS = 10_000

/**
 * Without a durable store (memory deployments): records live as long as the
 * process, and no `pay.*` webhook events are written (no outbox here). At
 * most MAX_RESOLVED_PAYMENTS resolved records are kept (the oldest go first;
 * the Lightning node itself never pays one invoice twice), and every pending
 * one.
 */
export const memoryFallback: Effect.Effect<L402PaymentStore["Service"]> = Effect.sync(() => {
  const hosts = new Map<AccountId, ReadonlyArray<string>>()
  const payments = new Map<string, Parameters<L402PaymentStore["Service"]["beginPayment"]>[0]>()
  /** Hashes of resolved payments, oldest first. */
  const resolved = new Set<string>()
  const forgetOldest = () => {
    for (const hash of resolved) {
      if (resolved.size <= MAX_RESOLVED_PAYMENTS) return
      resolved.delete(hash)
      payments.delete(hash)
    }
  }
  return L402PaymentStore.of({
    payeeHosts: (accountId) => Effect.sync(() => hosts.get(accountId) ?? []),
    setPayeeHosts: (accountId, list) => Effect.sync(() => void hosts.set(accountId, [...list])),
    beginPayment: (payment) =>
      Effect.sync(() => {
        const existing = payments.get(payment.paymentHash)
        if (existing !== undefined && existing.status !== "failed") return false
        resolved.delete(payment.paymentHash)
        payments.set(payment.paymentHash, payment)
        return true
      }),
    resolvePayment: (hash, resolution) =>
      Effect.sync(() => {
        const existing = payments.get(hash)
        if (existing !== undefined && existing.status === "pending") {
          payments.set(hash, { ...existing, ...resolution })
          resolved.add(hash)
          forgetOldest()
        }
      }),
    findPayment: (hash) => Effect.sync(() => Option.fromNullishOr(payments.get(hash))),
    pendingPayments: (limit) =>
      Effect.sync(() => [...payments.values()].filter((p) => p.status === "pending").slice(0, limit))
  })
})
