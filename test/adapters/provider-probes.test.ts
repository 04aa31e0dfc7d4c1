import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, expect, it as vit } from "vitest"
import * as Spendgate from "../../adapters/embed/Spendgate.ts"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { probedStatuses } from "../../adapters/providersConfig.ts"
import type { Configured, Probe } from "../../adapters/providers/kit/config.ts"
import { FakeProvider, TestGateway } from "../../adapters/testing/index.ts"
import { Capabilities, Providers } from "../../src/capabilities/Capabilities.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { client, type RunningServer, startServer } from "../support/server.ts"
import { fundedAccount } from "../wallet/ledger.contract.ts"

/**
 * The configured providers' start-up probes (probedStatuses) run in the
 * background: the gateway is built, and the server answers, before they end.
 * What states or acts on a provider's availability waits for its verdict:
 * the capability listings, the choice of provider for a call (and for a
 * quote), a stored binding quote's provider when the quote is used, the
 * operator's service health. A probe that dies leaves its provider
 * unavailable.
 */

type Verdict = Effect.Success<Probe>

const cheap = FakeProvider.make("search", { name: "cheap", priceMicroUsd: 1_000n })
const dear = FakeProvider.make("search", { name: "dear", priceMicroUsd: 5_000n })

/** `cheap` with a probe that ends when the test says (or dies, or never ends). */
const probedCheap = (probe: Probe): Configured => ({ name: "cheap", capability: "search", build: Effect.succeed(cheap), probe })

const gatewayWith = (probe: Probe) => {
  cheap.reset()
  dear.reset()
  return TestGateway.layer({ providers: [cheap, dear] }).pipe(Layer.provide(probedStatuses([probedCheap(probe)])))
}

/** Not ended after a while of real time: it waits (for the probe, here). */
const stillWaiting = <A, E>(fiber: Fiber.Fiber<A, E>) =>
  Effect.gen(function*() {
    yield* Effect.promise(() => new Promise((done) => setTimeout(done, 100)))
    return fiber.pollUnsafe() === undefined
  })

describe("start-up probes in the background", () => {
  it.live("the gateway is built before the probe ends; a listing waits for the verdict and states it", () => {
    const verdict = Deferred.makeUnsafe<Verdict>()
    return Effect.gen(function*() {
      const capabilities = yield* Capabilities
      const listing = yield* Effect.forkChild(capabilities.describe("search"))
      assert.isTrue(yield* stillWaiting(listing), "the listing waits for the probe")
      yield* Deferred.succeed(verdict, { ok: false, reason: "no key here" })
      const summary = yield* Fiber.join(listing)
      assert.deepStrictEqual(summary.availability, { cheap: { status: "unavailable", reason: "no key here" }, dear: { status: "ok" } })
      assert.strictEqual(summary.defaultProvider, "dear")
      // Once known, nothing waits: the same answer at once.
      assert.deepStrictEqual((yield* capabilities.describe("search")).availability["cheap"], { status: "unavailable", reason: "no key here" })
    }).pipe(Effect.provide(gatewayWith(Deferred.await(verdict))))
  })

  it.live("a call made before the verdict waits for it, and never runs on a provider it finds unavailable", () => {
    const verdict = Deferred.makeUnsafe<Verdict>()
    return Effect.gen(function*() {
      const capabilities = yield* Capabilities
      const owner = yield* fundedAccount(100n)
      const call = yield* Effect.forkChild(capabilities.execute(owner, "search", { query: "q" }))
      assert.isTrue(yield* stillWaiting(call), "the call waits for the probe")
      assert.strictEqual(cheap.calls.length + dear.calls.length, 0, "nothing ran meanwhile")
      yield* Deferred.succeed(verdict, { ok: false, reason: "no key here" })
      const result = yield* Fiber.join(call)
      assert.strictEqual(result.provider, "dear", "the cheaper provider was found unavailable")
      assert.strictEqual(cheap.calls.length, 0)
      assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 1_000_000n - 5_000n)
    }).pipe(Effect.provide(gatewayWith(Deferred.await(verdict))))
  })

  it.live("a working verdict: the call that waited runs on the cheaper provider; a degraded one is listed with why", () => {
    const verdict = Deferred.makeUnsafe<Verdict>()
    return Effect.gen(function*() {
      const capabilities = yield* Capabilities
      const owner = yield* fundedAccount(100n)
      const call = yield* Effect.forkChild(capabilities.execute(owner, "search", { query: "q" }))
      assert.isTrue(yield* stillWaiting(call))
      yield* Deferred.succeed(verdict, { ok: true, degraded: "no cgroup limits" })
      assert.strictEqual((yield* Fiber.join(call)).provider, "cheap")
      assert.deepStrictEqual((yield* capabilities.describe("search")).availability["cheap"], { status: "degraded", reason: "no cgroup limits" })
    }).pipe(Effect.provide(gatewayWith(Deferred.await(verdict))))
  })

  it.live("the probes start only once what they wait for is done (the server listening), and a listing waits for both", () => {
    const listening = Deferred.makeUnsafe<void>()
    let started = 0
    const probe = Effect.sync((): Verdict => {
      started++
      return { ok: false, reason: "checked after listening" }
    })
    cheap.reset()
    dear.reset()
    const layer = TestGateway.layer({ providers: [cheap, dear] }).pipe(
      Layer.provide(probedStatuses([probedCheap(probe)], Deferred.await(listening)))
    )
    return Effect.gen(function*() {
      const capabilities = yield* Capabilities
      const listing = yield* Effect.forkChild(capabilities.describe("search"))
      assert.isTrue(yield* stillWaiting(listing))
      assert.strictEqual(started, 0, "no probe before the server listens")
      yield* Deferred.succeed(listening, undefined)
      assert.deepStrictEqual((yield* Fiber.join(listing)).availability["cheap"], { status: "unavailable", reason: "checked after listening" })
      assert.strictEqual(started, 1)
    }).pipe(Effect.provide(layer))
  })

  it.live("a probe that dies leaves its provider unavailable, with why", () =>
    Effect.gen(function*() {
      const capabilities = yield* Capabilities
      const availability = (yield* capabilities.describe("search")).availability["cheap"]
      assert.strictEqual(availability?.status, "unavailable")
      assert.match(availability?.status === "unavailable" ? availability.reason : "", /^its start-up check failed: .*the probe broke/)
      const owner = yield* fundedAccount(100n)
      assert.strictEqual((yield* capabilities.execute(owner, "search", { query: "q" })).provider, "dear")
    }).pipe(Effect.provide(gatewayWith(Effect.die(new Error("the probe broke"))))))
})

describe("a binding quote stored before a restart", () => {
  vit("used while the new process's probe runs, it waits for the verdict: refused on an unavailable provider, then run once it works", async () => {
    const dir = mkdtempSync(join(tmpdir(), "spendgate-probes-"))
    try {
      cheap.reset()
      dear.reset()
      const providers = [cheap, dear]
      // The first process: a funded owner and a binding quote on the cheaper provider.
      const { owner, quoteId } = await Effect.runPromise(Effect.provide(
        Effect.gen(function*() {
          const owner = yield* fundedAccount(100n)
          const issued = yield* (yield* Capabilities).quote(owner, "search", { query: "q" })
          expect(issued.quote.provider).toBe("cheap")
          return { owner, quoteId: issued.quote.id }
        }),
        Spendgate.pglite(dir, { providers })
      ))
      // The process after a restart, whose probe of `cheap` has no verdict yet.
      const restarted = (probe: Probe) => Spendgate.pglite(dir, { providers }).pipe(Layer.provide(probedStatuses([probedCheap(probe)])))
      const pay = (capabilities: Capabilities["Service"]) => capabilities.execute(owner, "search", { query: "q" }, { quoteId })

      const unavailable = Deferred.makeUnsafe<Verdict>()
      const refused = await Effect.runPromise(Effect.provide(
        Effect.gen(function*() {
          const call = yield* Effect.forkChild(Effect.flip(pay(yield* Capabilities)))
          const waited = yield* stillWaiting(call)
          const ranMeanwhile = cheap.calls.length
          yield* Deferred.succeed(unavailable, { ok: false, reason: "no key here" })
          const error = yield* Fiber.join(call)
          return { waited, ranMeanwhile, tag: error._tag, balance: (yield* (yield* Wallets).get(owner)).usdMicroUsd }
        }),
        restarted(Deferred.await(unavailable))
      ))
      expect(refused).toEqual({ waited: true, ranMeanwhile: 0, tag: "NoProvider", balance: 1_000_000n })
      expect(cheap.calls.length + dear.calls.length).toBe(0)

      // Refused, the quote is still unused: once the provider works, it pays for the call at its price.
      const works = Deferred.makeUnsafe<Verdict>()
      const paid = await Effect.runPromise(Effect.provide(
        Effect.gen(function*() {
          const call = yield* Effect.forkChild(pay(yield* Capabilities))
          const waited = yield* stillWaiting(call)
          yield* Deferred.succeed(works, { ok: true })
          const result = yield* Fiber.join(call)
          return { waited, provider: result.provider, balance: (yield* (yield* Wallets).get(owner)).usdMicroUsd }
        }),
        restarted(Deferred.await(works))
      ))
      expect(paid).toEqual({ waited: true, provider: "cheap", balance: 1_000_000n - 1_000n })
      expect(cheap.calls.length).toBe(1)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)
})

describe("start-up probes in the background, over HTTP", () => {
  let server: RunningServer | undefined
  afterEach(async () => {
    await server?.close()
    server = undefined
  })

  vit("the server answers /health while a probe runs; the listings and the service health wait for its verdict", async () => {
    const verdict = Deferred.makeUnsafe<Verdict>()
    cheap.reset()
    dear.reset()
    const started = startServer(MemoryStore.layer, {
      adminToken: "admin-token-for-probes-0123456789",
      providers: Layer.mergeAll(Providers.make([cheap, dear]), probedStatuses([probedCheap(Deferred.await(verdict))]))
    })
    // The probe has no verdict: had the start waited for it, this would not end.
    server = await Promise.race([
      started,
      new Promise<never>((_, fail) => setTimeout(() => fail(new Error("the server waited for the probe to start")), 20_000))
    ])
    const api = client(server.baseUrl)
    expect((await api.get("/health")).status).toBe(200)
    const signup = await api.post("/v1/signup", { name: "probes" })
    let listed = false
    const listing = api.get("/v1/capabilities/search", signup.body.apiKey).finally(() => (listed = true))
    let reported = false
    const report = fetch(`${server.baseUrl}/v1/admin/service-health`, {
      headers: { authorization: "Bearer admin-token-for-probes-0123456789" }
    }).then(async (res) => ({ status: res.status, body: (await res.json()) as { providers: Array<{ name: string }> } })).finally(() => (reported = true))
    await new Promise((done) => setTimeout(done, 200))
    expect(listed, "the listing waits for the probe").toBe(false)
    expect(reported, "the service health waits for the probe").toBe(false)
    Deferred.doneUnsafe(verdict, Effect.succeed<Verdict>({ ok: false, reason: "no key here" }))
    const found = await listing
    expect(found.status).toBe(200)
    expect(found.body.providers.find((p: { name: string }) => p.name === "cheap")).toMatchObject({ status: "unavailable", reason: "no key here" })
    expect(found.body.defaultProvider).toBe("dear")
    const health = await report
    expect(health.status).toBe(200)
    const cheapHealth = health.body.providers.find((p) => p.name === "cheap")
    expect(cheapHealth).toMatchObject({ status: "unavailable", reason: "no key here" })
  }, 30_000)
})
