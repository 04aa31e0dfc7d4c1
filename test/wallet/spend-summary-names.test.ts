import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { storeOverClient } from "../../adapters/sql/Database.ts"
import * as PgliteClient from "../../adapters/sql/PgliteClient.ts"
import { Agents } from "../../src/agents/Agents.ts"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import type { AdminStore } from "../../src/ports/AdminStore.ts"
import type { IdempotencyStore } from "../../src/ports/IdempotencyStore.ts"
import type { RegistryStore } from "../../src/ports/RegistryStore.ts"
import { Store } from "../../src/ports/Store.ts"
import { Spend } from "../../src/wallet/Spend.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { client, type RunningServer, startServer, storeBackends } from "../support/server.ts"

/**
 * The spend summary (GET /v1/wallet/spend) names the agents of its
 * `byAgent` lines with one read of the store, whatever their number, not
 * one read per agent; a deleted agent is still named. Over PGlite the
 * names are one SQL statement.
 */

type Storage = Store | AdminStore | IdempotencyStore | RegistryStore

/** The storage, its Store counting the reads of agents (`getAgent`, `agentNames`). */
const countingAgentReads = (base: Layer.Layer<Storage, unknown>) => {
  const counts = { getAgent: 0, agentNames: 0 }
  const layer = Layer.effectContext(Effect.gen(function*() {
    const context = yield* Layer.build(base)
    const store = Context.get(context, Store)
    return Context.add(context, Store, Store.of({
      ...store,
      getAgent: (accountId, agentId) => Effect.suspend(() => (counts.getAgent++, store.getAgent(accountId, agentId))),
      agentNames: (accountId, agentIds) => Effect.suspend(() => (counts.agentNames++, store.agentNames(accountId, agentIds)))
    }))
  }))
  return { counts, layer }
}

const AGENTS = 8

/** An account whose owner and AGENTS workers each made one charge today; the last worker is deleted afterwards. */
const accountWithSpend = async (server: RunningServer) => {
  const api = client(server.baseUrl)
  const signup = await api.post("/v1/signup", { name: "boss" })
  expect(signup.status).toBe(201)
  const ownerKey: string = signup.body.apiKey
  const accountId = signup.body.accountId as AccountId
  const workers: Array<{ id: string; apiKey: string; name: string }> = []
  for (let i = 0; i < AGENTS; i++) {
    const created = await api.post("/v1/agents", { name: `worker-${i}` }, ownerKey)
    expect(created.status).toBe(201)
    workers.push({ id: created.body.id, apiKey: created.body.apiKey, name: `worker-${i}` })
  }
  await server.run(Effect.gen(function*() {
    const agents = yield* Agents
    const spend = yield* Spend
    yield* (yield* Wallets).credit({ accountId, key: "seed", pocket: "usd", amount: 10_000_000n, description: "seed" })
    for (const [i, key] of [ownerKey, ...workers.map((w) => w.apiKey)].entries()) {
      const principal = yield* agents.authenticate(key)
      yield* spend.spend(principal, {
        capability: "search",
        provider: "brave",
        quotedMicroUsd: 100_000n,
        description: "search call",
        run: Effect.succeed({ value: null, actualMicroUsd: 10_000n + BigInt(i) * 1_000n })
      })
    }
  }))
  const deleted = workers[AGENTS - 1]!
  expect((await api.call("DELETE", `/v1/agents/${deleted.id}`, { key: ownerKey })).status).toBeLessThan(300)
  return { ownerKey, ownerId: signup.body.agentId as string, workers }
}

const summaryOf = (server: RunningServer, ownerKey: string) =>
  server.run(Effect.gen(function*() {
    const owner = yield* (yield* Agents).authenticate(ownerKey)
    return yield* (yield* Wallets).spendSummary(owner, { days: 1 })
  }))

describe.each(storeBackends)("spend summary over %s: the agents named in one read", (_name, store) => {
  const counting = countingAgentReads(store())
  let server: RunningServer
  beforeAll(async () => {
    server = await startServer(counting.layer)
  }, 60_000)
  afterAll(() => server?.close())

  it(`names ${AGENTS + 1} agents (a deleted one included) with one agentNames read and no getAgent`, async () => {
    const { ownerKey, ownerId, workers } = await accountWithSpend(server)
    const before = { ...counting.counts }
    const summary = await summaryOf(server, ownerKey)
    expect(counting.counts.agentNames - before.agentNames).toBe(1)
    expect(counting.counts.getAgent - before.getAgent).toBe(0)
    const names = new Map(summary.byAgent.map((line) => [line.agentId, line.name]))
    expect(names).toEqual(new Map([[ownerId, "boss"], ...workers.map((w) => [w.id, w.name] as const)]))
  }, 60_000)

  it("agentNames: the account's agents only, deleted ones included; unknown ids and other accounts' agents left out", async () => {
    const first = await accountWithSpend(server)
    const other = await accountWithSpend(server)
    const accountId = (await server.run(Effect.map(Agents.use((agents) => agents.authenticate(first.ownerKey)), (p) => p.agent.accountId)))
    const ids = [first.ownerId, first.workers[0]!.id, first.workers[AGENTS - 1]!.id, other.workers[0]!.id, "agt_unknown", first.ownerId]
    const agentNames = (agentIds: ReadonlyArray<string>) =>
      server.run(Effect.gen(function*() {
        return yield* (yield* Store).agentNames(accountId, agentIds as ReadonlyArray<AgentId>)
      }))
    const names = await agentNames(ids)
    expect(names).toEqual(new Map([
      [first.ownerId, "boss"],
      [first.workers[0]!.id, "worker-0"],
      [first.workers[AGENTS - 1]!.id, `worker-${AGENTS - 1}`]
    ]))
    expect(await agentNames([])).toEqual(new Map())
  }, 60_000)
})

describe("spend summary over PGlite: the agents' names are one SQL statement", () => {
  const counter = { on: false, agentStatements: [] as Array<string> }
  let server: RunningServer
  beforeAll(async () => {
    // Every statement that reads the agents table, while counting is on.
    const counted = Layer.effect(
      SqlClient.SqlClient,
      Effect.map(Effect.service(SqlClient.SqlClient), (sql) =>
        new Proxy(sql, {
          apply(target, thisArg, args) {
            const strings = args[0]
            if (counter.on && Array.isArray(strings) && "raw" in strings && /\bFROM agents\b/.test(strings.join("?"))) {
              counter.agentStatements.push(strings.join("?").replace(/\s+/g, " ").trim())
            }
            return Reflect.apply(target as unknown as (...a: Array<unknown>) => unknown, thisArg, args)
          }
        }))
    ).pipe(Layer.provide(PgliteClient.layer({ dataDir: undefined })))
    server = await startServer(storeOverClient.pipe(Layer.provide(counted)))
  }, 60_000)
  afterAll(() => server?.close())

  it(`${AGENTS + 1} agents, one statement`, async () => {
    const { ownerKey } = await accountWithSpend(server)
    const owner = await server.run(Agents.use((agents) => agents.authenticate(ownerKey)))
    counter.on = true
    const summary = await server.run(Effect.gen(function*() {
      return yield* (yield* Wallets).spendSummary(owner, { days: 1 })
    }))
    counter.on = false
    expect(summary.byAgent).toHaveLength(AGENTS + 1)
    expect(counter.agentStatements).toHaveLength(1)
  }, 60_000)
})
