import { Context, Effect, Layer, Option } from "effect"
import { describe, expect, it } from "vitest"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import { L402Store } from "../../src/ports/L402Store.ts"
import { storeBackends } from "../support/server.ts"

/** The L402 seller's store, the same rules on memory, PGlite and PostgreSQL. */

const withStore = <A>(make: () => Layer.Layer<never, unknown>, body: (store: L402Store["Service"]) => Effect.Effect<A>) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const context = yield* Layer.build(make() as unknown as Layer.Layer<L402Store, unknown>)
    return yield* body(Context.get(context, L402Store))
  })))

const hash = (n: number) => n.toString(16).padStart(64, "0")

for (const [backend, make] of storeBackends) {
  describe(`L402Store (${backend})`, () => {
    it("keeps the first root key and the first sales account", async () => {
      await withStore(make, (store) =>
        Effect.gen(function*() {
          const first = yield* store.rootKey(new Uint8Array(32).fill(1))
          const second = yield* store.rootKey(new Uint8Array(32).fill(2))
          expect([...first]).toEqual([...new Uint8Array(32).fill(1)])
          expect([...second]).toEqual([...first])
          expect(yield* store.salesAccount).toEqual(Option.none())
          const a = { accountId: "acc_a" as AccountId, agentId: "agt_a" as AgentId }
          expect(yield* store.saveSalesAccount(a)).toEqual(a)
          expect(yield* store.saveSalesAccount({ accountId: "acc_b" as AccountId, agentId: "agt_b" as AgentId })).toEqual(a)
          expect(yield* store.salesAccount).toEqual(Option.some(a))
        }))
    })

    it("counts uses up to the allowance, atomically under concurrency, and gives uses back", async () => {
      await withStore(make, (store) =>
        Effect.gen(function*() {
          const use = { tokenId: hash(7), paymentHash: hash(8), callsAllowed: 3, at: new Date() }
          const results = yield* Effect.all(Array.from({ length: 20 }, () => store.useToken(use)), { concurrency: "unbounded" })
          expect(results.filter((counted) => counted)).toHaveLength(3)
          expect(yield* store.useToken(use)).toBe(false)
          yield* store.returnUse(use.tokenId)
          expect(yield* store.useToken(use)).toBe(true)
          expect(yield* store.useToken(use)).toBe(false)
          // Another token has its own count.
          expect(yield* store.useToken({ ...use, tokenId: hash(9), callsAllowed: 1 })).toBe(true)
          expect(yield* store.useToken({ ...use, tokenId: hash(9), callsAllowed: 1 })).toBe(false)
        }))
    })
  })
}
