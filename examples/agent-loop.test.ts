/**
 * Testing your own agent loop against Spendgate, with no network and no
 * database server. The testing kit (`spendgate/testing`) gives a whole
 * gateway in memory on a test clock, a search provider whose calls are
 * scripted, and payment rails that pay on command. The loop below stops at
 * its daily cap, carries on after midnight UTC, pays nothing for a call the
 * upstream failed, and is refused once its kill switch is thrown.
 *
 * Plain vitest tests with `Effect.runPromise`: nothing but vitest and
 * effect is needed, and the kit brings its own TestClock.
 *
 * Run: npx vitest run examples/agent-loop.test.ts
 */
import { Effect, Result } from "effect"
import { describe, expect, it } from "vitest"
import { Agents, Capabilities, type Principal, Wallets } from "spendgate"
// In your project: import { FakeProvider, TestGateway, TestTime } from "spendgate/testing"
import { FakeProvider, TestGateway, TestTime } from "../adapters/testing/index.ts"

// ---------------------------------------------------------------------------
// The code under test: an agent that searches each topic until the gateway says no.

const researchLoop = (agent: Principal, topics: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const capabilities = yield* Capabilities
    const done: Array<string> = []
    for (const topic of topics) {
      const answer = yield* Effect.result(capabilities.execute(agent, "search", { query: topic }))
      if (Result.isFailure(answer)) return { done, stoppedBy: answer.failure.code }
      done.push(topic)
    }
    return { done, stoppedBy: null }
  })

// ---------------------------------------------------------------------------
// The tests.

const CENT = 10_000n // micro-dollars

/** An account funded with $10 by card, and a worker agent allowed 5 cents a day. */
const setup = Effect.gen(function*() {
  const owner = yield* TestGateway.fundedOwner(1_000)
  const worker = yield* TestGateway.worker(owner, { name: "researcher", policy: { maxPerDayMicroUsd: 5n * CENT } })
  return { owner, worker }
})

const balanceOf = (owner: Principal) => Effect.map(Wallets.use((wallets) => wallets.get(owner)), (w) => w.usdMicroUsd)

describe("an agent loop on Spendgate", () => {
  it("stops at its daily cap, and starts again the next day", async () => {
    const search = FakeProvider.make("search", { priceMicroUsd: 2n * CENT })
    const program = Effect.gen(function*() {
      const { owner, worker } = yield* setup
      const today = yield* researchLoop(worker, ["a", "b", "c", "d"])
      // Two searches at 2 cents fit under the 5-cent cap; the third would not.
      expect(today).toEqual({ done: ["a", "b"], stoppedBy: "BUDGET_EXCEEDED" })
      expect(search.inputs.map((input) => input.query)).toEqual(["a", "b"])

      yield* TestTime.advanceToNextMidnightUtc
      const tomorrow = yield* researchLoop(worker, ["c", "d"])
      expect(tomorrow).toEqual({ done: ["c", "d"], stoppedBy: null })
      expect(yield* balanceOf(owner)).toBe(1_000n * CENT - 4n * 2n * CENT)
    })
    await Effect.runPromise(Effect.provide(program, TestGateway.layer({ providers: [search] })))
  })

  it("pays nothing for a call the upstream failed", async () => {
    const search = FakeProvider.make("search", {
      priceMicroUsd: 2n * CENT,
      script: [FakeProvider.succeed(), FakeProvider.fail("timeout")]
    })
    const program = Effect.gen(function*() {
      const { owner, worker } = yield* setup
      expect(yield* researchLoop(worker, ["a", "b", "c"])).toEqual({ done: ["a"], stoppedBy: "PROVIDER_ERROR" })
      expect(yield* balanceOf(owner)).toBe(1_000n * CENT - 2n * CENT)
    })
    await Effect.runPromise(Effect.provide(program, TestGateway.layer({ providers: [search] })))
  })

  it("is refused once killed, and no upstream is called", async () => {
    const search = FakeProvider.make("search", { priceMicroUsd: 2n * CENT })
    const program = Effect.gen(function*() {
      const { owner, worker } = yield* setup
      yield* Agents.use((agents) => agents.update(owner, worker.agent.id, { killed: true }))
      expect(yield* researchLoop(worker, ["a", "b"])).toEqual({ done: [], stoppedBy: "AGENT_KILLED" })
      expect(search.calls).toEqual([])
      expect(yield* balanceOf(owner)).toBe(1_000n * CENT)
    })
    await Effect.runPromise(Effect.provide(program, TestGateway.layer({ providers: [search] })))
  })
})
