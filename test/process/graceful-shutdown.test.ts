import * as Http from "node:http"
import { type AddressInfo, connect } from "node:net"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Exit, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { AccountId } from "../../src/domain/ids.ts"
import { Store } from "../../src/ports/Store.ts"
import { chatCompletion } from "../providers/fakeLlm.ts"
import { checkAccount } from "../support/ledger-check.ts"
import { freshDatabaseUrl } from "../support/postgres.ts"
import { type ServerProcess, startServerProcess } from "../support/server-process.ts"
import { client, fundByDevCard } from "../support/server.ts"
import { openBooks } from "../support/books.ts"

/**
 * SIGTERM on the real server process (adapters/http/main.ts, what
 * `spendgate serve` runs) while a paid call waits on its upstream: the port
 * closes at once (a new connection is refused) while the call goes on; the
 * call then finishes and is charged, or, past SHUTDOWN_GRACE_SECONDS, is
 * interrupted and its hold released; a call whose caller went away is carried
 * to its end within the same grace (adapters/http/carry.ts), and charged; the
 * process exits 0; and the books,
 * read straight from storage afterwards, hold no open hold and add up.
 */

/** A local OpenAI-compatible upstream that answers only when told to. */
const startGatedUpstream = () =>
  new Promise<{
    origin: string
    arrived: () => Promise<void>
    release: () => void
    close: () => Promise<void>
  }>((resolve) => {
    const waiting: Array<() => void> = []
    let onArrival: (() => void) | undefined
    let released = false
    const server = Http.createServer((req, res) => {
      res.on("error", () => {})
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        let body: Record<string, unknown> = {}
        try {
          body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
        } catch {
          body = {}
        }
        const answer = () => {
          res.writeHead(200, { "content-type": "application/json" })
          res.end(JSON.stringify(chatCompletion(body, { promptTokens: 10, completionTokens: 20 })))
        }
        if (released) answer()
        else waiting.push(answer)
        onArrival?.()
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve({
        origin: `http://127.0.0.1:${port}`,
        arrived: () =>
          waiting.length > 0 ? Promise.resolve() : new Promise((done) => {
            onArrival = done
          }),
        release: () => {
          released = true
          for (const answer of waiting.splice(0)) answer()
        },
        close: () =>
          new Promise((done) => {
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })

/** Whether a new TCP connection to the server's port is refused. */
const refused = (baseUrl: string) =>
  new Promise<boolean>((resolve) => {
    const url = new URL(baseUrl)
    const socket = connect({ host: url.hostname, port: Number(url.port) })
    socket.once("connect", () => {
      socket.destroy()
      resolve(false)
    })
    socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code === "ECONNREFUSED"))
  })

const exitOf = (server: ServerProcess) =>
  new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    if (server.child.exitCode !== null || server.child.signalCode !== null) {
      resolve({ code: server.child.exitCode, signal: server.child.signalCode })
    } else {
      server.child.once("exit", (code, signal) => resolve({ code, signal }))
    }
  })

describe("graceful shutdown of the server process (PostgreSQL)", () => {
  const scope = Effect.runSync(Scope.make())
  const dataDir = mkdtempSync(join(tmpdir(), "spendgate-shutdown-"))
  let databaseUrl: string
  let upstream: Awaited<ReturnType<typeof startGatedUpstream>>
  let running: ServerProcess | undefined

  beforeAll(async () => {
    databaseUrl = await Effect.runPromise(Scope.provide(freshDatabaseUrl, scope))
  }, 60_000)
  afterAll(async () => {
    await running?.kill9()
    await upstream?.close()
    await Effect.runPromise(Scope.close(scope, Exit.void))
    rmSync(dataDir, { recursive: true, force: true })
  })

  const env = (extra: Record<string, string> = {}) => ({
    DATABASE_URL: databaseUrl,
    DATA_DIR: dataDir,
    LLM_BASE_URL: `${upstream.origin}/v1`,
    BUILTIN_SPEAK: "off",
    BUILTIN_READ: "off",
    BUILTIN_SCRAPE: "off",
    LOG_LEVEL: "Info",
    ...extra
  })

  /** The same storage, opened by the test once the server is gone. */
  const books = (accountId: AccountId) => {
    const storage = openBooks(databaseUrl, dataDir)
    return storage.runPromise(Effect.gen(function*() {
      const store = yield* Store
      const reservations = (yield* store.listReservations(accountId, { limit: 100, offset: 0 })).items
      const { snapshot, problems } = yield* checkAccount(accountId)
      return { reservations, wallet: snapshot.wallet, problems }
    })).finally(() => storage.dispose())
  }

  /** A funded account ($50 on the dev card rail) on a fresh server; its key and id. */
  const fundedServer = async (extra: Record<string, string> = {}) => {
    const server = await startServerProcess(env(extra))
    running = server
    const api = client(server.baseUrl)
    const signup = await api.post("/v1/signup", { name: "shutdown" })
    const key = signup.body.apiKey as string
    expect((await fundByDevCard(server.baseUrl, key, 5000)).status).toBe(200)
    return { server, key, accountId: signup.body.accountId as AccountId }
  }

  const reason = (baseUrl: string, key: string) =>
    fetch(`${baseUrl}/v1/capabilities/reason`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ prompt: "a slow question", maxTokens: 100 })
    }).then(async (response) => ({ status: response.status, body: await response.json() as any }))

  it("stops accepting, lets the call in flight finish and settle, and exits 0 without waiting out the grace", async () => {
    upstream = await startGatedUpstream()
    // A long grace: the process must not wait it out once the call is answered, although its
    // caller (fetch) keeps the connection open for the next request.
    const { server, key, accountId } = await fundedServer({ SHUTDOWN_GRACE_SECONDS: "30" })
    const exit = exitOf(server)

    const inFlight = reason(server.baseUrl, key)
    await upstream.arrived()
    server.child.kill("SIGTERM")

    // The port closes while the call is still waiting on its upstream.
    while (!(await refused(server.baseUrl))) await new Promise((r) => setTimeout(r, 50))
    expect(server.child.exitCode).toBeNull()

    upstream.release()
    const answered = await inFlight
    expect(answered.status).toBe(200)
    expect(typeof answered.body.metadata.auditId).toBe("string")
    const answeredAt = Date.now()

    expect(await exit).toEqual({ code: 0, signal: null })
    // Well under the 30 s grace (about 0.1 s here); before idle connections were closed during
    // the shutdown, the kept-alive connection held the process for the whole grace.
    expect(Date.now() - answeredAt).toBeLessThan(15_000)
    expect(server.output()).toContain("Spendgate stopped")

    const after = await books(accountId)
    expect(after.problems).toEqual([])
    expect(after.reservations.filter((r) => r.status === "held")).toEqual([])
    expect(after.reservations.filter((r) => r.status === "settled")).toHaveLength(1)
    expect(after.wallet.usdMicroUsd).toBeLessThan(50_000_000n)
    await upstream.close()
  }, 120_000)

  it("carries a call whose caller went away to its end within the grace, charges it, and then exits 0", async () => {
    upstream = await startGatedUpstream()
    const { server, key, accountId } = await fundedServer()
    const exit = exitOf(server)

    const controller = new AbortController()
    const inFlight = fetch(`${server.baseUrl}/v1/capabilities/reason`, {
      method: "POST",
      signal: controller.signal,
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ prompt: "a slow question", maxTokens: 100 })
    }).then(() => "answered", () => "hung up")
    await upstream.arrived()
    controller.abort()
    expect(await inFlight).toBe("hung up")
    server.child.kill("SIGTERM")

    // The port closes; the process waits for the carried call, which has no caller any more.
    while (!(await refused(server.baseUrl))) await new Promise((r) => setTimeout(r, 50))
    await new Promise((r) => setTimeout(r, 300))
    expect(server.child.exitCode).toBeNull()

    upstream.release()
    expect(await exit).toEqual({ code: 0, signal: null })

    const after = await books(accountId)
    expect(after.problems).toEqual([])
    expect(after.reservations.map((r) => r.status)).toEqual(["settled"])
    expect(after.wallet.usdMicroUsd).toBeLessThan(50_000_000n)
    await upstream.close()
  }, 120_000)

  it("past SHUTDOWN_GRACE_SECONDS interrupts a carried call too (its caller gone), releases its hold, and exits 0", async () => {
    upstream = await startGatedUpstream()
    const { server, key, accountId } = await fundedServer({ SHUTDOWN_GRACE_SECONDS: "1" })
    const exit = exitOf(server)

    const controller = new AbortController()
    const inFlight = fetch(`${server.baseUrl}/v1/capabilities/reason`, {
      method: "POST",
      signal: controller.signal,
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ prompt: "a slow question", maxTokens: 100 })
    }).then(() => "answered", () => "hung up")
    await upstream.arrived()
    controller.abort()
    expect(await inFlight).toBe("hung up")
    server.child.kill("SIGTERM")
    const stoppedAt = Date.now()

    // The upstream never answers: the grace ends the carried call as it ends any other,
    // well before the test's own bound (about 1 s here).
    expect(await exit).toEqual({ code: 0, signal: null })
    expect(Date.now() - stoppedAt).toBeLessThan(15_000)
    const after = await books(accountId)
    expect(after.problems).toEqual([])
    expect(after.reservations.map((r) => r.status)).toEqual(["released"])
    expect(after.wallet.usdMicroUsd).toBe(50_000_000n)
    upstream.release()
    await upstream.close()
  }, 120_000)

  it("past SHUTDOWN_GRACE_SECONDS interrupts the call still in flight, releases its hold, and exits 0", async () => {
    upstream = await startGatedUpstream()
    const { server, key, accountId } = await fundedServer({ SHUTDOWN_GRACE_SECONDS: "1" })
    const exit = exitOf(server)

    const inFlight = reason(server.baseUrl, key).then(
      (answer) => ({ answered: answer.status }),
      () => ({ answered: "connection closed" as const })
    )
    await upstream.arrived()
    server.child.kill("SIGTERM")

    // The upstream never answers: the grace period ends the call.
    expect(await exit).toEqual({ code: 0, signal: null })
    const outcome = await inFlight
    expect(outcome.answered).not.toBe(200)

    const after = await books(accountId)
    expect(after.problems).toEqual([])
    expect(after.reservations.filter((r) => r.status === "held")).toEqual([])
    expect(after.reservations.filter((r) => r.status === "released")).toHaveLength(1)
    expect(after.wallet.usdMicroUsd).toBe(50_000_000n)
    upstream.release()
    await upstream.close()
  }, 120_000)
})
