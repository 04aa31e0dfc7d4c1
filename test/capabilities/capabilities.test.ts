import { assert, describe, it as vitestIt } from "@effect/vitest"
import { Effect } from "effect"
import { FakeProvider, TestGateway, TestTime } from "../../adapters/testing/index.ts"
import { Capabilities } from "../../src/capabilities/Capabilities.ts"
import { capabilityNames } from "../../src/domain/Capability.ts"
import type { ModelInfo } from "../../src/capabilities/Provider.ts"
import { Policies } from "../../src/agents/Policies.ts"
import { Agents } from "../../src/agents/Agents.ts"
import { Store } from "../../src/ports/Store.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { fundedAccount } from "../wallet/ledger.contract.ts"

/**
 * The metered-execution core with scripted providers (the testing kit's
 * FakeProvider): choice, fallback, circuit breaking, policy refusals that
 * never reach an upstream, and metering to the micro-dollar. (Real adapters
 * are tested against local servers that speak their wire formats in
 * test/providers/.)
 */

const MODEL: ModelInfo = { id: "m-1", inputPer1kMicroUsd: 1_500n, outputPer1kMicroUsd: 6_000n, maxTokens: 4096, defaultMaxTokens: 1000 }

const dear = FakeProvider.make("search", { name: "dear", priceMicroUsd: 9_000n })
const cheap = FakeProvider.make("search", { name: "cheap", priceMicroUsd: 4_000n })
const llm = FakeProvider.make("reason", {
  name: "llm",
  models: [MODEL],
  // The upstream reports 1234 tokens in and 567 out, whatever was asked.
  otherwise: FakeProvider.succeed({ usage: { promptTokens: 1234, completionTokens: 567 } })
})

/** Two email providers: a message refused by one goes to the other, one that may have gone out does not. */
const mailCheap = FakeProvider.make("email", { name: "mail-cheap", priceMicroUsd: 1_000n })
const mailDear = FakeProvider.make("email", { name: "mail-dear", priceMicroUsd: 2_000n })
const errCode = (e: unknown) => (e as { code?: string }).code ?? String(e)

/** A fresh gateway, fresh provider health and fresh scripts for every test. */
const it = {
  effect: <A, E>(name: string, body: () => Effect.Effect<A, E, any>) =>
    vitestIt.effect(name, () => {
      for (const provider of [dear, cheap, llm, mailCheap, mailDear]) provider.reset()
      return Effect.provide(body(), TestGateway.layer({ providers: [dear, cheap, llm, mailCheap, mailDear] })) as Effect.Effect<A, E>
    })
}

describe("metered capability execution", () => {
  {
    it.effect("picks the cheapest healthy provider and charges its price", () =>
      Effect.gen(function*() {
        const owner = yield* fundedAccount(100n)
        const result = yield* (yield* Capabilities).execute(owner, "search", { query: "q" })
        assert.strictEqual(result.provider, "cheap")
        assert.strictEqual(result.receipt.chargedMicroUsd, 4_000n)
        assert.strictEqual(dear.calls.length, 0)
      }))

    it.effect("falls back to the next provider when one fails; the caller pays only the one that answered", () =>
      Effect.gen(function*() {
        cheap.always(FakeProvider.fail("unavailable"))
        const owner = yield* fundedAccount(100n)
        const result = yield* (yield* Capabilities).execute(owner, "search", { query: "q" })
        assert.strictEqual(result.provider, "dear")
        assert.strictEqual(cheap.calls.length, 1)
        const wallet = yield* (yield* Wallets).get(owner)
        assert.strictEqual(wallet.usdMicroUsd, 1_000_000n - 9_000n)
        const charges = yield* (yield* Wallets).transactions(owner, { type: "charge" }, { limit: 10, offset: 0 })
        assert.deepStrictEqual(charges.items.map((t) => t.provider), ["dear"])
        const holds = yield* (yield* Store).listReservations(owner.agent.accountId, { limit: 10, offset: 0 })
        assert.deepStrictEqual(holds.items.map((r) => `${r.provider}:${r.status}`).sort(), ["cheap:released", "dear:settled"])
      }))

    it.effect("answers PROVIDER_ERROR when every provider failed, and charges nothing", () =>
      Effect.gen(function*() {
        cheap.always(FakeProvider.fail("timeout"))
        dear.always(FakeProvider.fail("malformed"))
        const owner = yield* fundedAccount(100n)
        const error = yield* Effect.flip((yield* Capabilities).execute(owner, "search", { query: "q" }))
        assert.strictEqual(errCode(error), "PROVIDER_ERROR")
        assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 1_000_000n)
      }))

    for (const reason of ["timeout", "network", "malformed", "too_large"] as const) {
      it.effect(`an email whose provider failed with ${reason} (it may have gone out) is not sent again through another; nothing charged`, () =>
        Effect.gen(function*() {
          mailCheap.always(FakeProvider.fail(reason))
          const owner = yield* fundedAccount(100n)
          const error = yield* Effect.flip((yield* Capabilities).execute(owner, "email", { to: ["a@example.com"], subject: "s", text: "t" }))
          assert.strictEqual(errCode(error), "PROVIDER_ERROR")
          assert.strictEqual(mailCheap.calls.length, 1)
          assert.strictEqual(mailDear.calls.length, 0)
          assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 1_000_000n)
        }))
    }
    for (const reason of ["unavailable", "rate_limited", "rejected"] as const) {
      it.effect(`an email refused with ${reason} (it was not taken) goes to the next provider`, () =>
        Effect.gen(function*() {
          mailCheap.always(FakeProvider.fail(reason))
          const owner = yield* fundedAccount(100n)
          const result = yield* (yield* Capabilities).execute(owner, "email", { to: ["a@example.com"], subject: "s", text: "t" })
          assert.strictEqual(result.provider, "mail-dear")
          assert.strictEqual(mailCheap.calls.length, 1)
          assert.strictEqual(result.receipt.chargedMicroUsd, 2_000n)
        }))
    }
    it.effect("a pinned provider is used alone, and an unknown one is 404", () =>
      Effect.gen(function*() {
        dear.always(FakeProvider.fail("unavailable"))
        const owner = yield* fundedAccount(100n)
        const capabilities = yield* Capabilities
        const pinned = yield* Effect.flip(capabilities.execute(owner, "search", { query: "q", provider: "dear" }))
        assert.strictEqual(errCode(pinned), "PROVIDER_ERROR")
        assert.strictEqual(cheap.calls.length, 0)
        const unknown = yield* Effect.flip(capabilities.execute(owner, "search", { query: "q", provider: "nope" }))
        assert.strictEqual(errCode(unknown), "NOT_FOUND")
      }))

    it.effect("a policy refusal never reaches any upstream", () =>
      Effect.gen(function*() {
        const owner = yield* fundedAccount(100n)
        const agents = yield* Agents
        const created = yield* agents.create(owner, { name: "w" })
        const worker = yield* agents.authenticate(created.apiKey)
        const policies = yield* Policies
        const capabilities = yield* Capabilities
        yield* policies.replace(owner, worker.agent.id, { maxPerCallMicroUsd: 3_000n })
        assert.strictEqual(errCode(yield* Effect.flip(capabilities.execute(worker, "search", { query: "q" }))), "PER_CALL_LIMIT_EXCEEDED")
        yield* policies.replace(owner, worker.agent.id, { allowedCapabilities: ["read"] })
        assert.strictEqual(errCode(yield* Effect.flip(capabilities.execute(worker, "search", { query: "q" }))), "CAPABILITY_NOT_ALLOWED")
        yield* policies.replace(owner, worker.agent.id, { maxPerDayMicroUsd: 1_000n })
        assert.strictEqual(errCode(yield* Effect.flip(capabilities.execute(worker, "search", { query: "q" }))), "BUDGET_EXCEEDED")
        const poor = yield* fundedAccount(0n)
        assert.strictEqual(errCode(yield* Effect.flip(capabilities.execute(poor, "search", { query: "q" }))), "INSUFFICIENT_BALANCE")
        yield* policies.replace(owner, worker.agent.id, {})
        yield* agents.update(owner, worker.agent.id, { killed: true })
        assert.strictEqual(errCode(yield* Effect.flip(capabilities.execute(worker, "search", { query: "q" }))), "AGENT_KILLED")
        assert.strictEqual(cheap.calls.length + dear.calls.length, 0)
      }))

    it.effect("meters a reason call from the upstream's usage to the exact micro-dollar", () =>
      Effect.gen(function*() {
        const owner = yield* fundedAccount(100n)
        const result = yield* (yield* Capabilities).execute(owner, "reason", { prompt: "Hello", maxTokens: 1000 })
        // quote: (5 bytes + 16 overhead) tokens in, 1000 out; actual: 1234 in, 567 out
        assert.strictEqual(result.receipt.quotedMicroUsd, 32n + 6_000n)
        // 1234 × 1500 / 1000 = 1851 (rounded up) + 567 × 6000 / 1000 = 3402
        assert.strictEqual(result.receipt.chargedMicroUsd, 5_253n)
        assert.strictEqual(result.model, "m-1")
      }))

    it.effect("a reason call that would cost more than the quote is charged the quote", () =>
      Effect.gen(function*() {
        const owner = yield* fundedAccount(100n)
        const result = yield* (yield* Capabilities).execute(owner, "reason", { prompt: "Hello", maxTokens: 10 })
        assert.strictEqual(result.receipt.chargedMicroUsd, result.receipt.quotedMicroUsd)
      }))

    it.effect("an unpriced model is 400 MODEL_NOT_PRICED and an over-long maxTokens is 400, before anything is held", () =>
      Effect.gen(function*() {
        const owner = yield* fundedAccount(100n)
        const capabilities = yield* Capabilities
        assert.strictEqual(errCode(yield* Effect.flip(capabilities.execute(owner, "reason", { prompt: "x", model: "m-9" }))), "MODEL_NOT_PRICED")
        assert.strictEqual(errCode(yield* Effect.flip(capabilities.execute(owner, "reason", { prompt: "x", maxTokens: 5000 }))), "VALIDATION_ERROR")
        assert.strictEqual(llm.calls.length, 0)
        assert.strictEqual((yield* (yield* Store).listReservations(owner.agent.accountId, { limit: 1, offset: 0 })).total, 0)
      }))

    it.effect("no configured provider is PROVIDER_UNAVAILABLE", () =>
      Effect.gen(function*() {
        const owner = yield* fundedAccount(100n)
        const error = yield* Effect.flip((yield* Capabilities).execute(owner, "read", { url: "https://example.com/" }))
        assert.strictEqual(errCode(error), "PROVIDER_UNAVAILABLE")
      }))

    it.effect("opens a provider's circuit after 5 failures, skips it, and half-opens after the cooldown", () =>
      Effect.gen(function*() {
        cheap.always(FakeProvider.fail("unavailable"))
        const owner = yield* fundedAccount(100n)
        const capabilities = yield* Capabilities
        for (let i = 0; i < 5; i++) yield* capabilities.execute(owner, "search", { query: "q" })
        assert.strictEqual(cheap.calls.length, 5)
        yield* capabilities.execute(owner, "search", { query: "q" })
        assert.strictEqual(cheap.calls.length, 5, "an open circuit is skipped")
        const summary = yield* capabilities.describe("search")
        assert.strictEqual(summary.defaultProvider, "dear")
        yield* TestTime.advance("30 seconds")
        cheap.always(FakeProvider.succeed())
        const result = yield* capabilities.execute(owner, "search", { query: "q" })
        assert.strictEqual(result.provider, "cheap", "half-open: one trial call, which succeeds and closes the circuit")
        assert.strictEqual((yield* capabilities.describe("search")).defaultProvider, "cheap")
      }))

    it.effect("a URL blocked mid-flight is the caller's 400 and no other provider is tried", () =>
      Effect.gen(function*() {
        cheap.always(FakeProvider.fail("blocked"))
        const owner = yield* fundedAccount(100n)
        const error = yield* Effect.flip((yield* Capabilities).execute(owner, "search", { query: "q" }))
        assert.strictEqual(errCode(error), "VALIDATION_ERROR")
        assert.strictEqual(dear.calls.length, 0)
        assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 1_000_000n)
      }))

    it.effect("lists every capability (the ten of the specification and pay) and describes one; an unknown one is 404", () =>
      Effect.gen(function*() {
        const capabilities = yield* Capabilities
        const all = yield* capabilities.list
        assert.deepStrictEqual(all.map((c) => c.name), [...capabilityNames])
        assert.strictEqual(all.length, 11)
        assert.deepStrictEqual(all.find((c) => c.name === "search")?.providers.map((p) => p.name), ["dear", "cheap"])
        assert.strictEqual(errCode(yield* Effect.flip(capabilities.describe("teleport"))), "NOT_FOUND")
      }))
  }
})
