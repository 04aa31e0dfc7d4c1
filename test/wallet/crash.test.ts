import { spawn } from "node:child_process"
import { join } from "node:path"
import { Effect, Exit, Option, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { AccountId } from "../../src/domain/ids.ts"
import { settleIdsOf, Store } from "../../src/ports/Store.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { freshDatabaseUrl } from "../support/postgres.ts"
import { openBooks } from "../support/books.ts"

/**
 * A gateway process on PostgreSQL is killed (SIGKILL) while its call waits
 * on the upstream: the call started, so the recovery sweep of another
 * process (the rule of docs/ledger-recovery.md) charges the hold at its
 * quote, exactly once, under the ids the call's receipt would have named;
 * the store's plain sweep (no capture) would release it instead.
 */
describe("a process killed mid-call on PostgreSQL", () => {
  const scope = Effect.runSync(Scope.make())
  let url: string

  beforeAll(async () => {
    url = await Effect.runPromise(Scope.provide(freshDatabaseUrl, scope))
  })
  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)))

  it("leaves a hold that recovery charges at its quote, once", async () => {
    const child = spawn(process.execPath, [join(import.meta.dirname, "..", "support", "crash-child.ts")], {
      env: { PATH: process.env["PATH"] ?? "", DATABASE_URL: url },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    const ids = await new Promise<{ accountId: string; agentId: string }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`child did not reach the upstream call:\n${output}`)), 30_000)
      const onData = (chunk: Buffer) => {
        output += chunk.toString()
        if (output.includes("HOLDING")) {
          clearTimeout(timer)
          resolve(JSON.parse(output.split("\n").find((line) => line.startsWith("{"))!))
        }
      }
      child.stdout.on("data", onData)
      child.stderr.on("data", onData)
      child.once("exit", (code) => reject(new Error(`child exited early (${code}):\n${output}`)))
    })
    child.removeAllListeners("exit")
    const exited = new Promise((resolve) => child.once("exit", resolve))
    child.kill("SIGKILL")
    await exited

    const runtime = openBooks(url, undefined)
    try {
      const accountId = ids.accountId as AccountId
      await runtime.runPromise(Effect.gen(function*() {
        const store = yield* Store
        const wallets = yield* Wallets
        expect((yield* store.getWallet(accountId)).usdMicroUsd).toBe(600_000n)
        const held = yield* store.listReservations(accountId, { limit: 10, offset: 0 })
        expect(held.items.map((r) => r.status)).toEqual(["held"])
        // Before the hold expires the sweep leaves it alone.
        expect(yield* store.sweepExpired(new Date(), 100)).toBe(0)
        const later = new Date(held.items[0]!.expiresAt.getTime() + 1)
        const capture = { running: new Set<string>() }
        const ended = yield* Effect.all(
          [store.sweepExpired(later, 100, capture), store.sweepExpired(later, 100, capture), store.sweepExpired(later, 100, capture)],
          { concurrency: "unbounded" }
        )
        expect(ended.reduce((a, b) => a + b, 0)).toBe(1)
        expect(yield* store.sweepExpired(later, 100, capture)).toBe(0)
        // Charged its quote (40 cents): nothing comes back.
        expect((yield* store.getWallet(accountId)).usdMicroUsd).toBe(600_000n)
        expect(yield* wallets.verifyChain(accountId)).toBeNull()
        const audit = yield* store.listAudit(accountId, 0n, 10)
        expect(audit.map((r) => r.kind)).toEqual(["credit", "reserve", "settle"])
        const { transactionId, auditId } = settleIdsOf(held.items[0]!.id)
        expect(audit[2]!.id).toBe(auditId)
        const charge = Option.getOrThrow(yield* store.getTransaction(accountId, transactionId))
        expect(charge.amountMicroUsd).toBe(400_000n)
      }))
    } finally {
      await runtime.dispose()
    }
  }, 60_000)
})
