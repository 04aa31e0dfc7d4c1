import { Effect, Option } from "effect"
import { describe, expect, it } from "vitest"
import { Sessions, SessionsLive } from "../../adapters/http/sessions.ts"

/** The in-memory session store's bounds: one credential cannot push out another's sessions. */
describe("dashboard session store bounds", () => {
  const run = <A>(effect: Effect.Effect<A, never, Sessions>, options: Parameters<typeof SessionsLive>[0]) =>
    Effect.runPromise(effect.pipe(Effect.provide(SessionsLive(options))))

  it("a credential signing in again and again ends its own oldest sessions, never another credential's", async () => {
    await run(Effect.gen(function*() {
      const sessions = yield* Sessions
      const other = yield* sessions.open({ role: "owner", credentialHash: "b".repeat(64) })
      const mine = []
      for (let i = 0; i < 10; i++) mine.push(yield* sessions.open({ role: "agent", credentialHash: "a".repeat(64) }))
      expect(Option.isSome(yield* sessions.find(other.cookie))).toBe(true)
      const alive = []
      for (const s of mine) alive.push(Option.isSome(yield* sessions.find(s.cookie)))
      // At most 3 of one credential: the 7 oldest were ended, the 3 newest live.
      expect(alive).toEqual([false, false, false, false, false, false, false, true, true, true])
    }), { maxPerCredential: 3, maxSessions: 100 })
  })

  it("past the overall bound the least recently used session goes first, whoever's", async () => {
    await run(Effect.gen(function*() {
      const sessions = yield* Sessions
      const opened = []
      for (let i = 0; i < 5; i++) opened.push(yield* sessions.open({ role: "owner", credentialHash: String(i).repeat(64) }))
      // Using the first keeps it; the second is now the least recently used.
      expect(Option.isSome(yield* sessions.find(opened[0]!.cookie))).toBe(true)
      yield* sessions.open({ role: "owner", credentialHash: "9".repeat(64) })
      expect(Option.isSome(yield* sessions.find(opened[0]!.cookie))).toBe(true)
      expect(Option.isNone(yield* sessions.find(opened[1]!.cookie))).toBe(true)
    }), { maxPerCredential: 20, maxSessions: 5 })
  })
})
