import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Exit, Layer, Redacted, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as WebhookHttp from "../../adapters/net/webhookTransport.ts"
import { storeOverClient } from "../../adapters/sql/Database.ts"
import type { Agent } from "../../src/domain/Agent.ts"
import { newAccountId, newAgentId } from "../../src/domain/ids.ts"
import { Store } from "../../src/ports/Store.ts"
import { defaultWebhookSettings, newEndpointId, Webhooks, WebhookSettings } from "../../src/webhooks/Webhooks.ts"
import { newWebhookSecret } from "../../src/webhooks/signing.ts"
import { freshDatabaseUrl } from "../support/postgres.ts"
import { type Receiver, startReceiver } from "../support/webhookReceiver.ts"

/**
 * Two instances (two connection pools, two workers) over one PostgreSQL
 * database deliver one outbox concurrently: every event reaches the receiver
 * exactly once, and both instances took part.
 */

const EVENTS = 120

const policy = {
  maxPerCallMicroUsd: null,
  maxPerDayMicroUsd: null,
  maxPerMonthMicroUsd: null,
  maxPerHourMicroUsd: null,
  maxCallsPerMinute: null,
  autoKill: false,
  allowedCapabilities: []
}

const agentOf = (accountId: ReturnType<typeof newAccountId>, role: "owner" | "agent", name: string): Agent => ({
  id: newAgentId(),
  accountId,
  name,
  role,
  killed: false,
  killReason: null,
  createdAt: new Date(),
  lastActiveAt: null,
  deletedAt: null
})

describe("two webhook workers on one PostgreSQL database", () => {
  const scope = Effect.runSync(Scope.make())
  let receiver: Receiver
  let instances: ReadonlyArray<Context.Context<Webhooks | Store>>
  const run = <A>(i: number, effect: Effect.Effect<A, never, Webhooks | Store>) =>
    Effect.runPromise(Effect.provideContext(effect, instances[i]!))

  beforeAll(async () => {
    receiver = await startReceiver()
    // Each request is held a little, so that the two workers' passes overlap.
    receiver.respond = () => 200
    const url = await Effect.runPromise(Scope.provide(freshDatabaseUrl, scope))
    const instance = () =>
      Webhooks.layer.pipe(
        Layer.provideMerge(storeOverClient),
        Layer.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 4 })),
        Layer.provide(WebhookHttp.layer({ allowHosts: [`127.0.0.1:${receiver.port}`] })),
        Layer.provide(Layer.succeed(WebhookSettings, { ...defaultWebhookSettings, batch: 7, concurrency: 3 }))
      )
    // One at a time: both run the migrations, which must not race on a fresh database.
    const first = await Effect.runPromise(Layer.buildWithScope(instance(), scope))
    const second = await Effect.runPromise(Layer.buildWithScope(instance(), scope))
    instances = [first, second]
  }, 60_000)
  afterAll(async () => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await receiver?.close()
  })

  it("delivers every event exactly once", async () => {
    const accountId = newAccountId()
    const secret = newWebhookSecret()
    receiver.secrets = [secret]
    await run(0, Effect.gen(function*() {
      const store = yield* Store
      const owner = agentOf(accountId, "owner", "owner")
      yield* store.createAccount({ accountId, createdAt: new Date(), owner: { agent: owner, keyHash: "a".repeat(64), policy } })
      yield* store.createWebhookEndpoint({
        id: newEndpointId(),
        accountId,
        url: receiver.url,
        description: "",
        events: [],
        enabled: true,
        secret,
        previousSecret: null,
        previousSecretExpiresAt: null,
        consecutiveFailures: 0,
        disabledAt: null,
        createdAt: new Date(),
        updatedAt: new Date()
      })
      for (let i = 0; i < EVENTS; i++) {
        yield* store.createAgent({
          agent: agentOf(accountId, "agent", `a${i}`),
          keyHash: i.toString(16).padStart(64, "0"),
          policy
        })
      }
    }))
    const counts = [0, 0]
    const worker = (i: number) =>
      Effect.gen(function*() {
        const webhooks = yield* Webhooks
        for (let pass = 0; pass < 200; pass++) {
          const n = yield* webhooks.deliverDue
          counts[i]! += n
          if (n === 0 && receiver.received.length >= EVENTS) return
          if (n === 0) yield* Effect.sleep("10 millis")
        }
      })
    await Promise.all([run(0, worker(0)), run(1, worker(1))])

    const ids = receiver.received.map((r) => r.id)
    expect(ids).toHaveLength(EVENTS)
    expect(new Set(ids).size).toBe(EVENTS)
    expect(receiver.received.every((r) => r.verifiedWith.length === 1)).toBe(true)
    expect(counts[0]! + counts[1]!).toBe(EVENTS)
    expect(counts[0]).toBeGreaterThan(0)
    expect(counts[1]).toBeGreaterThan(0)
    const log = await run(1, Effect.gen(function*() {
      const store = yield* Store
      const endpoints = yield* store.listWebhookEndpoints(accountId, { limit: 1, offset: 0 })
      return yield* store.listWebhookDeliveries(accountId, endpoints.items[0]!.id, { limit: 100, offset: 0 })
    }))
    expect(log.total).toBe(EVENTS)
    expect(log.items.every((d) => d.status === "succeeded" && d.attempts === 1)).toBe(true)
  }, 60_000)

  it("a leased delivery is not claimed by the other instance until its lease ends", async () => {
    const accountId = newAccountId()
    await run(0, Effect.gen(function*() {
      const store = yield* Store
      const owner = agentOf(accountId, "owner", "owner")
      yield* store.createAccount({ accountId, createdAt: new Date(), owner: { agent: owner, keyHash: "b".repeat(64), policy } })
      yield* store.createWebhookEndpoint({
        id: newEndpointId(),
        accountId,
        url: receiver.url,
        description: "",
        events: [],
        enabled: true,
        secret: newWebhookSecret(),
        previousSecret: null,
        previousSecretExpiresAt: null,
        consecutiveFailures: 0,
        disabledAt: null,
        createdAt: new Date(),
        updatedAt: new Date()
      })
      yield* store.createAgent({ agent: agentOf(accountId, "agent", "leased"), keyHash: "c".repeat(64), policy })
    }))
    const now = new Date(Date.now() + 1000)
    const leaseUntil = new Date(now.getTime() + 60_000)
    const claim = (i: number, at: Date) =>
      run(i, Effect.gen(function*() {
        return yield* (yield* Store).claimWebhookDeliveries(at, 100, new Date(at.getTime() + 60_000))
      }))
    const [a, b] = await Promise.all([claim(0, now), claim(1, now)])
    expect(a.length + b.length).toBe(1)
    const claimed = (a[0] ?? b[0])!
    expect(claimed.attempt).toBe(1)
    expect(await claim(1, new Date(leaseUntil.getTime() - 1))).toHaveLength(0)
    // After the lease, the attempt is taken again (at least once); the first claim's late result is then stale.
    const again = await claim(0, leaseUntil)
    expect(again.map((c) => c.attempt)).toEqual([2])
    const stale = await run(1, Effect.gen(function*() {
      return yield* (yield* Store).recordWebhookAttempt({
        deliveryId: claimed.delivery.id,
        attempt: 1,
        at: leaseUntil,
        ok: true,
        statusCode: 200,
        error: null,
        nextAttemptAt: null,
        disableAfter: 20
      })
    }))
    expect(stale).toBe("stale")
  })
})
