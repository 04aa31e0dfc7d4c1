import { spawnSync } from "node:child_process"
import { join } from "node:path"
import { Effect, Redacted } from "effect"
import { PgClient } from "@effect/sql-pg"
import { Reactivity } from "effect/reactivity"
import { describe, expect, it } from "vitest"

/**
 * `npm run bench:velocity` and `npm run bench:memory` with a few calls: each
 * runs end to end, against a second checkout as well (this one again), prints
 * a line per block for each checkout, and bench:velocity drops the databases
 * it made (by `spendgate_hold`, or by the store's general path with
 * `--path=quote`). Bad options are refused. No figure is asserted.
 */

const root = join(import.meta.dirname, "..", "..")
const adminUrl = process.env["POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres"

const run = (script: string, args: ReadonlyArray<string>) =>
  spawnSync(process.execPath, [join(root, "bench", script), ...args], { cwd: root, encoding: "utf8", timeout: 120_000 })

const velocityDatabases = () =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const sql = yield* PgClient.make({ url: Redacted.make(adminUrl), maxConnections: 1 })
    const rows = yield* sql<{ datname: string }>`SELECT datname FROM pg_database WHERE datname LIKE 'spendgate_bench_velocity_%'`
    return rows.map((r) => r.datname)
  })).pipe(Effect.provide(Reactivity.layer)))

/**
 * bench:velocity's block lines: one per block, as named, each with both checkouts' p50 and p90
 * and PostgreSQL's own time per hold (a figure in µs by `spendgate_hold`, "-" by the general path).
 */
const expectVelocityBlocks = (stdout: string, blocks: ReadonlyArray<string>, inDatabase: "µs" | "-" = "µs") => {
  const lines = stdout.split("\n").filter((line) => line.startsWith("after "))
  expect(lines.map((line) => line.slice(0, line.indexOf(":")))).toEqual(blocks)
  const pattern = inDatabase === "µs"
    ? /p50 \d+\.\d\d ms, p90 \d+\.\d\d ms, in PostgreSQL [1-9]\d* µs/g
    : /p50 \d+\.\d\d ms, p90 \d+\.\d\d ms, in PostgreSQL -/g
  for (const line of lines) expect(line.match(pattern)).toHaveLength(2)
}

describe("the ledger's benchmarks", () => {
  it("bench:velocity holds for a busy agent in both checkouts, block by block, and drops its databases", async () => {
    const before = await velocityDatabases()
    const result = run("velocity.ts", ["--calls=40", "--block=20", `--against=${root}`])
    expect(result.status, result.stderr).toBe(0)
    expect(result.stdout).toContain("hourly limit 500 cents, $50 spent yesterday")
    expectVelocityBlocks(result.stdout, ["after 20 holds", "after 40 holds"])
    expect(await velocityDatabases()).toEqual(before)
  }, 120_000)

  it("bench:velocity by the store's general path (calls with binding quotes), in both checkouts", async () => {
    const before = await velocityDatabases()
    const result = run("velocity.ts", ["--calls=30", "--block=15", "--path=quote", `--against=${root}`])
    expect(result.status, result.stderr).toBe(0)
    expect(result.stdout).toContain("each a call with a binding quote (the store's general path)")
    expectVelocityBlocks(result.stdout, ["after 15 holds", "after 30 holds"], "-")
    expect(await velocityDatabases()).toEqual(before)
    const bad = run("velocity.ts", ["--path=sideways"])
    expect(bad.status).toBe(2)
    expect(bad.stderr).toContain("--path must be hold or quote")
  }, 120_000)

  it("bench:velocity without an hourly limit, and a bad option refused", () => {
    const none = run("velocity.ts", ["--calls=10", "--block=10", "--limit=0"])
    expect(none.status, none.stderr).toBe(0)
    expect(none.stdout).toContain("hourly limit none")
    const bad = run("velocity.ts", ["--calls=0"])
    expect(bad.status).toBe(2)
    expect(bad.stderr).toContain("--calls must be a whole number of at least 1")
  }, 120_000)

  it("bench:memory calls through the memory store in both checkouts, with and without an hourly limit", () => {
    for (const limit of ["0", "1000"]) {
      const result = run("memory.ts", ["--calls=60", "--block=30", `--limit=${limit}`, `--against=${root}`])
      expect(result.status, result.stderr).toBe(0)
      expect(result.stdout).toContain(limit === "0" ? "hourly limit none" : "hourly limit $1000")
      const lines = result.stdout.split("\n").filter((line) => line.startsWith("after "))
      expect(lines.map((line) => line.slice(0, line.indexOf(":")))).toEqual(["after 30 calls", "after 60 calls"])
      for (const line of lines) expect(line.match(/\d+ µs a call/g)).toHaveLength(2)
    }
    const bad = run("memory.ts", ["--block=x"])
    expect(bad.status).toBe(2)
    expect(bad.stderr).toContain("--block must be a whole number of at least 1")
  }, 120_000)
})
