/**
 * What a hold costs in PostgreSQL for an agent under an hourly limit, as the
 * agent's calls of the last hour pile up. Prints figures; asserts nothing.
 *
 *   npm run bench:velocity                             # this checkout
 *   npm run bench:velocity -- --against=../other       # and another checkout, alternated
 *   npm run bench:velocity -- --limit=0                # an agent without an hourly limit
 *   npm run bench:velocity -- --path=quote             # holds by the store's general path (a binding quote)
 *
 * For each checkout it makes a fresh database on POSTGRES_URL (default
 * postgres://postgres@127.0.0.1:5432/postgres; dropped at the end), applies
 * that checkout's migrations (`spendgate migrate`, from its sources) and sets
 * up one busy agent: an hourly limit of `--limit` cents (default 500), and
 * $50 spent yesterday, more than the limit and outside the last hour. Then
 * one connection calls `spendgate_hold` (the call the server sends for a
 * lone hold: the same decision and writes) `--calls` times at 100 µUSD each,
 * in blocks of `--block`, the checkouts' blocks alternated so both meet the
 * same minutes, and prints each block's p50 and p90. The hour's spend stays
 * below the limit, so every call is held.
 *
 * Each block line also gives PostgreSQL's own time per hold: the time spent
 * inside `spendgate_hold` (the functions it calls included), from
 * `pg_stat_user_functions` with `track_functions = all` set on the bench's
 * databases. It leaves out the round trip, the statement's parse and bind and
 * the commit, so it separates a change to the ledger functions that the
 * block's p50 cannot (docs/performance.md, "A hold's needless reads"). "-"
 * with `--path=quote` (no ledger function) or where the server cannot flush
 * its statistics on demand (`pg_stat_force_next_flush`, PostgreSQL 15).
 *
 * With `--path=quote` each hold is instead a call paying with a binding
 * quote, as the store makes it: a stored quote, then the store's `reserve`
 * with it (the checkout's own SQL store, loaded from its sources), which
 * takes the general path: the wallet locked, a snapshot read, the rules
 * decided in TypeScript, the writes. Its figures include storing the quote.
 *
 * Options (flag or environment variable):
 *   --calls=N     BENCH_CALLS     holds per checkout (default 24000)
 *   --block=N     BENCH_BLOCK     holds per block (default 3000)
 *   --limit=C     BENCH_LIMIT     the agent's hourly limit in cents; 0: none (default 500)
 *   --against=DIR BENCH_AGAINST   a second checkout, measured alternately
 *   --path=P      BENCH_PATH      hold (spendgate_hold, default) or quote (the store's general path)
 */
import { spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { join, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Redacted, Result } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import { option, wholeNumber } from "./options.ts"

const whole = (name: string, text: string, min: number) => wholeNumber("bench:velocity", name, text, min)

const calls = whole("calls", option("calls", "BENCH_CALLS", "24000"), 1)
const block = whole("block", option("block", "BENCH_BLOCK", "3000"), 1)
const limitCents = whole("limit", option("limit", "BENCH_LIMIT", "500"), 0)
const against = option("against", "BENCH_AGAINST", "")
const path = option("path", "BENCH_PATH", "hold")
if (path !== "hold" && path !== "quote") {
  console.error(`bench:velocity: --path must be hold or quote, not ${JSON.stringify(path)}`)
  process.exit(2)
}
const adminUrl = process.env["POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres"
const root = resolve(import.meta.dirname, "..")
const checkouts = against === "" ? [root] : [root, resolve(against)]

const DAY_MS = 86_400_000
const utcDay = (at: Date) => at.toISOString().slice(0, 10)
const percentile = (sorted: ReadonlyArray<number>, p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!

interface Side {
  readonly checkout: string
  readonly sql: SqlClient.SqlClient
  readonly blocks: Array<{ readonly p50: number; readonly p90: number; readonly inDatabaseUs: number | null }>
  /** With --path=quote: one call paying with a binding quote, through the checkout's own store. */
  readonly quoted?: (now: Date, id: string) => Effect.Effect<string>
}

/**
 * One call paying with a binding quote through the checkout's SQL store (its sources): the
 * quote stored, then `reserve` with it, decided by `planHold` (so the store knows the rules as
 * its callers give them).
 */
const quotedHolds = (checkout: string, sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    // Modules of another checkout (another copy of each type): typed loosely on purpose.
    const load = (file: string): Promise<any> => import(pathToFileURL(join(checkout, file)).href)
    const [database, ports, decide, quotes] = yield* Effect.promise(() =>
      Promise.all([load("adapters/sql/Database.ts"), load("src/ports/Store.ts"), load("src/wallet/decide.ts"), load("src/quotes/Quote.ts")])
    )
    const built = yield* Layer.build(
      (database.storeOverClient as Layer.Layer<never, unknown, SqlClient.SqlClient>).pipe(
        Layer.provide(Layer.succeed(SqlClient.SqlClient, sql))
      )
    )
    const store: any = Context.get(built as Context.Context<any>, ports.Store)
    return (now: Date, id: string) =>
      Effect.gen(function*() {
        const quote = {
          id: `quo_${id}`,
          accountId: "acc_bench",
          agentId: "agt_bench",
          capability: "search",
          provider: "bench",
          model: null,
          requestHash: "0".repeat(64),
          quotedMicroUsd: 100n,
          createdAt: now,
          expiresAt: new Date(now.getTime() + 60_000),
          usedAt: null,
          reservationId: null
        }
        yield* store.createQuote(quote) as Effect.Effect<void>
        const result = (yield* store.reserve({
          reservationId: `res_${id}`,
          auditId: `aud_${id}`,
          accountId: "acc_bench",
          agentId: "agt_bench",
          capability: "search",
          provider: "bench",
          quotedMicroUsd: 100n,
          rate: null,
          day: utcDay(now),
          now,
          expiresAt: new Date(now.getTime() + 900_000),
          decide: (snapshot: unknown) => decide.planHold(snapshot, "search", 100n, null),
          standardRules: true,
          quote: {
            quoteId: quote.id,
            check: (found: unknown, at: Date) =>
              quotes.checkQuoteUse(found, { quoteId: quote.id, agentId: "agt_bench", capability: "search", requestHash: quote.requestHash, now: at })
          }
        }) as Effect.Effect<Result.Result<unknown, { readonly _tag: string }>>)
        return Result.isSuccess(result) ? "held" : result.failure._tag
      })
  })

/**
 * One statement on the admin database, on a client of its own. Not one client for the run: the
 * databases are dropped by finalizers of the run's scope, and a client made in that scope cannot
 * open a connection once the scope is closing (its pool starts connections in the scope), so the
 * drop would wait forever whenever the pool had closed its idle connection (after a minute or more
 * without use, as in a long run).
 */
const admin = (statement: string) =>
  Effect.scoped(Effect.gen(function*() {
    const sql = yield* PgClient.make({ url: Redacted.make(adminUrl), maxConnections: 1 })
    yield* sql.unsafe(statement)
  }))

const program = Effect.gen(function*() {
  const sides: Array<Side> = []
  const stamp = `${Date.now().toString(36)}_${process.pid}`
  for (const [i, checkout] of checkouts.entries()) {
    const database = `spendgate_bench_velocity_${stamp}_${i}`
    yield* admin(`CREATE DATABASE ${database}`)
    yield* Effect.addFinalizer(() => admin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).pipe(Effect.ignore))
    // Read when a connection opens: set before the migrations' and the holds' connections.
    yield* admin(`ALTER DATABASE ${database} SET track_functions = 'all'`)
    const url = new URL(adminUrl)
    url.pathname = `/${database}`
    const migrated = spawnSync(process.execPath, ["bin/spendgate.js", "migrate"], {
      cwd: checkout,
      env: { ...process.env, DATABASE_URL: url.toString(), SPENDGATE_BUNDLE: "off" },
      encoding: "utf8"
    })
    if (migrated.status !== 0) return yield* Effect.die(new Error(`spendgate migrate failed in ${checkout}: ${migrated.stderr}`))
    const sql = yield* PgClient.make({ url: Redacted.make(url.toString()), maxConnections: 1 })
    const now = new Date()
    const yesterday = utcDay(new Date(now.getTime() - DAY_MS))
    yield* sql`INSERT INTO accounts (id, created_at) VALUES ('acc_bench', ${now})`
    yield* sql`INSERT INTO agents (id, account_id, name, role, killed, key_hash, created_at, max_per_hour_micro_usd,
        auto_kill, allowed_capabilities)
      VALUES ('agt_bench', 'acc_bench', 'busy', 'agent', false, ${randomBytes(32).toString("hex")}, ${now},
        ${limitCents === 0 ? null : BigInt(limitCents) * 10_000n}, false, '')`
    yield* sql`INSERT INTO wallets (account_id, usd_micro, sats_msat) VALUES ('acc_bench', 1000000000000, 0)`
    // $50 spent yesterday, in its first hour (where the schema counts days by the hour).
    const [columns] = yield* sql<{ n: string | number }>`
      SELECT count(*) AS n FROM information_schema.columns
      WHERE table_name = 'agent_daily_spend' AND column_name = 'hours_micro_usd'`
    yield* Number(columns!.n) > 0
      ? sql`INSERT INTO agent_daily_spend (agent_id, day, spent_micro_usd, hours_micro_usd)
          VALUES ('agt_bench', ${yesterday}, 50000000, array_cat(ARRAY[50000000]::bigint[], array_fill(0::bigint, ARRAY[23])))`
      : sql`INSERT INTO agent_daily_spend (agent_id, day, spent_micro_usd) VALUES ('agt_bench', ${yesterday}, 50000000)`
    sides.push({ checkout, sql, blocks: [], ...(path === "quote" ? { quoted: yield* quotedHolds(checkout, sql) } : {}) })
  }

  const hold = (side: Side) =>
    Effect.gen(function*() {
      const now = new Date()
      const id = randomBytes(12).toString("hex")
      if (side.quoted !== undefined) {
        const outcome = yield* side.quoted(now, id)
        if (outcome !== "held") return yield* Effect.die(new Error(`a hold was not held: ${outcome}`))
        return
      }
      const [row] = yield* side.sql<{ outcome: string }>`
        SELECT outcome FROM spendgate_hold('acc_bench'::text, 'agt_bench'::text, ${`res_${id}`}::text,
          ${`aud_${id}`}::text, 'search'::text, 'bench'::text, 100::bigint, NULL::bigint, ${utcDay(now)}::text,
          ${now}::timestamptz, ${new Date(now.getTime() + 900_000)}::timestamptz, 'search'::text)`
      if (row?.outcome !== "held") return yield* Effect.die(new Error(`a hold was not held: ${row?.outcome}`))
    })

  /**
   * `spendgate_hold`'s calls and total time (ms) so far, as the statistics hold them: this
   * connection's own are flushed first (the holds ran on it). Undefined where that cannot be done.
   */
  const holdFunction = (side: Side) =>
    Effect.gen(function*() {
      yield* side.sql`SELECT pg_stat_force_next_flush()`
      const [row] = yield* side.sql<{ calls: string | number; total: string | number }>`
        SELECT COALESCE(SUM(calls), 0) AS calls, COALESCE(SUM(total_time), 0) AS total
        FROM pg_stat_user_functions WHERE funcname = 'spendgate_hold'`
      return { calls: Number(row!.calls), totalMs: Number(row!.total) }
    }).pipe(Effect.orElseSucceed(() => undefined))

  const blocks = Math.ceil(calls / block)
  for (let b = 0; b < blocks; b++) {
    const size = Math.min(block, calls - b * block)
    // Alternate which checkout goes first.
    for (const side of b % 2 === 0 ? sides : [...sides].reverse()) {
      const times: Array<number> = []
      const before = side.quoted === undefined ? yield* holdFunction(side) : undefined
      for (let n = 0; n < size; n++) {
        const started = performance.now()
        yield* hold(side)
        times.push(performance.now() - started)
      }
      const after = before === undefined ? undefined : yield* holdFunction(side)
      const inDatabaseUs = before === undefined || after === undefined || after.calls === before.calls
        ? null
        : (after.totalMs - before.totalMs) * 1000 / (after.calls - before.calls)
      times.sort((x, y) => x - y)
      side.blocks.push({ p50: percentile(times, 0.5), p90: percentile(times, 0.9), inDatabaseUs })
    }
    console.log(`after ${Math.min(calls, (b + 1) * block)} holds: ` + sides.map((s) => {
      const last = s.blocks[s.blocks.length - 1]!
      const inDatabase = last.inDatabaseUs === null ? "-" : `${Math.round(last.inDatabaseUs)} µs`
      return `${s.checkout}: p50 ${last.p50.toFixed(2)} ms, p90 ${last.p90.toFixed(2)} ms, in PostgreSQL ${inDatabase}`
    }).join(" | "))
  }
  // The clean-up (the stores closed, the databases dropped) is bounded all the same: if it ever
  // waits, the bench says which databases may be left and stops.
  const left = sides.map((_, i) => `spendgate_bench_velocity_${stamp}_${i}`).join(", ")
  setTimeout(() => {
    console.error(`bench:velocity: the clean-up did not finish within 30 s; these databases may be left: ${left}`)
    process.exit(1)
  }, 30_000).unref()
})

console.log(
  `Spendgate velocity benchmark: ${calls} holds a checkout in blocks of ${block}, ` +
    `hourly limit ${limitCents === 0 ? "none" : `${limitCents} cents`}, $50 spent yesterday, ` +
    (path === "quote" ? "each a call with a binding quote (the store's general path)" : "each by spendgate_hold")
)
await Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(Reactivity.layer)))
