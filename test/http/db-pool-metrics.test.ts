import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { storeOverClient } from "../../adapters/sql/Database.ts"
import * as PgliteClient from "../../adapters/sql/PgliteClient.ts"
import { freshPostgresLayer } from "../support/postgres.ts"
import { type RunningServer, startServer } from "../support/server.ts"

/**
 * The database pool in GET /metrics: PostgreSQL's bound and its connections
 * by state (pg_stat_activity, this pool's sessions only), moving as calls
 * hold connections and give them back; PGlite's one connection; nothing for
 * the in-memory store.
 */

const ADMIN = "admin-token-pool-0123456789abcdefgh"

const scrape = async (server: RunningServer): Promise<string> => {
  const response = await fetch(`${server.baseUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } })
  expect(response.status).toBe(200)
  return response.text()
}

const value = (text: string, series: string): number | undefined => {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

/** Scrapes until `probe` holds, for at most `ms` (no fixed sleeps). */
const scrapeUntil = async (server: RunningServer, probe: (text: string) => boolean, ms = 15_000): Promise<string> => {
  const until = Date.now() + ms
  for (;;) {
    const text = await scrape(server)
    if (probe(text)) return text
    if (Date.now() > until) throw new Error(`not seen in time; last scrape:\n${text.split("\n").filter((l) => l.startsWith("spendgate_db")).join("\n")}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

const active = `spendgate_db_connections{driver="postgresql",state="active"}`
const idle = `spendgate_db_connections{driver="postgresql",state="idle"}`

// First: the metric registry is the process's, and the suites below fill it.
describe("database pool metrics: the in-memory store", () => {
  it("has no database series", async () => {
    const memory = await startServer(MemoryStore.layer, { adminToken: ADMIN })
    try {
      const text = await scrape(memory)
      expect(text.split("\n").filter((line) => line.startsWith("spendgate_db_"))).toEqual([])
    } finally {
      await memory.close()
    }
  })
})

describe("database pool metrics: PostgreSQL", () => {
  let server: RunningServer
  beforeAll(async () => {
    // The pool's SqlClient stays visible, so the test can hold connections with it.
    server = await startServer(Layer.provideMerge(storeOverClient, freshPostgresLayer(4)), { adminToken: ADMIN })
  }, 60_000)
  afterAll(() => server.close())

  it("reports the pool's bound and its connections by state, as calls take and return them", async () => {
    const first = await scrape(server)
    expect(first).toContain("# TYPE spendgate_db_pool_max_connections gauge")
    expect(value(first, `spendgate_db_pool_max_connections{driver="postgresql"}`)).toBe(4)
    // The scrape's own read is one active connection.
    expect(value(first, active)).toBe(1)
    expect(value(first, `spendgate_db_connections{driver="postgresql",state="idle_in_transaction"}`)).toBe(0)

    // Three statements hold three connections while they sleep: with the scrape's, the pool is full.
    const hold = Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* Effect.all([1, 2, 3].map(() => sql`SELECT pg_sleep(1.5)`), { concurrency: "unbounded" })
    })
    const held = server.run(hold as unknown as Effect.Effect<void>)
    const busy = await scrapeUntil(server, (text) => value(text, active) === 4)
    expect(value(busy, active)).toBe(4)
    await held

    // Given back: idle, and only the scrape's own active.
    const after = await scrapeUntil(server, (text) => value(text, active) === 1 && (value(text, idle) ?? 0) >= 3)
    expect((value(after, active) ?? 0) + (value(after, idle) ?? 0)).toBeLessThanOrEqual(4)
  }, 60_000)
})

describe("database pool metrics: PGlite", () => {
  let pglite: RunningServer
  beforeAll(async () => {
    pglite = await startServer(storeOverClient.pipe(Layer.provide(PgliteClient.layer({ dataDir: undefined }))), {
      adminToken: ADMIN
    })
  }, 60_000)
  afterAll(() => pglite.close())

  it("PGlite: one connection, in process", async () => {
    const text = await scrape(pglite)
    expect(value(text, `spendgate_db_pool_max_connections{driver="pglite"}`)).toBe(1)
    expect(value(text, `spendgate_db_connections{driver="pglite",state="open"}`)).toBe(1)
  })
})
