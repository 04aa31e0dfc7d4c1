/**
 * HTTP benchmark: a local OpenAI-format upstream (bench/upstream.ts) called
 * directly and through Spendgate's metered routes, by the same load generator
 * (autocannon), in one run. Prints figures; asserts nothing.
 *
 *   npm run bench:http                                   # PostgreSQL and PGlite, 3 s a cell
 *   npm run bench:http -- --duration=10 --backends=pg    # longer cells, PostgreSQL only
 *   BENCH_DURATION=1 BENCH_WALLETS=32 npm run bench:http
 *
 * For each backend (PostgreSQL: a fresh database on POSTGRES_URL, default
 * postgres://postgres@127.0.0.1:5432, created and dropped here; PGlite: a
 * fresh temporary data directory) it starts the server as a child process
 * the way its `npm start` does (e.g. `node --max-semi-space-size=8
 * --max-old-space-size=1024 bin/spendgate.js serve`: the same flags, entry
 * point and modules) with
 * the upstream as its `openai` provider and the rate limits raised out of the
 * way, and measures the time from spawn to the first healthy `GET /health`.
 * It signs up accounts and funds their wallets on the dev card rail
 * (`POST /v1/wallet/fund-card`, then the dev rail's own payer route), then
 * drives, at 1 and 16 connections:
 *
 * - the upstream directly (`POST /v1/chat/completions`);
 * - on PostgreSQL, the floor of the stack (bench/floor.ts): a bare forwarder
 *   on the same HTTP server, client and driver that commits one UPDATE and
 *   forwards the call, with no key, policy or ledger;
 * - `POST /v1/proxy/openai` (the same chat completion through the proxy);
 * - `POST /v1/capabilities/reason`;
 *
 * each on one hot wallet (one key) and on N wallets (N accounts, their keys
 * taken round-robin, one per request; N = 256 by default). Latencies are
 * measured per response, to the microsecond. The overhead is Spendgate's
 * p50 minus the direct p50 at the same number of connections, and their
 * ratio. RSS is the server's resident memory once start-up's work is over
 * (idle: its CPU has settled, see `idleMemory`) and after the last cell;
 * start-up's peak is printed apart. Right after the last cell the server is
 * sent SIGTERM, and the time to its exit and how it ended are printed
 * (`exit 0` is a graceful stop; SIGKILL after 10 s if it has not stopped).
 * Last, each of the project's targets with
 * this run's figure, whether it is met, and the floor's figure in the same
 * cell (bench/targets.ts): a target the floor misses too is the machine's.
 *
 * On PostgreSQL each cell also prints the database's work per request:
 * write transactions (each takes a transaction id; with holds grouped and
 * settles carried a metered call can cost less than one), WAL bytes, and the
 * CPU time of the backends connected to the benchmark's database (read from
 * /proc, so PostgreSQL must run on this machine). Transaction ids and WAL are
 * counted for the whole PostgreSQL server: run it where nothing else writes.
 *
 * Options (flag or environment variable):
 *   --duration=S     BENCH_DURATION     seconds of load per cell (default 3; decimals allowed)
 *   --warmup=S       BENCH_WARMUP       seconds of load before each cell, not counted (default 0.5)
 *   --server-warmup=S BENCH_SERVER_WARMUP seconds of metered calls to each new server before its first cell,
 *                                       not counted (default 5; 0: none; below)
 *   --wallets=N      BENCH_WALLETS      funded accounts of the many-wallet cells (default 256)
 *   --backends=LIST  BENCH_BACKENDS     pg, pglite or both (default pg,pglite)
 *   --connections=L  BENCH_CONNECTIONS  e.g. 1,16 (default)
 *   --server=DIR     BENCH_SERVER       the checkout whose server is measured (default this one)
 *   --profile=DIR    BENCH_PROFILE      write each server's CPU profile (node --cpu-prof) into DIR
 *   --against=DIR    BENCH_AGAINST      interleaved A/B: compare the server with this checkout's (below)
 *   --against-env=L  BENCH_AGAINST_ENV  settings for the --against server only, e.g. SETTLE_WHEN_IDLE=wait
 *   --blocks=N       BENCH_BLOCKS       A/B: blocks per build and cell (default 30)
 *   --block=N        BENCH_BLOCK        A/B: requests per block (default 300)
 *   --ab-warmup=N    BENCH_AB_WARMUP    A/B: requests to each server before each cell, not counted (default 1000)
 *   --ab-connections=N BENCH_AB_CONNECTIONS A/B: connections, each with one request in flight (default 1)
 *
 * Interleaved A/B (`--against=DIR`, or `--against=.` with `--against-env`
 * to compare two settings of one build). Between two separate runs the
 * machine's speed can move by more than a small change is worth (a third
 * within a minute on a busy host), so two builds measured one after the other
 * can differ by the minute they met. With `--against` both servers run at
 * once, each on its own fresh database or data directory, and one connection
 * sends them alternate blocks of requests (`--block`, A then B, then B then
 * A, `--blocks` times) to `POST /v1/proxy/openai` on one hot wallet and over
 * `--wallets` wallets, after `--ab-warmup` requests each to warm up; only one request
 * is in flight at a time (with `--ab-connections=N`, N connections send each
 * block, one request in flight on each: throughput under concurrency, still
 * one build loaded at a time). Both meet the same minutes. Halfway the servers are
 * started again in the other order (`runInterleaved`). It prints each build's
 * p50, p90, p99, server CPU per request and, on PostgreSQL, the CPU per
 * request of the backends connected to its own database (read between
 * blocks), and the difference of their
 * p50s block by block (against minus server): its median, its 10th and 90th
 * percentiles, and how many blocks each build was faster in; and each block's
 * rate (requests per second of its wall time): each build's median, and
 * against's over server's block by block (its median, 10th and 90th
 * percentiles). No direct or floor cells are run in this mode.
 *
 * A new server's first calls are slower: V8 is still compiling and
 * re-compiling its hot code. On the 2-core machine a fresh server's p50 at
 * one connection was about 1.7 times its settled p50 over the first two
 * seconds, and settled after two to three thousand calls
 * (docs/performance.md, "A new server's first calls"). So, before its first
 * cell, each server gets `--server-warmup` seconds of metered calls, not
 * counted: both routes, one hot wallet and the many wallets, at one
 * connection and at the most connections asked for, in equal shares. The
 * warm-up's own first and last shares are printed (their p50s), so the
 * cold start stays visible.
 *
 * The server gets an environment of its own (the upstream, the limits out of
 * the way); SETTLE_DELAY_MS, SETTLE_WHEN_IDLE, RESERVE_FLIGHTS and SPENDGATE_BUNDLE are passed on
 * from this process's environment when set, to compare settings of one build.
 *
 * Every child (upstream, servers) is stopped, the database dropped and the
 * data directory removed at the end, on an error and on Ctrl-C. The last
 * line lists the children's process ids.
 */
import autocannon from "autocannon"
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { Agent, request } from "undici"
import { option, wholeNumber } from "./options.ts"
import { checkTargets } from "./targets.ts"

// ---------------------------------------------------------------------------
// Options

const positive = (name: string, text: string): number => {
  const value = Number(text)
  if (!Number.isFinite(value) || value <= 0) {
    console.error(`bench:http: --${name} must be a positive number, got ${JSON.stringify(text)}`)
    process.exit(2)
  }
  return value
}

const root = resolve(import.meta.dirname, "..")
const durationSeconds = positive("duration", option("duration", "BENCH_DURATION", "3"))
const nonNegative = (name: string, text: string): number => {
  const value = Number(text)
  if (text.trim() === "" || !Number.isFinite(value) || value < 0) {
    console.error(`bench:http: --${name} must be a number of seconds, 0 or more, got ${JSON.stringify(text)}`)
    process.exit(2)
  }
  return value
}
const warmupSeconds = nonNegative("warmup", option("warmup", "BENCH_WARMUP", "0.5"))
const serverWarmupSeconds = nonNegative("server-warmup", option("server-warmup", "BENCH_SERVER_WARMUP", "5"))
const walletCount = Math.floor(positive("wallets", option("wallets", "BENCH_WALLETS", "256")))
const againstOption = option("against", "BENCH_AGAINST", "")
// An A/B run (--against) measures PostgreSQL unless told otherwise.
const backends = option("backends", "BENCH_BACKENDS", againstOption === "" ? "pg,pglite" : "pg").split(",").map((b) => b.trim()).filter((b) => b !== "")
const connectionCounts = option("connections", "BENCH_CONNECTIONS", "1,16").split(",").map((c) => Math.floor(positive("connections", c)))
const serverRoot = resolve(option("server", "BENCH_SERVER", root))
const profileDir = option("profile", "BENCH_PROFILE", "")
const againstRoot = againstOption === "" ? undefined : resolve(againstOption)
const againstEnv = Object.fromEntries(
  option("against-env", "BENCH_AGAINST_ENV", "").split(",").map((pair) => pair.trim()).filter((pair) => pair !== "").map((pair) => {
    const at = pair.indexOf("=")
    if (at <= 0) {
      console.error(`bench:http: --against-env takes NAME=value pairs separated by commas, got ${JSON.stringify(pair)}`)
      process.exit(2)
    }
    return [pair.slice(0, at), pair.slice(at + 1)]
  })
)
const blocks = Math.floor(positive("blocks", option("blocks", "BENCH_BLOCKS", "30")))
const blockSize = Math.floor(positive("block", option("block", "BENCH_BLOCK", "300")))
const abWarmup = Math.floor(positive("ab-warmup", option("ab-warmup", "BENCH_AB_WARMUP", "1000")))
const abConnections = wholeNumber("bench:http", "ab-connections", option("ab-connections", "BENCH_AB_CONNECTIONS", "1"), 1)
const adminUrl = process.env["POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres"
for (const backend of backends) {
  if (backend !== "pg" && backend !== "pglite") {
    console.error(`bench:http: --backends takes pg and/or pglite, got ${JSON.stringify(backend)}`)
    process.exit(2)
  }
}

// ---------------------------------------------------------------------------
// Children and clean-up

const children = new Set<ChildProcess>()
/**
 * What the measured checkout's `npm start` runs: the words after `node` in
 * package.json's "start" (its Node flags, then its script and arguments,
 * e.g. `--max-semi-space-size=8 bin/spendgate.js serve`), so that the server
 * is measured as `npm start` runs it, with the same entry point and the same
 * modules loaded. The flags and the rest are apart, so that the profile's
 * flags go between them. A flag is a word that starts with `-` (so a flag's
 * value must be written `--flag=value`). A start script that does not run
 * `node` with a script (or a checkout without one) is measured as the
 * server's own entry point, `node adapters/http/main.ts`, and said so.
 */
const startCommand = (checkout: string): { readonly flags: Array<string>; readonly script: Array<string> } => {
  const start: unknown = JSON.parse(readFileSync(join(checkout, "package.json"), "utf8"))?.scripts?.start
  const words = typeof start === "string" ? start.trim().split(/\s+/) : []
  const node = words.indexOf("node")
  const rest = node < 0 ? [] : words.slice(node + 1)
  const first = rest.findIndex((word) => !word.startsWith("-"))
  if (first < 0) {
    console.error(`bench:http: ${checkout}: npm start does not run node with a script; measuring node adapters/http/main.ts`)
    return { flags: [], script: [join(checkout, "adapters/http/main.ts")] }
  }
  return { flags: rest.slice(0, first), script: [join(checkout, rest[first]!), ...rest.slice(first + 1)] }
}

/**
 * What the checkout's `npm start` runs: its bundle while that is fresh, the
 * sources otherwise (scripts/server-bundle.mjs; a checkout without it runs
 * the sources). `env` is what the server is given on top of this process's
 * SPENDGATE_BUNDLE.
 */
const whatStartRuns = async (checkout: string, env: Record<string, string>): Promise<string> => {
  const script = join(checkout, "scripts/server-bundle.mjs")
  if (env["SPENDGATE_BUNDLE"] === "off") return "the sources (SPENDGATE_BUNDLE=off)"
  if (!existsSync(script)) return "the sources (no bundle script)"
  try {
    // That checkout's own script (its check may differ from this one's), typed as this one's.
    const bundle = (await import(pathToFileURL(script).href)) as typeof import("../scripts/server-bundle.mjs")
    const { entry, reason } = bundle.freshBundle(resolve(checkout), undefined, "server")
    return entry === undefined ? `the sources (${reason})` : "the bundle"
  } catch (error) {
    return `the sources (the bundle could not be checked: ${error instanceof Error ? error.message : String(error)})`
  }
}

const spawned: Array<number> = []
const cleanups: Array<() => Promise<void> | void> = []

const exited = (child: ChildProcess): Promise<void> =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise((done) => child.once("exit", () => done()))

/** How a child ended when stopped: after how long, and how (an exit code, or the signal that ended it). */
interface Stopped {
  readonly ms: number
  readonly how: string
}

/** SIGTERM, then SIGKILL if the child is still there after `graceMs`. */
const stopChild = async (child: ChildProcess, graceMs = 10_000): Promise<Stopped> => {
  const since = performance.now()
  if (child.exitCode === null && child.signalCode === null) {
    child.kill("SIGTERM")
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs)
    await exited(child)
    clearTimeout(timer)
  }
  children.delete(child)
  return { ms: performance.now() - since, how: child.signalCode ?? `exit ${child.exitCode}` }
}

let cleaning: Promise<void> | undefined
const cleanUp = (): Promise<void> =>
  cleaning ??= (async () => {
    await Promise.all([...children].map((child) => stopChild(child)))
    for (const cleanup of cleanups.reverse()) {
      try {
        await cleanup()
      } catch (error) {
        console.error(`bench:http: clean-up failed: ${error instanceof Error ? error.message : String(error)}`)
      }
    }
  })()

/** Stops everything, names the children (the smoke test checks they are gone) and exits. */
let finished: Promise<void> | undefined
const finish = async (code: number): Promise<never> => {
  finished ??= cleanUp().then(() => console.log(`\nchildren: ${spawned.join(" ")}`))
  await finished
  return process.exit(code)
}

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    console.error(`\nbench:http: ${signal}, stopping the children`)
    void finish(130)
  })
}

const node = process.execPath

const start = (args: ReadonlyArray<string>, env: Record<string, string>, cwd: string): { child: ChildProcess; output: () => string } => {
  const child = spawn(node, args, { cwd, env: { PATH: process.env["PATH"] ?? "", ...env }, stdio: ["ignore", "pipe", "pipe", "ipc"] })
  children.add(child)
  if (child.pid !== undefined) spawned.push(child.pid)
  let output = ""
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-20_000)
  }
  child.stdout!.on("data", keep)
  child.stderr!.on("data", keep)
  child.once("exit", () => children.delete(child))
  return { child, output: () => output }
}

const freePort = (): Promise<number> =>
  new Promise((done, fail) => {
    const probe = createServer()
    probe.once("error", fail)
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      probe.close(() => done(port))
    })
  })

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))

/**
 * Resident memory of a process, in MB (Linux /proc; elsewhere undefined): now
 * (`VmRSS`), or its peak so far (`VmHWM`, the high-water mark).
 */
const rssMb = (pid: number, which: "VmRSS" | "VmHWM" = "VmRSS"): number | undefined => {
  try {
    const match = new RegExp(`${which}:\\s+(\\d+)\\s+kB`).exec(readFileSync(`/proc/${pid}/status`, "utf8"))
    return match === null ? undefined : Number(match[1]) / 1024
  } catch {
    return undefined
  }
}

/**
 * CPU time a process has used (user + system), in ms (Linux /proc; elsewhere
 * undefined). Unlike latency, it hardly changes when other work shares the
 * machine, so it compares builds on a busy machine.
 */
const ticksPerSecond = 100
const cpuMs = (pid: number): number | undefined => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /s, "").split(" ")
    // After the command: state is field 3, utime and stime fields 14 and 15 (1-based, of the whole line).
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond
  } catch {
    return undefined
  }
}

// ---------------------------------------------------------------------------
// PostgreSQL: a fresh database

/** Runs one statement on the admin database (POSTGRES_URL) over a connection of its own; its rows. */
const adminQuery = async <A extends object>(statement: string): Promise<ReadonlyArray<A>> => {
  // The project's own driver, loaded only when the PostgreSQL backend runs.
  const [{ PgClient }, { Effect, Redacted }, { Reactivity }] = await Promise.all([
    import("@effect/sql-pg"),
    import("effect"),
    import("effect/reactivity")
  ])
  return Effect.runPromise(Effect.scoped(
    Effect.gen(function*() {
      const sql = yield* PgClient.make({ url: Redacted.make(adminUrl), maxConnections: 1 })
      return yield* sql.unsafe<A>(statement)
    }).pipe(Effect.provide(Reactivity.layer))
  ))
}

const adminStatement = async (statement: string): Promise<void> => {
  await adminQuery(statement)
}

let databases = 0
const freshDatabase = async (): Promise<{ readonly url: string; readonly name: string }> => {
  const name = `spendgate_bench_http_${Date.now().toString(36)}_${process.pid}_${++databases}`
  await adminStatement(`CREATE DATABASE ${name}`)
  cleanups.push(() => adminStatement(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return { url: url.toString(), name }
}

/**
 * What PostgreSQL has done so far, read from the admin database (so the
 * reading is not counted in it): the next transaction id (write
 * transactions take one each; cluster-wide, PostgreSQL 13 or later), the
 * WAL position in bytes (cluster-wide) and the CPU time of each backend
 * connected to the benchmark's database, by process id (Linux /proc; the
 * server's PostgreSQL must run on this machine). Unlike the statistics
 * views, these are current the moment they are read. Undefined when they
 * cannot be read.
 */
interface DatabaseSample {
  readonly nextXid: bigint
  readonly walBytes: bigint
  readonly backendCpuMs: ReadonlyMap<number, number>
}

const databaseSample = async (database: string): Promise<DatabaseSample | undefined> => {
  try {
    const [row] = await adminQuery<{ xmax: string; wal: string; pids: string | null }>(
      `SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS xmax,
              (pg_current_wal_lsn() - '0/0'::pg_lsn)::text AS wal,
              (SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE datname = '${database}') AS pids`
    )
    if (row === undefined) return undefined
    const backendCpuMs = new Map<number, number>()
    for (const pid of (row.pids ?? "").split(",").filter((p) => p !== "").map(Number)) {
      const used = cpuMs(pid)
      if (used !== undefined) backendCpuMs.set(pid, used)
    }
    return { nextXid: BigInt(row.xmax), walBytes: BigInt(row.wal.replace(/\..*$/, "")), backendCpuMs }
  } catch {
    return undefined
  }
}

/** PostgreSQL's work per answered request between two samples. */
interface DatabaseFigures {
  readonly transactionsPerRequest: number
  readonly walBytesPerRequest: number
  /** CPU of the backends alive at the second sample (a backend that ended between them is not counted). */
  readonly backendCpuMsPerRequest: number | undefined
}

const databaseFigures = (before: DatabaseSample, after: DatabaseSample, requests: number): DatabaseFigures => {
  let cpu = 0
  for (const [pid, used] of after.backendCpuMs) cpu += used - (before.backendCpuMs.get(pid) ?? 0)
  return {
    transactionsPerRequest: Number(after.nextXid - before.nextXid) / requests,
    walBytesPerRequest: Number(after.walBytes - before.walBytes) / requests,
    backendCpuMsPerRequest: after.backendCpuMs.size === 0 ? undefined : cpu / requests
  }
}

// ---------------------------------------------------------------------------
// HTTP helpers

const postJson = async (url: string, body: unknown, key?: string): Promise<{ status: number; json: any }> => {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) },
    body: JSON.stringify(body)
  })
  const text = await response.text()
  let json: unknown = undefined
  try {
    json = JSON.parse(text)
  } catch {
    json = text
  }
  return { status: response.status, json }
}

/** One account with a funded wallet ($1,000 on the dev card rail); its key. */
const fundedAccount = async (base: string, name: string): Promise<string> => {
  const signup = await postJson(`${base}/v1/signup`, { name })
  if (signup.status !== 201 && signup.status !== 200) throw new Error(`signup: HTTP ${signup.status} ${JSON.stringify(signup.json)}`)
  const key = signup.json.apiKey as string
  const checkout = await postJson(`${base}/v1/wallet/fund-card`, { amountUsdCents: 100_000 }, key)
  if (checkout.status >= 300) throw new Error(`fund-card: HTTP ${checkout.status} ${JSON.stringify(checkout.json)}`)
  const paid = await fetch(`${base}/dev/checkout/${checkout.json.sessionId}/pay`, { method: "POST" })
  await paid.arrayBuffer()
  if (paid.status >= 400) throw new Error(`dev checkout: HTTP ${paid.status}`)
  return key
}

const fundedAccounts = async (base: string, count: number, prefix: string): Promise<Array<string>> => {
  const keys: Array<string> = new Array(count)
  let next = 0
  await Promise.all(Array.from({ length: Math.min(8, count) }, async () => {
    while (next < count) {
      const i = next++
      keys[i] = await fundedAccount(base, `${prefix}-${i}`)
    }
  }))
  return keys
}

// ---------------------------------------------------------------------------
// Load

interface Cell {
  /** The server's CPU time per answered request, ms (undefined for the upstream). */
  readonly cpuMsPerRequest?: number | undefined
  /** PostgreSQL's work per answered request (PostgreSQL backend only). */
  readonly database?: DatabaseFigures | undefined
  readonly rps: number
  readonly p50: number
  readonly p99: number
  readonly ok: number
  readonly failed: number
}

const percentile = (sorted: ReadonlyArray<number>, p: number): number =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!

const chatBody = { model: "gpt-4o-mini", messages: [{ role: "user", content: "Say hello" }], max_tokens: 16 }
const proxyBody = JSON.stringify({ method: "POST", path: "/chat/completions", body: chatBody })
const reasonBody = JSON.stringify({ prompt: "Say hello", model: "gpt-4o-mini", maxTokens: 16 })

/** `seconds` of load at `connections`; each request takes the next key of `keys` (none: no key). */
const load = async (
  url: string,
  body: string,
  connections: number,
  seconds: number,
  keys: ReadonlyArray<string>
): Promise<Cell> => {
  let turn = 0
  const latencies: Array<number> = []
  let ok = 0
  let failed = 0
  const instance = autocannon({
    url,
    method: "POST",
    connections,
    duration: seconds,
    // autocannon stops at its first sampling tick after the duration (every second by default),
    // so a cell of 0.2 s ran for a whole second and one of 2.5 s for three: sampled every 100 ms,
    // a cell lasts what --duration says (its req/s are counted over the time it really ran).
    sampleInt: 100,
    headers: { "content-type": "application/json" },
    body,
    requests: [{
      setupRequest: (request: { headers: Record<string, string> }) => {
        if (keys.length > 0) request.headers = { ...request.headers, authorization: `Bearer ${keys[turn++ % keys.length]}` }
        return request
      }
    }]
  })
  // autocannon's own histogram counts whole milliseconds; each response's time is kept here instead.
  instance.on("response", (_client: unknown, status: number, _bytes: number, responseTime: number) => {
    if (status >= 200 && status < 300) {
      ok++
      latencies.push(responseTime)
    } else {
      failed++
    }
  })
  const result = await instance
  latencies.sort((a, b) => a - b)
  const elapsed = typeof result.duration === "number" && result.duration > 0 ? result.duration : seconds
  return {
    rps: ok / elapsed,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    ok,
    failed: failed + (result.errors ?? 0) + (result.timeouts ?? 0)
  }
}

const measure = async (
  url: string,
  body: string,
  connections: number,
  keys: ReadonlyArray<string>,
  serverPid?: number,
  database?: string
): Promise<Cell> => {
  if (warmupSeconds > 0) await load(url, body, connections, warmupSeconds, keys)
  const databaseBefore = database === undefined ? undefined : await databaseSample(database)
  const before = serverPid === undefined ? undefined : cpuMs(serverPid)
  const cell = await load(url, body, connections, durationSeconds, keys)
  const after = serverPid === undefined ? undefined : cpuMs(serverPid)
  const databaseAfter = database === undefined ? undefined : await databaseSample(database)
  const requests = cell.ok + cell.failed
  return {
    ...cell,
    cpuMsPerRequest: before === undefined || after === undefined || cell.ok === 0 ? undefined : (after - before) / requests,
    database: databaseBefore === undefined || databaseAfter === undefined || cell.ok === 0
      ? undefined
      : databaseFigures(databaseBefore, databaseAfter, requests)
  }
}

// ---------------------------------------------------------------------------
// The run

interface Row {
  readonly backend: string
  readonly target: string
  readonly connections: number
  readonly wallets: string
  readonly cell: Cell
  readonly direct?: Cell | undefined
}

interface ServerFigures {
  readonly backend: string
  readonly startMs: number
  readonly startCpuMs: number | undefined
  readonly rssPeakStartMb: number | undefined
  readonly settledAfterMs: number | undefined
  readonly rssIdleMb: number | undefined
  readonly rssAfterMb: number | undefined
  /** SIGTERM after the run to the process's end: how long, and how it ended (`exit 0` is a graceful stop). */
  readonly stopped: Stopped
}

/** Server settings passed on from this process's environment when set (README, "Configuration"). */
const SERVER_TUNING = ["SETTLE_DELAY_MS", "SETTLE_WHEN_IDLE", "RESERVE_FLIGHTS", "SPENDGATE_BUNDLE"] as const

const startServer = async (
  backend: "pg" | "pglite",
  upstreamPort: number,
  checkout: string = serverRoot,
  extraEnv: Record<string, string> = {}
) => {
  const port = await freePort()
  const dataDir = mkdtempSync(join(tmpdir(), "spendgate-bench-http-"))
  cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }))
  const env: Record<string, string> = {
    HOST: "127.0.0.1",
    PORT: String(port),
    DATA_DIR: dataDir,
    LOG_LEVEL: "Warn",
    OPENAI_API_KEY: "sk-bench",
    OPENAI_BASE_URL: `http://127.0.0.1:${upstreamPort}/v1`,
    URL_ALLOW_HOSTS: `127.0.0.1:${upstreamPort}`,
    // Out of the way: the benchmark measures the metered path, not the limiter's refusals.
    RATE_LIMIT_AGENT_PER_MINUTE: "1000000000",
    RATE_LIMIT_ACCOUNT_PER_MINUTE: "1000000000",
    SIGNUP_RATE_PER_HOUR: "1000000",
    // The ledger's tuning, when set here: a run can compare settings of one build.
    ...Object.fromEntries(
      SERVER_TUNING.flatMap((name) => process.env[name] !== undefined ? [[name, process.env[name]!]] : [])
    ),
    ...extraEnv
  }
  const database = backend === "pg" ? await freshDatabase() : undefined
  if (database !== undefined) env["DATABASE_URL"] = database.url
  const base = `http://127.0.0.1:${port}`
  const started = performance.now()
  const profile = profileDir === "" ? [] : ["--cpu-prof", `--cpu-prof-dir=${resolve(profileDir)}`, `--cpu-prof-name=${backend}-${Date.now()}.cpuprofile`]
  const command = startCommand(checkout)
  const server = start([...command.flags, ...profile, ...command.script], env, checkout)
  for (;;) {
    if (server.child.exitCode !== null || server.child.signalCode !== null) {
      throw new Error(`the ${backend} server exited before it was healthy:\n${server.output()}`)
    }
    if (performance.now() - started > 120_000) throw new Error(`the ${backend} server was not healthy within 120 s:\n${server.output()}`)
    try {
      const health = await fetch(`${base}/health`)
      await health.arrayBuffer()
      if (health.status === 200) break
    } catch {
      // Not listening yet.
    }
    await sleep(10)
  }
  return { server, base, startMs: performance.now() - started, startCpuMs: cpuMs(server.child.pid!), database }
}

/** The stack's floor (bench/floor.ts) on the backend's database: its base URL and child. */
const startFloor = async (databaseUrl: string, upstreamPort: number) => {
  const floor = start(
    [...startCommand(serverRoot).flags, join(root, "bench/floor.ts")],
    { PORT: "0", DATABASE_URL: databaseUrl, UPSTREAM: `http://127.0.0.1:${upstreamPort}/v1` },
    root
  )
  for (let waited = 0;; waited += 10) {
    const match = /listening (\d+)/.exec(floor.output())
    if (match !== null) return { floor, base: `http://127.0.0.1:${match[1]}` }
    if (floor.child.exitCode !== null || waited > 30_000) throw new Error(`the floor did not start:\n${floor.output()}`)
    await sleep(10)
  }
}

/**
 * The server's memory once start-up's work is over. A healthy answer comes
 * before the process is idle: V8 goes on compiling in the background (on
 * PGlite, its WebAssembly), and on a slow machine a sample one second after
 * start-up fell inside that transient peak (docs/performance.md, "PGlite's
 * "idle" RSS on a slow machine"). So the idle sample waits until the server's
 * CPU time grows by less than 2 % of the wall time over 250 ms (at least one
 * second after the healthy answer, at most IDLE_WAIT_MS), and start-up's peak
 * (the high-water mark before any request of the benchmark) is reported apart.
 */
const IDLE_WAIT_MS = 15_000
const idleMemory = async (pid: number) => {
  const since = performance.now()
  await sleep(1000)
  let settledAfterMs: number | undefined
  for (let before = cpuMs(pid); before !== undefined && performance.now() - since < IDLE_WAIT_MS;) {
    await sleep(250)
    const after = cpuMs(pid)
    if (after === undefined) break
    if (after - before < 250 * 0.02) {
      settledAfterMs = performance.now() - since
      break
    }
    before = after
  }
  return { settledAfterMs, rssPeakStartMb: rssMb(pid, "VmHWM"), rssIdleMb: rssMb(pid) }
}

/**
 * `--server-warmup` seconds of metered calls to a new server (see the header):
 * each route on the hot wallet and on the many wallets, at one connection
 * and at the most connections of the run, in equal shares, in that order.
 * Prints the p50 of the first share and of the last share at one connection.
 */
const warmUpServer = async (backend: string, base: string, hot: string, many: ReadonlyArray<string>) => {
  if (serverWarmupSeconds <= 0) return
  const widest = Math.max(1, ...connectionCounts)
  const targets = [["/v1/proxy/openai", proxyBody], ["/v1/capabilities/reason", reasonBody]] as const
  const steps = [1, ...(widest > 1 ? [widest] : [])].flatMap((connections) =>
    targets.flatMap(([path, body]) => [[hot], many].map((keys) => ({ connections, path, body, keys })))
  )
  const share = serverWarmupSeconds / steps.length
  let calls = 0
  let failed = 0
  const oneConnection: Array<number> = []
  for (const step of steps) {
    const cell = await load(`${base}${step.path}`, step.body, step.connections, share, step.keys)
    calls += cell.ok
    failed += cell.failed
    if (step.connections === 1) oneConnection.push(cell.p50)
  }
  console.error(
    `bench:http: ${backend}: server warm-up: ${calls} calls in ${serverWarmupSeconds} s (${failed} failed), not counted; ` +
      `p50 at one connection ${fixed(oneConnection[0], 2)} ms in its first share, ${fixed(oneConnection.at(-1), 2)} ms in its last`
  )
}

const runBackend = async (backend: "pg" | "pglite", upstreamPort: number, rows: Array<Row>, figures: Array<ServerFigures>) => {
  const { server, base, startMs, startCpuMs, database } = await startServer(backend, upstreamPort)
  console.error(
    `bench:http: ${backend}: healthy after ${startMs.toFixed(0)} ms, running ${await whatStartRuns(serverRoot, {})}; ` +
      `funding ${walletCount + 1} wallets`
  )
  const pid = server.child.pid!
  const { settledAfterMs, rssPeakStartMb, rssIdleMb } = await idleMemory(pid)
  const [hot] = await fundedAccounts(base, 1, "hot")
  const many = await fundedAccounts(base, walletCount, "wallet")
  await warmUpServer(backend, base, hot!, many)
  const direct = `http://127.0.0.1:${upstreamPort}/v1/chat/completions`
  const floor = database === undefined ? undefined : await startFloor(database.url, upstreamPort)
  for (const connections of connectionCounts) {
    const directCell = await measure(direct, JSON.stringify(chatBody), connections, [])
    rows.push({ backend, target: "upstream direct", connections, wallets: "-", cell: directCell })
    if (floor !== undefined) {
      console.error(`bench:http: ${backend}: the floor (forward + 1 commit), ${connections} connection(s)`)
      const cell = await measure(`${floor.base}/v1/proxy/openai`, proxyBody, connections, [], floor.floor.child.pid, database?.name)
      rows.push({ backend, target: "floor: forward + 1 commit", connections, wallets: "-", cell, direct: directCell })
    }
    for (const [target, path, body] of [["POST /v1/proxy/openai", "/v1/proxy/openai", proxyBody], ["POST /v1/capabilities/reason", "/v1/capabilities/reason", reasonBody]] as const) {
      for (const [wallets, keys] of [["1 (hot)", [hot!]], [String(walletCount), many]] as const) {
        console.error(`bench:http: ${backend}: ${target}, ${connections} connection(s), ${wallets} wallet(s)`)
        const cell = await measure(`${base}${path}`, body, connections, keys, server.child.pid, database?.name)
        rows.push({ backend, target, connections, wallets, cell, direct: directCell })
      }
    }
  }
  const rssAfterMb = rssMb(pid)
  if (floor !== undefined) await stopChild(floor.floor.child)
  // Stopped right after the last cell, as an operator's SIGTERM would find it after load.
  const stopped = await stopChild(server.child)
  figures.push({ backend, startMs, startCpuMs, rssPeakStartMb, settledAfterMs, rssIdleMb, rssAfterMb, stopped })
}

// ---------------------------------------------------------------------------
// Interleaved A/B (--against)

interface Side {
  readonly label: string
  readonly base: string
  readonly pid: number
  readonly dispatcher: Agent
  readonly hot: string
  readonly many: ReadonlyArray<string>
  /** PostgreSQL: the side's own database, whose backends' CPU each block reads. */
  readonly database: string | undefined
}

/**
 * `count` requests to the side, `--ab-connections` in flight at a time (one request at a time on
 * each of the side's connections; one connection by default): each response's time (ms) and the
 * block's rate (requests per second of the block's wall time), or a failure thrown.
 */
const blockOf = async (
  side: Side,
  keys: ReadonlyArray<string>,
  count: number,
  turn: { next: number }
): Promise<{ readonly times: Array<number>; readonly rate: number }> => {
  const times: Array<number> = new Array(count)
  let sent = 0
  const worker = async () => {
    while (sent < count) {
      const i = sent++
      const key = keys[turn.next++ % keys.length]!
      const started = performance.now()
      const response = await request(`${side.base}/v1/proxy/openai`, {
        dispatcher: side.dispatcher,
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
        body: proxyBody
      })
      const text = await response.body.text()
      times[i] = performance.now() - started
      if (response.statusCode !== 200) throw new Error(`${side.label}: HTTP ${response.statusCode} ${text.slice(0, 500)}`)
    }
  }
  const started = performance.now()
  await Promise.all(Array.from({ length: Math.min(abConnections, count) }, worker))
  return { times, rate: count / ((performance.now() - started) / 1000) }
}

interface AbRow {
  readonly backend: string
  readonly cell: string
  readonly side: string
  readonly p50: number
  readonly p90: number
  readonly p99: number
  readonly cpuMsPerRequest: number | undefined
  readonly dbCpuMsPerRequest: number | undefined
  readonly blockP50s: ReadonlyArray<number>
  /** Each block's requests per second of its wall time (what --ab-connections above 1 compares). */
  readonly blockRates: ReadonlyArray<number>
}

const sorted = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)

/**
 * Two rounds, each with both servers started afresh (fresh databases or data directories) and
 * half the blocks: the first starts `server` then `against`, the second the other way round, so
 * that neither build is always the one started (and funded, and warmed) first. A/A runs (one
 * build on both sides) put the median block difference within 0.05 ms on one hot wallet and up
 * to 0.2 ms over 256 wallets: a smaller difference needs the run repeated with the two builds'
 * places swapped (docs/performance.md, "Interleaved A/B").
 */
const runInterleaved = async (backend: "pg" | "pglite", upstreamPort: number, rows: Array<AbRow>) => {
  const specs = [
    { label: "server", checkout: serverRoot, env: {} as Record<string, string> },
    { label: "against", checkout: againstRoot!, env: againstEnv }
  ] as const
  const cells = [["1 (hot)", (side: Side) => [side.hot]], [`${walletCount}`, (side: Side) => side.many]] as const
  const results = cells.map(() =>
    specs.map(() => ({ times: [] as Array<number>, blockP50s: [] as Array<number>, blockRates: [] as Array<number>, cpu: 0, dbCpu: 0 }))
  )
  for (const [round, order] of [[0, 1], [1, 0]].entries()) {
    const sides: Array<Side> = []
    const servers: Array<ChildProcess> = []
    for (const i of order) {
      const spec = specs[i]!
      const { server, base, startMs, database } = await startServer(backend, upstreamPort, spec.checkout, spec.env)
      console.error(
        `bench:http: ${backend}: round ${round + 1}: ${spec.label} (${spec.checkout}) healthy after ${startMs.toFixed(0)} ms, ` +
          `running ${await whatStartRuns(spec.checkout, spec.env)}; ` +
          `funding ${walletCount + 1} wallets`
      )
      const [hot] = await fundedAccounts(base, 1, "hot")
      const many = await fundedAccounts(base, walletCount, "wallet")
      const dispatcher = new Agent({ connections: abConnections, pipelining: 1 })
      sides[i] = { label: spec.label, base, pid: server.child.pid!, dispatcher, hot: hot!, many, database: database?.name }
      servers.push(server.child)
    }
    for (const [c, [cell, keysOf]] of cells.entries()) {
      const count = round === 0 ? Math.ceil(blocks / 2) : Math.floor(blocks / 2)
      console.error(
        `bench:http: ${backend}: round ${round + 1}: POST /v1/proxy/openai, ${connectionsText(abConnections)}, ${cell} wallet(s): ` +
          `${count} blocks of ${blockSize} each`
      )
      const turns = sides.map(() => ({ next: 0 }))
      for (const [i, side] of sides.entries()) await blockOf(side, keysOf(side), abWarmup, turns[i]!)
      for (let b = 0; b < count; b++) {
        for (const i of b % 2 === 0 ? [0, 1] : [1, 0]) {
          const side = sides[i]!
          const result = results[c]![i]!
          // The database's backends are read (one query on the admin database) outside the block's timing.
          const dbBefore = side.database === undefined ? undefined : await databaseSample(side.database)
          const before = cpuMs(side.pid)
          const { times: block, rate } = await blockOf(side, keysOf(side), blockSize, turns[i]!)
          const after = cpuMs(side.pid)
          const dbAfter = side.database === undefined ? undefined : await databaseSample(side.database)
          result.cpu += before === undefined || after === undefined ? Number.NaN : after - before
          const dbCpu = dbBefore === undefined || dbAfter === undefined
            ? undefined
            : databaseFigures(dbBefore, dbAfter, 1).backendCpuMsPerRequest
          result.dbCpu += dbCpu ?? Number.NaN
          result.times.push(...block)
          result.blockP50s.push(percentile(sorted(block), 50))
          result.blockRates.push(rate)
        }
      }
    }
    for (const side of sides) await side.dispatcher.close()
    for (const child of servers) await stopChild(child)
  }
  for (const [c, [cell]] of cells.entries()) {
    for (const [i, spec] of specs.entries()) {
      const { times, blockP50s, blockRates, cpu, dbCpu } = results[c]![i]!
      const all = sorted(times)
      rows.push({
        backend,
        cell,
        side: spec.label,
        p50: percentile(all, 50),
        p90: percentile(all, 90),
        p99: percentile(all, 99),
        cpuMsPerRequest: Number.isNaN(cpu) ? undefined : cpu / all.length,
        dbCpuMsPerRequest: Number.isNaN(dbCpu) ? undefined : dbCpu / all.length,
        blockP50s,
        blockRates
      })
    }
  }
}

const printInterleaved = (rows: ReadonlyArray<AbRow>) => {
  console.log("")
  console.log(`A/B, interleaved: server = ${serverRoot}; against = ${againstRoot}` +
    (Object.keys(againstEnv).length === 0 ? "" : ` with ${Object.entries(againstEnv).map(([k, v]) => `${k}=${v}`).join(", ")}`))
  console.log("")
  console.log(table(
    ["backend", "wallets", "build", "p50 ms", "p90 ms", "p99 ms", "server CPU ms/req", "DB CPU ms/req", "block p50s, 10th - 90th ms", "block req/s, median"],
    rows.map((row) => {
      const blockP50s = sorted(row.blockP50s)
      return [row.backend, row.cell, row.side, fixed(row.p50, 3), fixed(row.p90, 3), fixed(row.p99, 3), fixed(row.cpuMsPerRequest, 3),
        fixed(row.dbCpuMsPerRequest, 3),
        `${fixed(percentile(blockP50s, 10), 3)} - ${fixed(percentile(blockP50s, 90), 3)}`,
        fixed(percentile(sorted(row.blockRates), 50), 0)]
    })
  ))
  console.log("")
  const pairs: Array<Array<string>> = []
  for (let i = 0; i + 1 < rows.length; i += 2) {
    const [server, against] = [rows[i]!, rows[i + 1]!]
    const differences = server.blockP50s.map((p50, b) => against.blockP50s[b]! - p50)
    const ordered = sorted(differences)
    // Rates: against over server, block by block (above 1: against did more requests a second).
    const ratios = server.blockRates.map((rate, b) => against.blockRates[b]! / rate)
    const orderedRatios = sorted(ratios)
    pairs.push([
      server.backend,
      server.cell,
      fixed(percentile(ordered, 50), 3),
      `${fixed(percentile(ordered, 10), 3)} - ${fixed(percentile(ordered, 90), 3)}`,
      `${differences.filter((d) => d < 0).length} / ${differences.filter((d) => d > 0).length} of ${differences.length}`,
      fixed(percentile(orderedRatios, 50), 3),
      `${fixed(percentile(orderedRatios, 10), 3)} - ${fixed(percentile(orderedRatios, 90), 3)}`
    ])
  }
  console.log(table(
    [
      "backend",
      "wallets",
      "against - server, block p50, median ms",
      "10th - 90th ms",
      "blocks faster: against / server",
      "against / server, block req/s, median",
      "10th - 90th"
    ],
    pairs
  ))
}

/** "1 connection" or "N connections", as the headings and progress lines name them. */
const connectionsText = (n: number) => (n === 1 ? "1 connection" : `${n} connections`)

/** A figure to `digits` places; "-" when there is none. A value that rounds to zero prints without a sign. */
const fixed = (value: number | undefined, digits: number) => {
  if (value === undefined || Number.isNaN(value)) return "-"
  const text = value.toFixed(digits)
  return Number(text) === 0 ? text.replace(/^-/, "") : text
}

const table = (headers: ReadonlyArray<string>, lines: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = headers.map((h, i) => Math.max(h.length, ...lines.map((line) => line[i]!.length)))
  const format = (cells: ReadonlyArray<string>) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`
  return [format(headers), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...lines.map(format)].join("\n")
}

const main = async () => {
  console.log(
    againstRoot === undefined
      ? `Spendgate HTTP benchmark: node ${process.version}, ${durationSeconds} s a cell (+${warmupSeconds} s warm-up), ` +
        `${serverWarmupSeconds} s of server warm-up, ` +
        `${walletCount} wallets, backends ${backends.join(", ")}, connections ${connectionCounts.join(", ")}` +
        (serverRoot === root ? "" : `, server from ${serverRoot}`)
      : `Spendgate HTTP benchmark, interleaved A/B: node ${process.version}, ${blocks} blocks of ${blockSize} requests a build ` +
        `and cell, ${connectionsText(abConnections)}, one hot wallet and ${walletCount} wallets, backends ${backends.join(", ")}`
  )
  const upstream = start([join(root, "bench/upstream.ts")], { PORT: "0" }, root)
  let upstreamPort = 0
  for (let waited = 0; upstreamPort === 0; waited += 10) {
    const match = /listening (\d+)/.exec(upstream.output())
    if (match !== null) upstreamPort = Number(match[1])
    else if (upstream.child.exitCode !== null || waited > 30_000) throw new Error(`the upstream did not start:\n${upstream.output()}`)
    else await sleep(10)
  }
  if (againstRoot !== undefined) {
    const abRows: Array<AbRow> = []
    for (const backend of backends) await runInterleaved(backend as "pg" | "pglite", upstreamPort, abRows)
    await stopChild(upstream.child)
    printInterleaved(abRows)
    return
  }
  const rows: Array<Row> = []
  const figures: Array<ServerFigures> = []
  for (const backend of backends) await runBackend(backend as "pg" | "pglite", upstreamPort, rows, figures)
  await stopChild(upstream.child)

  console.log("")
  console.log(table(
    ["backend", "target", "conn", "wallets", "req/s", "p50 ms", "p99 ms", "overhead p50 ms", "ratio", "server CPU ms/req", "DB tx/req", "WAL B/req", "DB CPU ms/req", "failed"],
    rows.map((row) => [
      row.backend,
      row.target,
      String(row.connections),
      row.wallets,
      fixed(row.cell.rps, 0),
      fixed(row.cell.p50, 2),
      fixed(row.cell.p99, 2),
      row.direct === undefined ? "-" : fixed(row.cell.p50 - row.direct.p50, 2),
      row.direct === undefined ? "-" : `${fixed(row.cell.p50 / row.direct.p50, 1)}x`,
      fixed(row.cell.cpuMsPerRequest, 2),
      fixed(row.cell.database?.transactionsPerRequest, 2),
      fixed(row.cell.database?.walBytesPerRequest, 0),
      fixed(row.cell.database?.backendCpuMsPerRequest, 2),
      String(row.cell.failed)
    ])
  ))
  console.log("")
  console.log(table(
    ["backend", "start to healthy /health ms", "start-up CPU ms", "RSS peak of start-up MB", "idle after ms", "RSS idle MB", "RSS after the run MB", "SIGTERM to exit ms", "ended"],
    figures.map((f) => [
      f.backend,
      fixed(f.startMs, 0),
      fixed(f.startCpuMs, 0),
      fixed(f.rssPeakStartMb, 0),
      fixed(f.settledAfterMs, 0),
      fixed(f.rssIdleMb, 0),
      fixed(f.rssAfterMb, 0),
      fixed(f.stopped.ms, 0),
      f.stopped.how
    ])
  ))
  console.log("")
  console.log(`The targets (docs/performance.md), this run; the floor's figure in the same cell beside:`)
  console.log(table(
    ["target", "this run", "met", "floor"],
    checkTargets(
      rows.map((row) => ({ ...row, rps: row.cell.rps, p50: row.cell.p50, p99: row.cell.p99, direct: row.direct })),
      figures,
      walletCount
    ).map((line) => [line.target, line.figure, line.met, line.floor])
  ))
}

try {
  await main()
  await finish(0)
} catch (error) {
  console.error(`bench:http: ${error instanceof Error ? error.message : String(error)}`)
  await finish(1)
}
