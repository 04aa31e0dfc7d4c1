import { upstreamLayers } from "../support/upstreamLayers.ts"
import { Effect, Exit, Layer, Logger, Redacted, Scope } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import * as OpenAiCompatible from "../../adapters/providers/reason/openaiCompatible.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { type Fake, startFake } from "../providers/fakeLlm.ts"
import { client, errorCode, type RunningServer, startServer, TEST_PUBLIC_URL } from "../support/server.ts"
import { METRICS_PATH } from "../../adapters/http/observability.ts"
import { routesOutsideApi } from "../../src/access/matrix.ts"
import * as DevCard from "../../adapters/rails/DevCard.ts"
import { type RailRoute, railJson } from "../../src/ports/Rails.ts"
import { startServerProcess } from "../support/server-process.ts"

/**
 * Request ids, the access log and GET /metrics, on a real server: the id
 * is echoed when sane and replaced when not, returned on every answer and in
 * every error body (the OpenAI and Anthropic shapes too), and annotated on
 * the request's log lines; the access log names route, status and agent but
 * never a key; the metrics are behind their token and move with requests and
 * with a paid call (a real OpenAI-compatible adapter over a local server).
 */

const ADMIN = "admin-token-0123456789abcdefghij"
const METRICS = "metrics-token-0123456789abcdefgh"
const UPSTREAM_KEY = "sk-upstream-test-key"

const jsonLines: Array<string> = []
const textLines: Array<string> = []
const loggers = Logger.layer([
  Logger.map(Logger.formatJson, (line) => void jsonLines.push(line)),
  Logger.map(Logger.formatLogFmt, (line) => void textLines.push(line))
])
const logged = () => jsonLines.map((line) => JSON.parse(line) as { message: string; level: string; annotations: Record<string, unknown> })

/** A route beside the API that logs while it runs (routes like it are how rails serve webhooks). */
const loggingRoute: RailRoute = {
  method: "GET",
  path: "/test/logs/:id",
  handle: () => Effect.as(Effect.logWarning("a warning from inside the request"), railJson({ ok: true }))
}

const metricValue = (text: string, series: string): number => {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `))
  return line === undefined ? 0 : Number(line.slice(series.length + 1))
}

describe("observability over HTTP", () => {
  const scope = Effect.runSync(Scope.make())
  let fake: Fake
  let server: RunningServer
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    fake = await Effect.runPromise(Scope.provide(startFake({ apiKey: UPSTREAM_KEY }), scope))
    fake.behaviour = { _tag: "reply", reply: { content: "ok", promptTokens: 12, completionTokens: 7 } }
    const providers = Layer.effect(
      Providers,
      Effect.map(
        OpenAiCompatible.make({
          name: "alpha",
          baseUrl: `${fake.origin}/v1`,
          apiKey: Redacted.make(UPSTREAM_KEY),
          models: [{ id: "m-1", inputPer1kMicroUsd: 1_500n, outputPer1kMicroUsd: 6_000n, maxTokens: 4096, defaultMaxTokens: 1000 }]
        }),
        (provider) => ({ all: [provider] })
      )
    ).pipe(Layer.provide(upstreamLayers))
    server = await startServer(MemoryStore.layer, {
      providers,
      adminToken: ADMIN,
      metricsToken: METRICS,
      logRequests: true,
      loggers,
      card: { rail: DevCard.layer({ publicUrl: TEST_PUBLIC_URL }), routes: [...DevCard.routes, loggingRoute] }
    })
    api = client(server.baseUrl)
  })
  afterAll(async () => {
    await server?.close()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })

  const signup = async () => {
    const res = await api.post("/v1/signup", { name: "ops" })
    expect(res.status).toBe(201)
    return res.body as { apiKey: string; agentId: string; accountId: string }
  }

  it("echoes a sane X-Request-Id, replaces an unsafe or oversized one, and makes one up when none is given", async () => {
    const echoed = await api.call("GET", "/health", { headers: { "x-request-id": "req-1.A_b:c" } })
    expect(echoed.status).toBe(200)
    expect(echoed.headers.get("x-request-id")).toBe("req-1.A_b:c")

    const generated = new Set<string>()
    for (const given of [undefined, "has space", "x".repeat(129), "semi;colon", "new\u00e9"]) {
      const res = await api.call("GET", "/health", given === undefined ? {} : { headers: { "x-request-id": given } })
      const id = res.headers.get("x-request-id")
      expect(id, String(given)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
      generated.add(id!)
    }
    expect(generated.size).toBe(5)
  })

  it("returns the id on every answer and in every error body: endpoint errors, 404, 400, 413, 415, and the OpenAI and Anthropic shapes", async () => {
    const cases: ReadonlyArray<readonly [string, string, Parameters<typeof api.call>[2], number]> = [
      ["GET", "/v1/wallet", { key: "sk_agt_wrong" }, 401],
      ["GET", "/v1/nope", {}, 404],
      ["POST", "/v1/signup", { raw: "{", headers: { "content-type": "application/json" } }, 400],
      ["POST", "/v1/signup", { raw: "name=x", headers: { "content-type": "text/plain" } }, 415],
      ["POST", "/v1/signup", { raw: JSON.stringify({ name: "x".repeat(1024 * 1024 + 10) }), headers: { "content-type": "application/json" } }, 413]
    ]
    for (const [method, path, options, status] of cases) {
      const id = `case-${status}`
      const res = await api.call(method, path, { ...options, headers: { ...options?.headers, "x-request-id": id } })
      expect(res.status, `${method} ${path}`).toBe(status)
      expect(res.headers.get("x-request-id")).toBe(id)
      expect(res.body.error.requestId, `${method} ${path}`).toBe(id)
      expect(typeof res.body.error.code).toBe("string")
    }

    const openai = await api.call("POST", "/v1/chat/completions", {
      key: "sk_agt_wrong",
      body: { model: "m-1", messages: [{ role: "user", content: "hi" }] },
      headers: { "x-request-id": "openai-1" }
    })
    expect(openai.status).toBe(401)
    expect(openai.body.error).toMatchObject({ type: expect.any(String), message: expect.any(String), requestId: "openai-1" })
    expect(openai.headers.get("x-request-id")).toBe("openai-1")

    const anthropic = await api.call("POST", "/v1/messages", {
      headers: { "x-api-key": "sk_agt_wrong", "anthropic-version": "2023-06-01", "x-request-id": "anthropic-1" },
      body: { model: "m-1", max_tokens: 10, messages: [{ role: "user", content: "hi" }] }
    })
    expect(anthropic.status).toBe(401)
    expect(anthropic.body).toMatchObject({ type: "error", error: { type: expect.any(String), requestId: "anthropic-1" } })
  })

  it("writes one access-log line per request, with route, status and agent, annotated with the id, and never the key", async () => {
    const owner = await signup()
    jsonLines.length = 0
    textLines.length = 0
    const res = await api.call("GET", `/v1/agents/${owner.agentId}?token=query-secret-123`, {
      key: owner.apiKey,
      headers: { "x-request-id": "log-1", "x-custom-secret": "header-secret-456" }
    })
    expect(res.status).toBe(200)
    await new Promise((resolve) => setTimeout(resolve, 50))
    const lines = logged().filter((line) => line.annotations["requestId"] === "log-1")
    expect(lines).toHaveLength(1)
    expect(lines[0]!.level).toBe("INFO")
    expect(lines[0]!.annotations).toMatchObject({
      method: "GET",
      route: "/v1/agents/:id",
      status: 200,
      agentId: owner.agentId
    })
    expect(typeof lines[0]!.annotations["durationMs"]).toBe("number")
    // LOG_FORMAT=text writes logfmt: the same line, with the same fields.
    const text = textLines.filter((line) => line.includes("requestId=log-1"))
    expect(text).toHaveLength(1)
    expect(text[0]).toMatch(/level=INFO .*route=\/v1\/agents\/:id status=200 durationMs=[\d.]+ agentId=agt_/)
    for (const output of [jsonLines.join("\n"), textLines.join("\n")]) {
      expect(output).toContain("log-1")
      expect(output).not.toContain(owner.apiKey)
      expect(output).not.toContain(owner.apiKey.slice(8, 24))
      expect(output).not.toContain("query-secret-123")
      expect(output).not.toContain("header-secret-456")
    }
  })

  it("annotates every log line written while the request runs with its id (a route that logs)", async () => {
    jsonLines.length = 0
    const res = await api.call("GET", "/test/logs/item_abcdef123456", { headers: { "x-request-id": "inner-1" } })
    expect(res.status).toBe(200)
    expect(res.headers.get("x-request-id")).toBe("inner-1")
    await new Promise((resolve) => setTimeout(resolve, 50))
    const lines = logged().filter((line) => line.annotations["requestId"] === "inner-1")
    expect(lines.map((line) => line.message)).toEqual(["a warning from inside the request", "GET /test/logs/:id 200 " + lines[1]!.annotations["durationMs"] + "ms"])
    expect(lines[0]!.level).toBe("WARN")
  })

  it("GET /metrics: 401 without or with a wrong token, 200 in Prometheus text with METRICS_TOKEN; ADMIN_TOKEN does not stand in when METRICS_TOKEN is set", async () => {
    expect((await api.call("GET", "/metrics")).status).toBe(401)
    const wrong = await api.call("GET", "/metrics", { key: "nope" })
    expect(wrong.status).toBe(401)
    expect(errorCode(wrong)).toBe("UNAUTHORIZED")
    expect((await api.call("GET", "/metrics", { key: ADMIN })).status).toBe(401)
    const owner = await signup()
    expect((await api.call("GET", "/metrics", { key: owner.apiKey })).status).toBe(401)
    expect(`${routesOutsideApi.metrics.method} ${routesOutsideApi.metrics.path}`).toBe(`GET ${METRICS_PATH}`)
    expect(routesOutsideApi.metrics.rule.access).toBe("admin")
    const ok = await api.call("GET", "/metrics", { key: METRICS })
    expect(ok.status).toBe(200)
    expect(ok.headers.get("content-type")).toContain("text/plain; version=0.0.4")
    expect(ok.text).toContain("# TYPE spendgate_http_requests_total counter")
    expect(ok.text).toContain("# TYPE spendgate_http_request_duration_seconds histogram")
  })

  it("counts requests by route and status, and a paid call's charge and amount by capability and provider", async () => {
    const scrape = async () => (await api.call("GET", "/metrics", { key: METRICS })).text
    const health = `spendgate_http_requests_total{route="/health",method="GET",status="200"}`
    const unmatched = `spendgate_http_requests_total{route="unmatched",method="GET",status="404"}`
    const charges = `spendgate_charges_total{capability="reason",provider="alpha"}`
    const amount = `spendgate_charged_micro_usd_total{capability="reason",provider="alpha"}`
    const refusals = `spendgate_spend_refusals_total{code="INSUFFICIENT_BALANCE"}`
    const before = await scrape()

    await api.call("GET", "/health")
    await api.call("GET", "/health")
    await api.call("GET", "/no/such/route/12345")

    const owner = await signup()
    const poor = await api.post("/v1/capabilities/reason", { prompt: "hi", maxTokens: 100 }, owner.apiKey)
    expect(errorCode(poor)).toBe("INSUFFICIENT_BALANCE")
    await server.run(Effect.gen(function*() {
      yield* (yield* Wallets).credit({
        accountId: owner.accountId as AccountId,
        key: "seed",
        pocket: "usd",
        amount: 1_000_000n,
        description: "seed"
      })
    }))
    const paid = await api.post("/v1/capabilities/reason", { prompt: "hi", maxTokens: 100 }, owner.apiKey)
    expect(paid.status).toBe(200)
    const charged = (await api.get("/v1/wallet/transactions?type=charge", owner.apiKey)).body.transactions as Array<any>
    expect(charged).toHaveLength(1)

    const after = await scrape()
    expect(metricValue(after, health) - metricValue(before, health)).toBe(2)
    expect(metricValue(after, unmatched) - metricValue(before, unmatched)).toBe(1)
    expect(metricValue(after, charges) - metricValue(before, charges)).toBe(1)
    expect(metricValue(after, amount) - metricValue(before, amount)).toBe(Math.round(Number(charged[0].amountUsdCents) * 10_000))
    expect(metricValue(after, amount) - metricValue(before, amount)).toBeGreaterThan(0)
    expect(metricValue(after, refusals) - metricValue(before, refusals)).toBe(1)
    expect(metricValue(after, "spendgate_holds_in_flight")).toBe(0)
    expect(after).toContain(`spendgate_http_request_duration_seconds_count{route="/v1/capabilities/reason"}`)
    expect(after).not.toContain("12345")
    expect(after).toContain(`spendgate_provider_circuit_state{capability="reason",provider="alpha",state="closed"} 1`)
    expect(after).toContain(`spendgate_provider_circuit_state{capability="reason",provider="alpha",state="open"} 0`)
  })

  it("shows a provider's circuit opening after consecutive upstream failures; their holds are returned", async () => {
    const owner = await signup()
    await server.run(Effect.gen(function*() {
      yield* (yield* Wallets).credit({
        accountId: owner.accountId as AccountId,
        key: "seed",
        pocket: "usd",
        amount: 1_000_000n,
        description: "seed"
      })
    }))
    fake.behaviour = { _tag: "json", status: 500, body: { error: { message: "upstream down", type: "server_error" } } }
    try {
      for (let i = 0; i < 5; i++) {
        const res = await api.post("/v1/capabilities/reason", { prompt: "hi", maxTokens: 100 }, owner.apiKey)
        expect(res.status).toBeGreaterThanOrEqual(500)
      }
    } finally {
      fake.behaviour = { _tag: "reply", reply: { content: "ok", promptTokens: 12, completionTokens: 7 } }
    }
    const text = (await api.call("GET", "/metrics", { key: METRICS })).text
    expect(text).toContain(`spendgate_provider_circuit_state{capability="reason",provider="alpha",state="open"} 1`)
    expect(text).toContain(`spendgate_provider_circuit_state{capability="reason",provider="alpha",state="closed"} 0`)
    expect(metricValue(text, "spendgate_holds_in_flight")).toBe(0)
  })
})

describe("GET /metrics without METRICS_TOKEN", () => {
  it("is 404 with neither token, and ADMIN_TOKEN opens it when METRICS_TOKEN is unset; rate-limit refusals are counted", async () => {
    const none = await startServer(MemoryStore.layer)
    try {
      const res = await client(none.baseUrl).call("GET", "/metrics", { key: ADMIN })
      expect(res.status).toBe(404)
      expect(errorCode(res)).toBe("NOT_FOUND")
    } finally {
      await none.close()
    }
    const admin = await startServer(MemoryStore.layer, { adminToken: ADMIN, rateLimits: { agentPerMinute: 2 } })
    try {
      const api = client(admin.baseUrl)
      expect((await api.call("GET", "/metrics", { key: METRICS })).status).toBe(401)
      const series = `spendgate_rate_limited_total{scope="agent"}`
      const before = metricValue((await api.call("GET", "/metrics", { key: ADMIN })).text, series)
      const owner = await api.post("/v1/signup", { name: "ops" })
      const answers = []
      for (let i = 0; i < 4; i++) answers.push((await api.get("/v1/wallet", owner.body.apiKey)).status)
      expect(answers).toEqual([200, 200, 429, 429])
      const scraped = await api.call("GET", "/metrics", { key: ADMIN })
      expect(scraped.status).toBe(200)
      expect(metricValue(scraped.text, series) - before).toBe(2)
    } finally {
      await admin.close()
    }
  })
})

describe("the server process", () => {
  it("LOG_FORMAT=json writes one JSON object a line, the access log included, and never the key", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "spendgate-obs-"))
    const server = await startServerProcess({ LOG_FORMAT: "json", DATA_DIR: dataDir }, 60_000)
    try {
      const api = client(server.baseUrl)
      const owner = await api.post("/v1/signup", { name: "ops" })
      expect(owner.status).toBe(201)
      const res = await api.call("GET", "/v1/wallet", { key: owner.body.apiKey, headers: { "x-request-id": "proc-1" } })
      expect(res.status).toBe(200)
      await new Promise((resolve) => setTimeout(resolve, 200))
      const lines = server.output().split("\n").filter((line) => line.trim() !== "")
      const parsed = lines.map((line) => JSON.parse(line) as { message: string; level: string; annotations: Record<string, unknown> })
      expect(parsed.some((line) => line.message.startsWith("Listening on http://"))).toBe(true)
      const access = parsed.filter((line) => line.annotations["requestId"] === "proc-1")
      expect(access).toHaveLength(1)
      expect(access[0]).toMatchObject({
        level: "INFO",
        annotations: { method: "GET", route: "/v1/wallet", status: 200, agentId: owner.body.agentId }
      })
      expect(server.output()).not.toContain(owner.body.apiKey)
    } finally {
      await server.stop()
      rmSync(dataDir, { recursive: true, force: true })
    }
  }, 90_000)

  it("a bad LOG_FORMAT stops the start with one clear line", async () => {
    const failure = await startServerProcess({ LOG_FORMAT: "yaml", DATA_DIR: "/nonexistent/never-opened" }).then(
      async (server) => {
        await server.stop()
        return "started"
      },
      (error: Error) => error.message
    )
    expect(failure).toContain("server exited with 1")
    expect(failure).toContain("Invalid configuration: LOG_FORMAT must be text or json")
  }, 60_000)
})
