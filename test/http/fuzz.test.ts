import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { checkAccount } from "../support/ledger-check.ts"
import { client, errorCode, type RunningServer, startServer, storeBackends } from "../support/server.ts"
import {
  anyJson,
  contentTypes,
  encodeLoosely,
  idempotencyKeys,
  nastyScalar,
  type Operation,
  operationsOf,
  rawBody,
  type RawBody,
  segment,
  valueFor
} from "./fuzz-openapi.ts"

/**
 * Every operation the server publishes in /v1/openapi.json (every path and
 * method), plus the dev rails' own routes, gets bad input: path and query
 * parameters, Idempotency-Key headers, bodies built from the published
 * schema and then spoiled, raw bodies that are not JSON, wrong content
 * types; as the owner, as a worker agent (also by `x-api-key`), with the
 * admin token, with no key and with a wrong one. Over memory, PGlite and
 * PostgreSQL.
 *
 * No request may produce a 5xx other than a documented 503 (no provider or
 * no rate configured) or 502 (provider error); every error is in the
 * envelope `{ error: { code, message } }`; a refused policy change changes
 * nothing; and afterwards the money still adds up.
 *
 * Bounded: FUZZ_RUNS runs per operation and backend (default 15). The seed
 * is printed; FUZZ_SEED=<n> replays it, and a failure prints fast-check's
 * `seed` and `path` for `fc.assert(..., { seed, path })`.
 *
 * Inputs that once answered 500 (or outside the envelope) are kept as fixed
 * regression cases in FORMER_500S, beside the generated ones.
 */

const RUNS = Number(process.env["FUZZ_RUNS"] ?? 15)
const SEED = Number(process.env["FUZZ_SEED"] ?? (Date.now() % 2 ** 31))
/** FUZZ_COLLECT=1: record every violation instead of stopping at the first (to survey, not for CI). */
const COLLECT = process.env["FUZZ_COLLECT"] === "1"
const collected: Array<string> = []
const ADMIN_TOKEN = "admin-token-for-fuzzing-0123456789"
console.log(`fuzz: FUZZ_SEED=${SEED} FUZZ_RUNS=${RUNS}`)

// The document itself comes from a running server, so that the fuzzer follows the API as it is.
const spec = await (async () => {
  const server = await startServer(MemoryStore.layer)
  try {
    return await (await fetch(`${server.baseUrl}/v1/openapi.json`)).json()
  } finally {
    await server.close()
  }
})()

const devOperations: ReadonlyArray<Operation> = [
  {
    method: "POST",
    path: "/v1/dev/lightning/pay",
    pathParams: [],
    query: [],
    body: { type: "object", properties: { paymentRequest: { type: "string", maxLength: 4096 } }, required: ["paymentRequest"] },
    secured: false
  },
  { method: "GET", path: "/dev/checkout/{sessionId}", pathParams: ["sessionId"], query: [], body: undefined, secured: false },
  { method: "POST", path: "/dev/checkout/{sessionId}/pay", pathParams: ["sessionId"], query: [], body: undefined, secured: false },
  { method: "GET", path: "/v1/openapi.json", pathParams: [], query: [], body: undefined, secured: false }
]

const operations: ReadonlyArray<Operation> = [...operationsOf(spec), ...devOperations]

/** 5xx answers the API documents: nothing configured to answer (503) or a provider that failed (502). */
/** OpenAI-compatible routes run through a capability: 503 when no provider is configured for it. */
const OPENAI_CAPABILITY_ROUTES: ReadonlySet<string> = new Set(["/v1/images/generations", "/v1/audio/speech", "/v1/audio/transcriptions"])
const upstreamRoutes = (path: string) =>
  path.startsWith("/v1/capabilities/") || path.startsWith("/v1/proxy/") || OPENAI_CAPABILITY_ROUTES.has(path)
const documented5xx = new Map<string, (path: string) => boolean>([
  // No provider configured for the capability (these servers configure none), or no service behind the
  // proxy; a quote names the provider the call will run on, so it can find none too (docs/quotes.md).
  ["PROVIDER_UNAVAILABLE", (path) => upstreamRoutes(path) || path === "/v1/quotes"],
  ["PROVIDER_ERROR", upstreamRoutes],
  // No BTC/USD rate configured: the operator's rate and anything priced in sats.
  ["RATE_UNAVAILABLE", () => true]
])

export interface Sent {
  readonly backend: string
  readonly method: string
  readonly path: string
  readonly url: string
  readonly body: RawBody
}

/**
 * Inputs that once answered 500 on PostgreSQL and PGlite, kept as fixed
 * regression cases beside the generated ones: NUL in a path or query value
 * (PostgreSQL refuses 0x00 in text), NUL in a JSON body that reaches SQL, and
 * an amount past the bigint column. Each must now be a 4xx in the envelope.
 */
export const FORMER_500S: ReadonlyArray<{
  readonly name: string
  readonly reproduce: { readonly method: string; readonly path: string; readonly body?: unknown }
}> = [
  { name: "NUL (%00) as a path parameter", reproduce: { method: "GET", path: "/v1/agents/%00" } },
  { name: "NUL (%00) inside a path parameter", reproduce: { method: "GET", path: "/v1/agents/a%00b/policy" } },
  { name: "NUL (%00) in an audit id", reproduce: { method: "GET", path: "/v1/audit/aud_%00" } },
  { name: "NUL (%00) in a query value", reproduce: { method: "GET", path: "/v1/wallet/transactions?agentId=%00" } },
  { name: "NUL (%00) in a dev checkout id", reproduce: { method: "GET", path: "/dev/checkout/%00" } },
  {
    name: "NUL in the dev rail's paymentRequest",
    reproduce: { method: "POST", path: "/v1/dev/lightning/pay", body: { paymentRequest: "lnbc\u0000" } }
  },
  { name: "fund-card amountUsdCents of 1e15", reproduce: { method: "POST", path: "/v1/wallet/fund-card", body: { amountUsdCents: 1e15 } } },
  { name: "fund-card amountUsdCents of 9.2e14", reproduce: { method: "POST", path: "/v1/wallet/fund-card", body: { amountUsdCents: 9.2e14 } } },
  { name: "Lightning funding of 1e15 sats", reproduce: { method: "POST", path: "/v1/wallet/fund", body: { amountSats: 1e15 } } }
]

describe.each(storeBackends)("fuzzing every published operation over %s", (backend, store) => {
  let server: RunningServer
  let api: ReturnType<typeof client>
  const keys: Record<string, string> = {}
  const hints = new Map<string, Array<string>>()
  const ids: Record<string, Array<string>> = {}
  const accounts: Array<string> = []
  /** The agent each of the fuzzer's keys belongs to (the signup's owner, the worker, the second owner). */
  const KEYED = ["owner", "worker", "second"] as const
  const agentOf: Record<string, string> = {}

  beforeAll(async () => {
    // Thousands of requests a minute from one key: the limits are lifted here (tested in test/ratelimit/).
    server = await startServer(store(), {
      adminToken: ADMIN_TOKEN,
      rateLimits: { agentPerMinute: 1_000_000, accountPerMinute: 1_000_000 }
    })
    api = client(server.baseUrl)
    const signup = await api.post("/v1/signup", { name: "fuzz" })
    keys["owner"] = signup.body.apiKey
    const worker = await api.post("/v1/agents", { name: "worker", role: "agent" }, keys["owner"])
    keys["worker"] = worker.body.apiKey
    const second = await api.post("/v1/agents", { name: "second", role: "owner" }, keys["owner"])
    keys["second"] = second.body.apiKey
    const other = await api.post("/v1/signup", { name: "other account" })
    accounts.push(signup.body.accountId, other.body.accountId)
    // Real ids, so that requests reach the code behind the lookups.
    const fund = await api.post("/v1/wallet/fund", { amountSats: 2000 }, keys["owner"])
    const unpaid = await api.post("/v1/wallet/fund", { amountSats: 1000 }, keys["owner"])
    await api.post("/v1/dev/lightning/pay", { paymentRequest: fund.body.paymentRequest })
    const card = await api.post("/v1/wallet/fund-card", { amountUsdCents: 1500 }, keys["owner"])
    expect(card.status, card.text).toBe(200)
    const sessionId = new URL(card.body.checkoutUrl).pathname.split("/").pop()!
    const txns = await api.get("/v1/wallet/transactions", keys["owner"])
    const submission = await api.post("/v1/registry/submit", {
      slug: "fuzzsvc",
      name: "Fuzz service",
      description: "d",
      baseUrl: "https://example.com",
      capabilities: ["search"],
      endpoints: [{ path: "/x", method: "GET", description: "x" }],
      pricing: { "/x": { perCallUsdCents: 1 } }
    }, keys["owner"])
    ids["id"] = [signup.body.agentId, worker.body.id, second.body.id, other.body.agentId, submission.body?.id].filter(Boolean)
    Object.assign(agentOf, { owner: signup.body.agentId, worker: worker.body.id, second: second.body.id })
    ids["auditId"] = txns.body.transactions.map((t: any) => t.auditId).filter(Boolean)
    ids["capability"] = ["reason", "search", "read", "scrape", "execute", "imagine", "speak", "transcribe", "email", "sms", "teleport"]
    ids["slug"] = ["fuzzsvc", "openai", "anthropic", "brave"]
    ids["sessionId"] = [sessionId]
    hints.set("paymentRequest", [fund.body.paymentRequest, unpaid.body.paymentRequest])
    hints.set("agentId", ids["id"])
    hints.set("accountId", [signup.body.accountId, other.body.accountId])
    hints.set("role", ["owner", "agent"])
    expect([keys["owner"], keys["worker"], keys["second"], sessionId].every((k) => typeof k === "string")).toBe(true)
  }, 60_000)
  afterAll(async () => {
    if (COLLECT) console.log(`fuzz over ${backend}: ${collected.length} violations:\n${collected.join("\n")}`)
    collected.length = 0
    await server?.close()
  })

  /**
   * Keeps the fuzzer's three keys working after an accepted rotation or deletion of their agent:
   * a rotated key is replaced by the new one the answer shows; a deleted agent by a new one of the
   * same role (the account's last live owner cannot be deleted, so one owner key always works).
   * Without this, every later request made with that key would be a 401 that reaches nothing.
   */
  const keepKeys = async (op: Operation, path: string, body: any) => {
    if (op.method === "POST" && op.path === "/v1/agents/{id}/rotate-key" && typeof body?.apiKey === "string") {
      const name = KEYED.find((name) => agentOf[name] === body.id)
      if (name !== undefined) keys[name] = body.apiKey
    }
    if (op.method === "DELETE" && op.path === "/v1/agents/{id}") {
      const name = KEYED.find((name) => path === `/v1/agents/${encodeURIComponent(agentOf[name]!)}`)
      if (name === undefined) return
      for (const by of KEYED) {
        const made = await api.post("/v1/agents", { name: `${name} again`, role: name === "worker" ? "agent" : "owner" }, keys[by])
        if (made.status === 201 || made.status === 200) {
          keys[name] = made.body.apiKey
          agentOf[name] = made.body.id
          return
        }
      }
      throw new Error(`no owner key left to replace the deleted ${name}`)
    }
  }

  /** Undoes what an accepted request may have changed about the agents (kills, policies). */
  const restore = async () => {
    const owner = keys["owner"]!
    const second = keys["second"]!
    for (const id of KEYED.map((name) => agentOf[name]!)) {
      const res = await api.patch(`/v1/agents/${id}`, { killed: false }, second)
      if (res.status === 403) await api.patch(`/v1/agents/${id}`, { killed: false }, owner)
    }
  }

  const request = (op: Operation) => {
    const params = op.pathParams.map((name) => segment(ids[name] ?? []))
    const query = op.query.map(({ name, schema }) =>
      fc.option(fc.oneof(segment(hints.get(name) ?? [], schema), fc.constantFrom("-1", "0", "1e3", "1e308", "2026-02-30", "2026-01-01T00:00:00Z", "abc")), { nil: undefined })
        .map((value) => value === undefined ? undefined : `${encodeLoosely(name)}=${value}`)
    )
    const extraQuery = fc.option(fc.tuple(segment([]), segment([])).map(([k, v]) => `${k}=${v}`), { nil: undefined })
    const body: fc.Arbitrary<RawBody> = op.body === undefined
      ? fc.oneof({ weight: 3, arbitrary: fc.constant<RawBody>({ kind: "none" }) }, { weight: 1, arbitrary: anyJson.map<RawBody>((value) => ({ kind: "json", value })) })
      : fc.oneof(
        { weight: 6, arbitrary: valueFor(spec, op.body, 0, hints).map<RawBody>((value) => ({ kind: "json", value })) },
        { weight: 1, arbitrary: nastyScalar.map<RawBody>((value) => ({ kind: "json", value })) },
        { weight: 2, arbitrary: rawBody }
      )
    const admin = op.path.startsWith("/v1/admin")
    const auth = fc.constantFrom(...(admin ? ["admin", "admin", "admin", "owner", "none", "garbage"] : ["owner", "owner", "owner", "worker", "worker", "none", "garbage", "x-api-key", "x-api-key-garbage"]))
    return fc.record({
      params: fc.tuple(...params),
      query: fc.tuple(...query, extraQuery),
      body,
      contentType: contentTypes,
      idempotencyKey: idempotencyKeys,
      auth
    })
  }

  const send = async (op: Operation, input: any) => {
    let path = op.path
    op.pathParams.forEach((name, i) => (path = path.replace(`{${name}}`, input.params[i])))
    const qs = (input.query as Array<string | undefined>).filter((q) => q !== undefined).join("&")
    const url = `${server.baseUrl}${path}${qs === "" ? "" : `?${qs}`}`
    const headers: Record<string, string> = {}
    if (input.auth === "admin") headers["authorization"] = `Bearer ${ADMIN_TOKEN}`
    else if (input.auth === "garbage") headers["authorization"] = "Bearer sk_live_\u00ff\u00fe"
    // The agent key in Anthropic's header instead of Authorization (taken on every agent route).
    else if (input.auth === "x-api-key") headers["x-api-key"] = keys["worker"]!
    else if (input.auth === "x-api-key-garbage") headers["x-api-key"] = "sk_agt_\u00ff\u00fe"
    else if (input.auth !== "none") headers["authorization"] = `Bearer ${keys[input.auth]}`
    if (input.idempotencyKey !== undefined) headers["idempotency-key"] = input.idempotencyKey
    const raw: RawBody = input.body
    let payload: string | Uint8Array | undefined
    if (raw.kind === "json") payload = JSON.stringify(raw.value) ?? "null"
    else if (raw.kind === "text") payload = raw.text
    else if (raw.kind === "bytes") payload = raw.bytes
    if (payload !== undefined && input.contentType !== undefined) headers["content-type"] = input.contentType
    const method = op.method
    const response = await fetch(url, {
      method,
      headers,
      ...(payload === undefined || method === "GET" ? {} : { body: payload })
    })
    const text = await response.text()
    let parsed: any = undefined
    try {
      parsed = text === "" ? undefined : JSON.parse(text)
    } catch {
      parsed = undefined
    }
    return { sent: { backend, method, path: op.path, url, body: raw } satisfies Sent, status: response.status, text, body: parsed, headers: response.headers }
  }

  it.each(operations.map((op) => [`${op.method} ${op.path}`, op] as const))("%s", async (_label, op) => {
    const policyPath = /^\/v1\/agents\/\{id\}\/policy$/.test(op.path) && op.method !== "GET"
    await fc.assert(
      fc.asyncProperty(request(op), async (input) => {
        const before = policyPath ? await api.get(`/v1/agents/${ids["id"]![1]}/policy`, keys["owner"]) : undefined
        const res = await send(op, input)
        const where = `${res.sent.method} ${res.sent.url.slice(0, 300)} body=${JSON.stringify(res.sent.body)?.slice(0, 300)} -> ${res.status} ${res.text.slice(0, 300)}`
        try {
          if (res.status >= 500) {
            const code = res.body?.error?.code
            expect(res.status === 502 || res.status === 503, `5xx: ${where}`).toBe(true)
            expect(documented5xx.get(code)?.(op.path) === true, `undocumented ${res.status} ${code} on ${op.path}: ${where}`).toBe(true)
          }
          if (op.path === "/health") return
          if (res.status >= 400 && !(op.path.startsWith("/dev/checkout") && op.method === "GET")) {
            expect(() => errorCode({ status: res.status, headers: res.headers, body: res.body, text: res.text }), where).not.toThrow()
          }
          if (before !== undefined && res.status === 400) {
            const after = await api.get(`/v1/agents/${ids["id"]![1]}/policy`, keys["owner"])
            // Error bodies carry their own request's id; the rest must be the same.
            const withoutRequestId = (body: any) =>
              body?.error?.requestId === undefined ? body : { ...body, error: { ...body.error, requestId: undefined } }
            expect(withoutRequestId(after.body), `a refused policy change changed the policy: ${where}`).toEqual(
              withoutRequestId(before.body)
            )
          }
        } catch (error) {
          if (!COLLECT) throw error
          collected.push(where.slice(0, 400))
        } finally {
          if (res.status < 300 && (op.method === "PATCH" || op.method === "PUT")) await restore()
          if (res.status < 300) await keepKeys(op, new URL(res.sent.url).pathname, res.body)
        }
      }),
      // No shrinking: a failure is reported with the input that failed (shrinking the long
      // arrays some inputs hold can overflow fast-check's stack and hide the failure).
      { numRuns: RUNS, seed: SEED, interruptAfterTimeLimit: 20_000, markInterruptAsFailure: false, endOnFailure: true }
    )
  }, 60_000)

  /**
   * The fixed cases run as the owner of an account of their own, signed up for them: whatever the
   * generated requests did to the fuzzer's accounts, the request reaches the code it is about
   * (a 401 would pass "not a 500" without reaching anything, so it fails here).
   */
  const freshOwnerKey = async () => {
    const signup = await api.post("/v1/signup", { name: "fixed case" })
    expect(signup.status, signup.text).toBe(201)
    accounts.push(signup.body.accountId)
    return signup.body.apiKey as string
  }

  for (const former of FORMER_500S) {
    it(`answers in the envelope, not 500: ${former.name}`, async () => {
      const { method, path, body } = former.reproduce
      const res = await api.call(method, path, { key: await freshOwnerKey(), ...(body === undefined ? {} : { body }) })
      expect(res.status, `${method} ${path} -> ${res.status}`).not.toBe(401)
      expect(res.status, `${method} ${path} -> ${res.status}`).toBeGreaterThanOrEqual(400)
      expect(res.status, `${method} ${path} -> ${res.status}`).toBeLessThan(500)
      expect(errorCode(res)).toMatch(/^[A-Z_]+$/)
    })
  }
  it("answers a valid quote for a capability no provider serves with 503 PROVIDER_UNAVAILABLE, as documented", async () => {
    // Once found by the generated requests: a well-formed quote is rare enough among them to have
    // gone unseen until the list of documented 5xx answers left /v1/quotes out.
    const res = await api.call("POST", "/v1/quotes", {
      key: await freshOwnerKey(),
      body: { capability: "reason", input: { prompt: "hello" } }
    })
    expect(res.status).toBe(503)
    expect(errorCode(res)).toBe("PROVIDER_UNAVAILABLE")
    expect(documented5xx.get("PROVIDER_UNAVAILABLE")!("/v1/quotes")).toBe(true)
  })
  it("answers a request line over Node's 16 KiB header limit in the envelope (431 HEADERS_TOO_LARGE)", async () => {
    const res = await api.call("GET", `/v1/agents?x=${"y".repeat(20_000)}`, { key: keys["owner"]! })
    expect(res.status).toBe(431)
    expect(errorCode(res)).toBe("HEADERS_TOO_LARGE")
  })

  it("still holds three working keys afterwards, so the generated requests reached past authentication", async () => {
    // A kill (a velocity policy's auto-kill among them) is undone first: a killed key is a 403, not a dead one.
    await restore()
    for (const name of KEYED) {
      const me = await api.get("/v1/agents/me", keys[name])
      expect(me.status, `${name}: ${me.text}`).toBe(200)
    }
  })

  it("still adds up afterwards: pockets equal the ledger, invoices credited once, the audit chain verifies", async () => {
    for (const accountId of accounts) {
      const { problems } = await server.run(checkAccount(accountId as AccountId))
      expect(problems, `account ${accountId}`).toEqual([])
    }
  })
})
