import { Effect, Layer, Option } from "effect"
import { L402Store, type SalesAccount } from "../../src/ports/L402Store.ts"

/** The L402 seller's state in memory (one process; single-threaded, so each use is counted atomically). */
export const makeMemoryL402Store = (): L402Store["Service"] => {
  let rootKey: Uint8Array | undefined
  let sales: SalesAccount | undefined
  const uses = new Map<string, { readonly callsAllowed: number; count: number }>()
  return L402Store.of({
    rootKey: (candidate) => Effect.sync(() => (rootKey ??= Uint8Array.from(candidate))),
    salesAccount: Effect.sync(() => Option.fromNullishOr(sales)),
    saveSalesAccount: (account) => Effect.sync(() => (sales ??= account)),
    useToken: (use) =>
      Effect.sync(() => {
        const entry = uses.get(use.tokenId)
        if (entry === undefined) {
          uses.set(use.tokenId, { callsAllowed: use.callsAllowed, count: 1 })
          return true
        }
        if (entry.count >= entry.callsAllowed) return false
        entry.count += 1
        return true
      }),
    returnUse: (tokenId) =>
      Effect.sync(() => {
        const entry = uses.get(tokenId)
        if (entry !== undefined && entry.count > 0) entry.count -= 1
      })
  })
}

export const layer: Layer.Layer<L402Store> = Layer.sync(L402Store, makeMemoryL402Store)
