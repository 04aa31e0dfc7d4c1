import { PgClient, PgConnection } from "@effect/sql-pg"
import { Context, Deferred, Effect, Exit, Layer, Option, Queue, Redacted, Scope } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { applyNotification } from "../../../adapters/sql/cacheFeed.ts"
import { storeOverClient, storeOverClientWith } from "../../../adapters/sql/Database.ts"
import * as PgliteClient from "../../../adapters/sql/PgliteClient.ts"
import { type CachedAgent, makeReadCache, ReadCache, type ReadCacheShape } from "../../../adapters/sql/ReadCache.ts"
import { unlimitedPolicy } from "../../../src/domain/Agent.ts"
import type { Agent } from "../../../src/domain/Agent.ts"
import { type AccountId, type AgentId, newAccountId, newAgentId } from "../../../src/domain/ids.ts"
import { Store, type StoreShape } from "../../../src/ports/Store.ts"
import { freshDatabaseUrl } from "../../support/postgres.ts"

/**
 * The read cache of the SQL store: its rules on their own, and two stores
 * (two processes' worth: two pools, two caches) on one PostgreSQL database.
 */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Polls `check` until it holds or `timeoutMs` passes; returns the milliseconds it took (no timed assertion). */
const eventually = async (check: () => Promise<boolean>, timeoutMs = 2_000): Promise<number> => {
  const started = performance.now()
  while (performance.now() - started < timeoutMs) {
    if (await check()) return performance.now() - started
    await sleep(2)
  }
  throw new Error(`not true within ${timeoutMs} ms`)
}

const agentEntry = (id: string, keyHash: string, killed = false): CachedAgent => ({
  agent: {
    id: id as AgentId,
    accountId: "acc_1" as AccountId,
    name: "a",
    role: "owner",
    killed,
    killReason: killed ? "owner" : null,
    createdAt: new Date(0),
    lastActiveAt: null,
    deletedAt: null
  },
  policy: unlimitedPolicy,
  keyHash,
  prevKeyHash: null,
  prevKeyExpiresAt: null
})

describe("the read cache on its own", () => {
  const serving = () => {
    const cache = makeReadCache(3)
    cache.reset(true)
    return cache
  }
  const load = (entry: CachedAgent, counter: { n: number }) =>
    Effect.sync(() => {
      counter.n++
      return Option.some(entry)
    })

  it("serves a loaded agent by key and by id until it is invalidated", async () => {
    const cache = serving()
    const loads = { n: 0 }
    const entry = agentEntry("agt_1", "h1")
    for (let i = 0; i < 3; i++) await Effect.runPromise(cache.agentByKey("h1", load(entry, loads)))
    await Effect.runPromise(cache.agentById("agt_1", load(entry, loads)))
    expect(loads.n).toBe(1)
    cache.invalidateAgent("agt_1")
    await Effect.runPromise(cache.agentByKey("h1", load(entry, loads)))
    expect(loads.n).toBe(2)
  })

  it("never keeps what a load read before an invalidation that happened while it ran", async () => {
    const cache = serving()
    const stale = agentEntry("agt_1", "h1", false)
    const gate = Effect.runSync(Deferred.make<void>())
    // The load reads the old row, then waits while the change commits and invalidates.
    const slowLoad = Effect.as(Deferred.await(gate), Option.some(stale))
    const pending = Effect.runPromise(cache.agentByKey("h1", slowLoad))
    await sleep(5)
    cache.invalidateAgent("agt_1")
    Effect.runSync(Deferred.succeed(gate, undefined))
    expect(Option.getOrThrow(await pending).agent.killed).toBe(false)
    const fresh = agentEntry("agt_1", "h1", true)
    const next = await Effect.runPromise(cache.agentByKey("h1", Effect.succeed(Option.some(fresh))))
    expect(Option.getOrThrow(next).agent.killed).toBe(true)
  })

  it("serves and keeps nothing while it is not serving, and starts empty when it serves again", async () => {
    const cache = serving()
    const loads = { n: 0 }
    const entry = agentEntry("agt_1", "h1")
    await Effect.runPromise(cache.agentByKey("h1", load(entry, loads)))
    cache.reset(false)
    await Effect.runPromise(cache.agentByKey("h1", load(entry, loads)))
    await Effect.runPromise(cache.agentByKey("h1", load(entry, loads)))
    expect(loads.n).toBe(3)
    expect(cache.stats()).toMatchObject({ serving: false, agents: 0 })
    cache.reset(true)
    await Effect.runPromise(cache.agentByKey("h1", load(entry, loads)))
    await Effect.runPromise(cache.agentByKey("h1", load(entry, loads)))
    expect(loads.n).toBe(4)
  })

  it("keeps at most its bound of agents, dropping the oldest with its keys", async () => {
    const cache = serving()
    for (let i = 0; i < 5; i++) {
      await Effect.runPromise(cache.agentByKey(`h${i}`, Effect.succeed(Option.some(agentEntry(`agt_${i}`, `h${i}`)))))
    }
    expect(cache.stats().agents).toBe(3)
    const loads = { n: 0 }
    await Effect.runPromise(cache.agentByKey("h0", load(agentEntry("agt_0", "h0"), loads)))
    await Effect.runPromise(cache.agentByKey("h4", load(agentEntry("agt_4", "h4"), loads)))
    expect(loads.n).toBe(1)
  })

  it("caches the approved registry list until the registry changes", async () => {
    const cache = serving()
    let loads = 0
    const load = Effect.sync(() => {
      loads++
      return []
    })
    await Effect.runPromise(cache.approved(load))
    await Effect.runPromise(cache.approved(load))
    expect(loads).toBe(1)
    applyNotification(cache, "registry")
    await Effect.runPromise(cache.approved(load))
    expect(loads).toBe(2)
  })

  it("drops the named agent on a notification, ignores pings, and drops everything on one it does not know", async () => {
    const cache = serving()
    const loads = { n: 0 }
    await Effect.runPromise(cache.agentByKey("h1", load(agentEntry("agt_1", "h1"), loads)))
    await Effect.runPromise(cache.agentByKey("h2", load(agentEntry("agt_2", "h2"), loads)))
    applyNotification(cache, "ping")
    expect(cache.stats().agents).toBe(2)
    applyNotification(cache, "agent:agt_1")
    expect(cache.stats().agents).toBe(1)
    applyNotification(cache, "something-new")
    expect(cache.stats()).toMatchObject({ serving: true, agents: 0 })
  })
})

// ---- over real storage ----------------------------------------------------------

interface Opened {
  readonly store: StoreShape
  readonly cache: ReadCacheShape
  readonly sql: SqlClient.SqlClient
}

const open = async (
  layer: Layer.Layer<Store | ReadCache | SqlClient.SqlClient, unknown>,
  scope: Scope.Closeable
): Promise<Opened> => {
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  return {
    store: Context.get(context, Store),
    cache: Context.get(context, ReadCache),
    sql: Context.get(context, SqlClient.SqlClient)
  }
}

const newAccount = async (store: StoreShape) => {
  const accountId = newAccountId()
  const agent: Agent = {
    id: newAgentId(),
    accountId,
    name: "owner",
    role: "owner",
    killed: false,
    killReason: null,
    createdAt: new Date(),
    lastActiveAt: null,
    deletedAt: null
  }
  const keyHash = Array.from({ length: 64 }, () => "0123456789abcdef"[Math.floor(Math.random() * 16)]).join("")
  await Effect.runPromise(store.createAccount({ accountId, createdAt: agent.createdAt, owner: { agent, keyHash, policy: unlimitedPolicy } }))
  // A second live owner, so that the first may be killed.
  const second: Agent = { ...agent, id: newAgentId(), name: "second" }
  const secondHash = keyHash.split("").reverse().join("")
  await Effect.runPromise(store.createAgent({ agent: second, keyHash: secondHash, policy: unlimitedPolicy }))
  return { accountId, agentId: agent.id, keyHash, secondId: second.id }
}

const read = (opened: Opened, keyHash: string) =>
  Effect.runPromise(opened.store.findAgentByKeyHash(keyHash, new Date()))

describe("two stores with their own caches on one PostgreSQL database", () => {
  const scope = Effect.runSync(Scope.make())
  let a: Opened
  let b: Opened
  let url: string

  const pg = () => PgClient.layer({ url: Redacted.make(url), maxConnections: 4 })

  beforeAll(async () => {
    url = await Effect.runPromise(Scope.provide(freshDatabaseUrl, scope))
    a = await open(storeOverClient.pipe(Layer.provideMerge(pg())), scope)
    b = await open(storeOverClient.pipe(Layer.provideMerge(pg())), scope)
    await eventually(async () => a.cache.stats().serving && b.cache.stats().serving, 10_000)
  }, 60_000)
  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)))

  it("a kill on one store is seen by the other's cache within a bounded wait; the writer sees it at once", async () => {
    const { accountId, agentId, keyHash } = await newAccount(a.store)
    // B serves the agent from memory.
    expect(Option.isSome(await read(b, keyHash))).toBe(true)
    const hits = b.cache.stats().hits
    expect(Option.isSome(await read(b, keyHash))).toBe(true)
    expect(b.cache.stats().hits).toBe(hits + 1)
    expect(Option.isSome(await read(a, keyHash))).toBe(true)

    const result = await Effect.runPromise(a.store.updateAgent(accountId, agentId, { killed: true, at: new Date() }))
    expect(result._tag).toBe("Updated")
    // The writer: its very next read.
    expect(Option.getOrThrow(await read(a, keyHash)).killed).toBe(true)
    // The other: within a bounded wait.
    const ms = await eventually(async () => Option.getOrThrow(await read(b, keyHash)).killed)
    console.log(`kill seen by the other store's cache after ${ms.toFixed(1)} ms`)
  })

  it("a change made outside any store (an operator's SQL) reaches every cache", async () => {
    const { agentId, keyHash } = await newAccount(a.store)
    expect(Option.getOrThrow(await read(a, keyHash)).killed).toBe(false)
    expect(Option.getOrThrow(await read(b, keyHash)).killed).toBe(false)
    const sql = a.sql
    await Effect.runPromise(sql`UPDATE agents SET killed = TRUE, kill_reason = 'owner' WHERE id = ${agentId}`)
    await eventually(async () => Option.getOrThrow(await read(a, keyHash)).killed)
    await eventually(async () => Option.getOrThrow(await read(b, keyHash)).killed)
  })

  it("a lastActiveAt write alone announces nothing; a kill after it does", async () => {
    const { accountId, agentId, secondId } = await newAccount(a.store)
    const heard = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const connection = yield* PgConnection.make({ url: Redacted.make(url) })
      const notifications = yield* connection.listen("spendgate_cache")
      const at = new Date()
      yield* a.store.touchAgent(agentId, at, new Date(at.getTime() - 60_000))
      // Another agent's kill, as a marker: delivered in commit order, the touch's would come before it.
      yield* a.store.updateAgent(accountId, secondId, { killed: true, at })
      const payloads: Array<string> = []
      while (!payloads.includes(`agent:${secondId}`)) {
        const next = yield* Queue.take(notifications).pipe(Effect.timeoutOption(5_000))
        if (Option.isNone(next)) break
        if (next.value.payload !== "ping") payloads.push(next.value.payload)
      }
      return payloads
    })))
    expect(heard).toEqual([`agent:${secondId}`])
  })

  it("when its listening connection dies, a store serves nothing from memory until it listens again", async () => {
    const { keyHash } = await newAccount(a.store)
    await read(b, keyHash)
    expect(b.cache.stats()).toMatchObject({ serving: true })
    // Ends every listening connection on this database (A's and B's).
    await Effect.runPromise(a.sql`
      SELECT pg_terminate_backend(pid) FROM pg_stat_activity
      WHERE application_name = 'spendgate-cache-feed' AND datname = current_database()`)
    await eventually(async () => !b.cache.stats().serving)
    expect(b.cache.stats().agents).toBe(0)
    // It listens again by itself, from an empty cache.
    const ms = await eventually(async () => b.cache.stats().serving && a.cache.stats().serving, 10_000)
    console.log(`listening again ${ms.toFixed(0)} ms after the connection was lost`)
    const misses = b.cache.stats().misses
    await read(b, keyHash)
    expect(b.cache.stats().misses).toBe(misses + 1)
  })
})

describe("the cache over PGlite (one process: in-process invalidation)", () => {
  const scope = Effect.runSync(Scope.make())
  let db: Opened
  beforeAll(async () => {
    db = await open(storeOverClient.pipe(Layer.provideMerge(PgliteClient.layer({ dataDir: undefined }))), scope)
  }, 60_000)
  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)))

  it("serves from memory at once, and the next read after a kill, a policy change or a rotation sees it", async () => {
    expect(db.cache.stats().serving).toBe(true)
    const { accountId, agentId, keyHash } = await newAccount(db.store)
    await read(db, keyHash)
    const hits = db.cache.stats().hits
    await read(db, keyHash)
    expect(db.cache.stats().hits).toBe(hits + 1)
    await Effect.runPromise(db.store.updatePolicy(accountId, agentId, { maxPerCallMicroUsd: 5n }))
    const policy = await Effect.runPromise(db.store.getAgent(accountId, agentId))
    expect(Option.getOrThrow(policy).policy.maxPerCallMicroUsd).toBe(5n)
    await Effect.runPromise(db.store.updateAgent(accountId, agentId, { killed: true, at: new Date() }))
    expect(Option.getOrThrow(await read(db, keyHash)).killed).toBe(true)
    const newHash = "f".repeat(64)
    await Effect.runPromise(db.store.rotateKey(accountId, agentId, { keyHash: newHash, previousExpiresAt: null }))
    expect(Option.isNone(await read(db, keyHash))).toBe(true)
    expect(Option.isSome(await read(db, newHash))).toBe(true)
  })
})

describe("the cache switched off", () => {
  const scope = Effect.runSync(Scope.make())
  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)))

  it("reads the database every time", async () => {
    const db = await open(
      storeOverClientWith({ cache: "off" }).pipe(Layer.provideMerge(PgliteClient.layer({ dataDir: undefined }))),
      scope
    )
    const { keyHash } = await newAccount(db.store)
    await read(db, keyHash)
    await read(db, keyHash)
    expect(db.cache.stats()).toMatchObject({ serving: false, hits: 0, misses: 2 })
  }, 60_000)
})
