import { registryOnly } from "../adapters/services/transport.ts"
/**
 * Spend-pipeline benchmark: reserve → (upstream) → settle cycles through the
 * core services against PostgreSQL, with many concurrent agents, on many
 * wallets and on one shared wallet. Prints figures; asserts nothing.
 *
 *   npm run bench                          # local PostgreSQL, a fresh database
 *   DATABASE_URL=postgres://… npm run bench
 *   BENCH_CALLS=20000 BENCH_CONCURRENCY=64 npm run bench
 *
 * The upstream call is a no-op, so the figures are the gateway's own cost
 * (two short transactions per call, no lock held in between).
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { Reactivity } from "effect/reactivity"
import { storeOverClient } from "../adapters/sql/Database.ts"
import { devRails } from "../adapters/rails/dev.ts"
import { Agents } from "../src/agents/Agents.ts"
import { Providers } from "../src/capabilities/Capabilities.ts"
import type { Principal } from "../src/domain/Agent.ts"
import * as Gateway from "../src/Gateway.ts"
import { RateSource } from "../src/ports/RateSource.ts"
import { Spend } from "../src/wallet/Spend.ts"
import { Wallets } from "../src/wallet/Wallets.ts"

const calls = Number(process.env["BENCH_CALLS"] ?? 10_000)
const concurrency = Number(process.env["BENCH_CONCURRENCY"] ?? 96)
const poolSize = Number(process.env["BENCH_POOL"] ?? 24)
const adminUrl = process.env["POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres"

const admin = (statement: string) =>
  Effect.scoped(Effect.gen(function*() {
    const sql = yield* PgClient.make({ url: Redacted.make(adminUrl), maxConnections: 1 })
    yield* sql.unsafe(statement)
  }).pipe(Effect.provide(Reactivity.layer)))

const withDatabase = async <A>(use: (url: string) => Promise<A>): Promise<A> => {
  if (process.env["DATABASE_URL"] !== undefined) return use(process.env["DATABASE_URL"])
  const name = `spendgate_bench_${Date.now().toString(36)}`
  await Effect.runPromise(admin(`CREATE DATABASE ${name}`))
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  try {
    return await use(url.toString())
  } finally {
    await Effect.runPromise(admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
  }
}

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!

const scenario = (label: string, principals: ReadonlyArray<Principal>) =>
  Effect.gen(function*() {
    const spend = yield* Spend
    const latencies: Array<number> = []
    let failures = 0
    const one = (i: number) =>
      Effect.suspend(() => {
        const started = performance.now()
        return spend.spend(principals[i % principals.length]!, {
          capability: "search",
          provider: "bench",
          quotedMicroUsd: 10_000n,
          description: "bench",
          run: Effect.succeed({ value: undefined, actualMicroUsd: 5_000n })
        }).pipe(
          Effect.tap(() => Effect.sync(() => latencies.push(performance.now() - started))),
          Effect.catchCause(() => Effect.sync(() => failures++))
        )
      })
    // Warm-up: connections, plans, JIT.
    yield* Effect.forEach(Array.from({ length: Math.min(500, calls) }, (_, i) => i), one, { concurrency, discard: true })
    latencies.length = 0
    const started = performance.now()
    yield* Effect.forEach(Array.from({ length: calls }, (_, i) => i), one, { concurrency, discard: true })
    const seconds = (performance.now() - started) / 1000
    latencies.sort((a, b) => a - b)
    console.log(
      `${label.padEnd(34)} ${String(calls).padStart(6)} calls  ${(latencies.length / seconds).toFixed(0).padStart(6)} calls/s` +
        `  p50 ${percentile(latencies, 50).toFixed(1)} ms  p99 ${percentile(latencies, 99).toFixed(1)} ms` +
        (failures > 0 ? `  failures ${failures}` : "")
    )
  })

const setup = (accounts: number, agentsPerAccount: number) =>
  Effect.gen(function*() {
    const agents = yield* Agents
    const wallets = yield* Wallets
    const principals: Array<Principal> = []
    for (let a = 0; a < accounts; a++) {
      const signup = yield* agents.signup({ name: `bench-${a}` })
      const owner = yield* agents.authenticate(signup.apiKey)
      yield* wallets.credit({
        accountId: signup.accountId,
        key: "bench",
        pocket: "usd",
        amount: 1_000_000_000_000n,
        description: "bench funding"
      })
      principals.push(owner)
      for (let i = 1; i < agentsPerAccount; i++) {
        const created = yield* agents.create(owner, { name: `agent-${i}` })
        principals.push(yield* agents.authenticate(created.apiKey))
      }
    }
    return principals
  })

await withDatabase(async (url) => {
  const runtime = ManagedRuntime.make(
    Gateway.layer.pipe(
      Layer.provide(RateSource.none),
      Layer.provide([Providers.make([]), registryOnly]),
      Layer.provide(devRails({ dataDir: undefined, publicUrl: "http://127.0.0.1" })),
      Layer.provide(storeOverClient.pipe(Layer.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: poolSize }))))
    )
  )
  try {
    console.log(`spend pipeline on PostgreSQL: concurrency ${concurrency}, pool ${poolSize}, node ${process.version}`)
    const many = await runtime.runPromise(setup(256, 1))
    await runtime.runPromise(scenario("256 agents on 256 wallets", many))
    const shared = await runtime.runPromise(setup(1, 64))
    await runtime.runPromise(scenario("64 agents on one shared wallet", shared))
  } finally {
    await runtime.dispose()
  }
})
