import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { FakeProvider, TestGateway } from "../../adapters/testing/index.ts"
import { Capabilities } from "../../src/capabilities/Capabilities.ts"
import { type ProviderStatus, ProviderStatuses } from "../../src/capabilities/ProviderHealth.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { fundedAccount } from "../wallet/ledger.contract.ts"

/**
 * What the operator's start-up probes found (ProviderStatuses, as the
 * configured gateway provides it) decides which providers may be chosen: an
 * unavailable one never is, a degraded one still is, and is listed as such.
 */

const cheap = FakeProvider.make("search", { name: "cheap", priceMicroUsd: 1_000n })
const dear = FakeProvider.make("search", { name: "dear", priceMicroUsd: 5_000n })

const layerWith = (statuses: Record<string, ProviderStatus>) => {
  cheap.reset()
  dear.reset()
  return TestGateway.layer({ providers: [cheap, dear] }).pipe(
    Layer.provide(Layer.succeed(ProviderStatuses, ProviderStatuses.of({ of: (name) => statuses[name] })))
  )
}

const code = (e: unknown) => (e as { code?: string }).code ?? String(e)

describe("provider statuses found at start-up", () => {
  it.effect("an unavailable provider is skipped even when cheaper, refused when pinned, and listed with its reason", () =>
    Effect.gen(function*() {
      const capabilities = yield* Capabilities
      const owner = yield* fundedAccount(100n)
      const result = yield* capabilities.execute(owner, "search", { query: "q" })
      assert.strictEqual(result.provider, "dear")
      assert.strictEqual(cheap.calls.length, 0)
      const pinned = yield* Effect.flip(capabilities.execute(owner, "search", { query: "q", provider: "cheap" }))
      assert.strictEqual(code(pinned), "PROVIDER_UNAVAILABLE")
      assert.strictEqual(cheap.calls.length, 0)
      const summary = yield* capabilities.describe("search")
      assert.strictEqual(summary.defaultProvider, "dear")
      assert.deepStrictEqual(summary.availability, {
        cheap: { status: "unavailable", reason: "no key" },
        dear: { status: "ok" }
      })
      assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 1_000_000n - 5_000n, "only the call that ran was charged")
    }).pipe(Effect.provide(layerWith({ cheap: { ok: false, reason: "no key" } }))))

  it.effect("every provider unavailable: PROVIDER_UNAVAILABLE, nothing held", () =>
    Effect.gen(function*() {
      const capabilities = yield* Capabilities
      const owner = yield* fundedAccount(100n)
      const error = yield* Effect.flip(capabilities.execute(owner, "search", { query: "q" }))
      assert.strictEqual(code(error), "PROVIDER_UNAVAILABLE")
      assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 1_000_000n)
      assert.isNull((yield* capabilities.describe("search")).defaultProvider)
    }).pipe(Effect.provide(layerWith({ cheap: { ok: false, reason: "a" }, dear: { ok: false, reason: "b" } }))))

  it.effect("a degraded provider is still chosen, and listed as degraded with why", () =>
    Effect.gen(function*() {
      const capabilities = yield* Capabilities
      const owner = yield* fundedAccount(100n)
      assert.strictEqual((yield* capabilities.execute(owner, "search", { query: "q" })).provider, "cheap")
      assert.deepStrictEqual((yield* capabilities.describe("search")).availability["cheap"], {
        status: "degraded",
        reason: "no cgroup limits"
      })
    }).pipe(Effect.provide(layerWith({ cheap: { ok: true, degraded: "no cgroup limits" } }))))
})
