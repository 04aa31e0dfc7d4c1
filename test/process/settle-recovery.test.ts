import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Exit, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { AccountId } from "../../src/domain/ids.ts"
import { Store } from "../../src/ports/Store.ts"
import { Spend } from "../../src/wallet/Spend.ts"
import { chatCompletion } from "../providers/fakeLlm.ts"
import { checkAccount } from "../support/ledger-check.ts"
import { freshDatabaseUrl } from "../support/postgres.ts"
import { type ServerProcess, startServerProcess } from "../support/server-process.ts"
import { client, fundByDevCard } from "../support/server.ts"
import { openBooks } from "../support/books.ts"

/**
 * The settle of a paid call is committed after its answer (docs/ledger-recovery.md).
 * The real server process runs with SETTLE_DELAY_MS=60000 and SETTLE_WHEN_IDLE=wait, so that an answered
 * call's settle lands only when the next reserve of its wallet carries it (or a
 * read, or shutdown, asks for it). Then:
 *
 * - `kill -9` right after the last answer: the earlier calls are charged exactly
 *   what their receipts say (their settles rode in the next call's commit); the
 *   last call's hold is still held, and recovery charges it at its quote, under
 *   the audit id its receipt named — never free, never twice;
 * - SIGTERM instead: the last settle lands before the process exits.
 */

const startUpstream = () =>
  new Promise<{ origin: string; close: () => Promise<void> }>((resolve) => {
    const server = Http.createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}")
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify(chatCompletion(body, { promptTokens: 10, completionTokens: 20 })))
      })
    })
    server.listen(0, "127.0.0.1", () => {
      resolve({
        origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        close: () =>
          new Promise((done) => {
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })

describe("settles after the answer, and recovery (PostgreSQL, real server process)", () => {
  const scope = Effect.runSync(Scope.make())
  const dataDir = mkdtempSync(join(tmpdir(), "spendgate-settle-"))
  let databaseUrl: string
  let upstream: Awaited<ReturnType<typeof startUpstream>>
  let running: ServerProcess | undefined

  beforeAll(async () => {
    databaseUrl = await Effect.runPromise(Scope.provide(freshDatabaseUrl, scope))
    upstream = await startUpstream()
  }, 60_000)
  afterAll(async () => {
    await running?.kill9()
    await upstream?.close()
    await Effect.runPromise(Scope.close(scope, Exit.void))
    rmSync(dataDir, { recursive: true, force: true })
  })

  /** The same database, opened by the test once the server is gone. */
  const storage = () => openBooks(databaseUrl, dataDir)

  /** A funded account on a fresh server with settles held back; then `calls` paid calls, one after another. */
  const callsOnServer = async (calls: number) => {
    const server = await startServerProcess({
      DATABASE_URL: databaseUrl,
      DATA_DIR: dataDir,
      LLM_BASE_URL: `${upstream.origin}/v1`,
      BUILTIN_SPEAK: "off",
      BUILTIN_READ: "off",
      BUILTIN_SCRAPE: "off",
      SETTLE_DELAY_MS: "60000",
      SETTLE_WHEN_IDLE: "wait",
      LOG_LEVEL: "Info"
    })
    running = server
    const api = client(server.baseUrl)
    const signup = await api.post("/v1/signup", { name: "settle" })
    const key = signup.body.apiKey as string
    expect((await fundByDevCard(server.baseUrl, key, 5000)).status).toBe(200)
    const receipts: Array<{ auditId: string; chargedUsdCents: number; quotedUsdCents: number }> = []
    for (let i = 0; i < calls; i++) {
      const answer = await api.post("/v1/capabilities/reason", { prompt: `question ${i}`, maxTokens: 200 }, key)
      expect(answer.status).toBe(200)
      receipts.push(answer.body.metadata)
    }
    return { server, receipts, accountId: signup.body.accountId as AccountId }
  }

  const cents = (microUsd: bigint) => Number(microUsd) / 10_000

  it("kill -9 after the answers: settles that landed stand, the last hold is charged at its quote by recovery, once", async () => {
    const { server, receipts, accountId } = await callsOnServer(4)
    // Every receipt charged less than its quote, so a capture is visible.
    for (const r of receipts) expect(r.chargedUsdCents).toBeLessThan(r.quotedUsdCents)
    await server.kill9()

    const books = storage()
    try {
      await books.runPromise(Effect.gen(function*() {
        const store = yield* Store
        const audit = yield* store.listAudit(accountId, 0n, 1000)
        const settleOf = (auditId: string) => audit.find((a) => a.id === auditId && a.kind === "settle")
        // The first three settles landed with the next call's reserve, at what the receipts say.
        for (const r of receipts.slice(0, 3)) {
          const record = settleOf(r.auditId)
          expect(record, `settle ${r.auditId}`).toBeDefined()
          expect(cents(record!.amountMicroUsd)).toBe(r.chargedUsdCents)
        }
        // The last call was answered; its settle had not landed when the process died.
        const last = receipts[3]!
        expect(settleOf(last.auditId)).toBeUndefined()
        const held = (yield* store.listReservations(accountId, { limit: 100, offset: 0 })).items.filter((r) => r.status === "held")
        expect(held).toHaveLength(1)

        // Recovery, once the hold has expired: the call started, so it is captured at its quote.
        const later = new Date(held[0]!.expiresAt.getTime() + 1)
        const ended = yield* Effect.all(
          [0, 1, 2].map(() => store.sweepExpired(later, 100, { running: new Set() })),
          { concurrency: "unbounded" }
        )
        expect(ended.reduce((a, b) => a + b, 0)).toBe(1)
        const after = yield* store.listAudit(accountId, 0n, 1000)
        const captured = after.filter((a) => a.id === last.auditId)
        expect(captured).toHaveLength(1)
        expect(captured[0]!.kind).toBe("settle")
        expect(cents(captured[0]!.amountMicroUsd)).toBe(last.quotedUsdCents)
        const charges = (yield* store.listTransactions(accountId, { type: "charge" }, { limit: 100, offset: 0 })).items
        expect(charges).toHaveLength(4)
        const { problems, snapshot } = yield* checkAccount(accountId)
        expect(problems).toEqual([])
        expect(snapshot.reservations.filter((r) => r.status === "held")).toEqual([])
        const charged = receipts.slice(0, 3).reduce((sum, r) => sum + r.chargedUsdCents, 0) + last.quotedUsdCents
        expect(cents(snapshot.wallet.usdMicroUsd)).toBeCloseTo(5000 - charged, 6)
        // Nothing is left for the gateway's own sweep to do.
        expect(yield* (yield* Spend).sweep).toBe(0)
      }))
    } finally {
      await books.dispose()
    }
  }, 90_000)

  it("SIGTERM after the answers: the last settle lands before the process exits", async () => {
    const { server, receipts, accountId } = await callsOnServer(3)
    await server.stop()
    expect(server.child.exitCode).toBe(0)

    const books = storage()
    try {
      await books.runPromise(Effect.gen(function*() {
        const store = yield* Store
        const audit = yield* store.listAudit(accountId, 0n, 1000)
        for (const r of receipts) {
          const record = audit.find((a) => a.id === r.auditId && a.kind === "settle")
          expect(record, `settle ${r.auditId}`).toBeDefined()
          expect(cents(record!.amountMicroUsd)).toBe(r.chargedUsdCents)
        }
        const { problems, snapshot } = yield* checkAccount(accountId)
        expect(problems).toEqual([])
        expect(snapshot.reservations.filter((r) => r.status === "held")).toEqual([])
      }))
    } finally {
      await books.dispose()
    }
  }, 90_000)
})
