import { Effect, Exit, Scope } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Fake, startFake } from "../providers/fakeLlm.ts"
import { client } from "../support/server.ts"
import { type ServerProcess, startServerProcess } from "../support/server-process.ts"

/**
 * OpenTelemetry export from the real server process (adapters/http/main.ts)
 * to a local OTLP/HTTP receiver: with OTEL_EXPORTER_OTLP_ENDPOINT set, a
 * paid call (the OpenAI-compatible adapter over a local upstream) arrives as
 * spans on /v1/traces (request → authentication, reserve, upstream, settle,
 * one trace, parent ids), log records on /v1/logs carrying the request's
 * trace id, and the metrics on /v1/metrics; in protobuf (the default) and in
 * JSON. Nothing exported holds a key, a token, the prompt or the answer.
 * Without the variable nothing is sent.
 */

const UPSTREAM_KEY = "sk-upstream-otlp-secret-0123456789"
const ADMIN = "admin-token-otlp-0123456789abcdefgh"
const PROMPT = "prompt-text-that-must-never-be-exported"
const ANSWER = "answer-text-that-must-never-be-exported"

// ---- a local OTLP/HTTP receiver ------------------------------------------------

interface Received {
  readonly path: string
  readonly contentType: string
  readonly body: Buffer
}

interface Receiver {
  readonly url: string
  readonly received: Array<Received>
  readonly close: () => Promise<void>
}

const startReceiver = () =>
  new Promise<Receiver>((resolve) => {
    const received: Array<Received> = []
    const server = Http.createServer((request, response) => {
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => {
        const contentType = request.headers["content-type"] ?? ""
        if (request.method !== "POST") {
          response.writeHead(405).end()
          return
        }
        received.push({ path: request.url ?? "", contentType, body: Buffer.concat(chunks) })
        // An empty Export*ServiceResponse, in the request's own encoding.
        if (contentType.startsWith("application/json")) {
          response.writeHead(200, { "content-type": "application/json" }).end("{}")
        } else {
          response.writeHead(200, { "content-type": "application/x-protobuf" }).end()
        }
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve({
        url: `http://127.0.0.1:${port}`,
        received,
        close: () => new Promise((done) => server.close(() => done()))
      })
    })
  })

// ---- OTLP payloads, decoded into one shape ---------------------------------------

type Value = string | number | boolean | null
interface SpanData {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string
  readonly name: string
  readonly kind: number
  readonly attributes: Record<string, Value>
}
interface LogData {
  readonly body: Value
  readonly traceId: string
  readonly spanId: string
  readonly attributes: Record<string, Value>
}
interface MetricData {
  readonly name: string
  readonly points: ReadonlyArray<{ readonly attributes: Record<string, Value>; readonly value: number | undefined }>
}

// Protobuf: a minimal reader of the wire format (varint, fixed64, length-delimited, fixed32).
type Field = { readonly wire: 0 | 1 | 5; readonly n: bigint } | { readonly wire: 2; readonly bytes: Buffer }

const decodeMessage = (buffer: Buffer): Map<number, Array<Field>> => {
  const fields = new Map<number, Array<Field>>()
  let at = 0
  const varint = (): bigint => {
    let result = 0n
    let shift = 0n
    for (;;) {
      const byte = buffer[at++]!
      result |= BigInt(byte & 0x7f) << shift
      if ((byte & 0x80) === 0) return result
      shift += 7n
    }
  }
  while (at < buffer.length) {
    const key = Number(varint())
    const number = key >>> 3
    const wire = key & 7
    let field: Field
    if (wire === 0) field = { wire: 0, n: varint() }
    else if (wire === 1) {
      field = { wire: 1, n: buffer.readBigUInt64LE(at) }
      at += 8
    } else if (wire === 5) {
      field = { wire: 5, n: BigInt(buffer.readUInt32LE(at)) }
      at += 4
    } else if (wire === 2) {
      const length = Number(varint())
      field = { wire: 2, bytes: buffer.subarray(at, at + length) }
      at += length
    } else throw new Error(`unexpected wire type ${wire}`)
    fields.set(number, [...(fields.get(number) ?? []), field])
  }
  return fields
}

const bytesOf = (fields: Map<number, Array<Field>>, n: number): Array<Buffer> =>
  (fields.get(n) ?? []).flatMap((f) => f.wire === 2 ? [f.bytes] : [])
const messagesOf = (fields: Map<number, Array<Field>>, n: number) => bytesOf(fields, n).map(decodeMessage)
const stringOf = (fields: Map<number, Array<Field>>, n: number) => bytesOf(fields, n)[0]?.toString("utf8") ?? ""
const hexOf = (fields: Map<number, Array<Field>>, n: number) => bytesOf(fields, n)[0]?.toString("hex") ?? ""
const numberOf = (fields: Map<number, Array<Field>>, n: number): bigint | undefined => {
  const field = fields.get(n)?.[0]
  return field !== undefined && field.wire !== 2 ? field.n : undefined
}

const protoValue = (any: Map<number, Array<Field>>): Value => {
  if (any.has(1)) return stringOf(any, 1)
  if (any.has(2)) return numberOf(any, 2) === 1n
  if (any.has(3)) return Number(BigInt.asIntN(64, numberOf(any, 3)!))
  if (any.has(4)) {
    const buffer = Buffer.alloc(8)
    buffer.writeBigUInt64LE(numberOf(any, 4)!)
    return buffer.readDoubleLE(0)
  }
  return null
}
const protoAttributes = (list: Array<Map<number, Array<Field>>>): Record<string, Value> =>
  Object.fromEntries(list.map((kv) => [stringOf(kv, 1), protoValue(messagesOf(kv, 2)[0] ?? new Map())]))

const protoSpans = (body: Buffer): Array<SpanData> =>
  messagesOf(decodeMessage(body), 1).flatMap((resourceSpans) =>
    messagesOf(resourceSpans, 2).flatMap((scopeSpans) =>
      messagesOf(scopeSpans, 2).map((span) => ({
        traceId: hexOf(span, 1),
        spanId: hexOf(span, 2),
        parentSpanId: hexOf(span, 4),
        name: stringOf(span, 5),
        kind: Number(numberOf(span, 6) ?? 0n),
        attributes: protoAttributes(messagesOf(span, 9))
      }))
    )
  )

const protoLogs = (body: Buffer): Array<LogData> =>
  messagesOf(decodeMessage(body), 1).flatMap((resourceLogs) =>
    messagesOf(resourceLogs, 2).flatMap((scopeLogs) =>
      messagesOf(scopeLogs, 2).map((record) => ({
        body: protoValue(messagesOf(record, 5)[0] ?? new Map()),
        traceId: hexOf(record, 9),
        spanId: hexOf(record, 10),
        attributes: protoAttributes(messagesOf(record, 6))
      }))
    )
  )

const protoResourceAttributes = (body: Buffer): Record<string, Value> =>
  protoAttributes(messagesOf(messagesOf(messagesOf(decodeMessage(body), 1)[0] ?? new Map(), 1)[0] ?? new Map(), 1))

const protoMetrics = (body: Buffer): Array<MetricData> =>
  messagesOf(decodeMessage(body), 1).flatMap((resourceMetrics) =>
    messagesOf(resourceMetrics, 2).flatMap((scopeMetrics) =>
      messagesOf(scopeMetrics, 2).map((metric) => {
        // gauge = 5, sum = 7 (number points: attributes 7, as_double 4, as_int 6); histogram = 9 (attributes 9, count 4)
        const numeric = [...messagesOf(metric, 5), ...messagesOf(metric, 7)].flatMap((data) => messagesOf(data, 1))
        const histogram = messagesOf(metric, 9).flatMap((data) => messagesOf(data, 1))
        const double = (n: bigint | undefined) => {
          if (n === undefined) return undefined
          const buffer = Buffer.alloc(8)
          buffer.writeBigUInt64LE(n)
          return buffer.readDoubleLE(0)
        }
        return {
          name: stringOf(metric, 1),
          points: [
            ...numeric.map((point) => ({
              attributes: protoAttributes(messagesOf(point, 7)),
              value: point.has(4) ? double(numberOf(point, 4)) : point.has(6) ? Number(BigInt.asIntN(64, numberOf(point, 6)!)) : undefined
            })),
            ...histogram.map((point) => ({
              attributes: protoAttributes(messagesOf(point, 9)),
              value: point.has(4) ? Number(numberOf(point, 4)) : undefined
            }))
          ]
        }
      })
    )
  )

// JSON (OTLP/JSON: ids in hex, attributes as { key, value: { stringValue | intValue | … } }).
interface JsonAny {
  readonly stringValue?: string
  readonly boolValue?: boolean
  readonly intValue?: number | string
  readonly doubleValue?: number
}
interface JsonKeyValue {
  readonly key: string
  readonly value: JsonAny
}
const jsonValue = (value: JsonAny | undefined): Value =>
  value === undefined
    ? null
    : value.stringValue ?? value.boolValue ?? (value.intValue !== undefined ? Number(value.intValue) : value.doubleValue ?? null)
const jsonAttributes = (list: ReadonlyArray<JsonKeyValue> | undefined): Record<string, Value> =>
  Object.fromEntries((list ?? []).map((kv) => [kv.key, jsonValue(kv.value)]))

const jsonSpans = (body: Buffer): Array<SpanData> =>
  (JSON.parse(body.toString("utf8")).resourceSpans as Array<any>).flatMap((rs) =>
    (rs.scopeSpans as Array<any>).flatMap((ss) =>
      (ss.spans as Array<any>).map((span) => ({
        traceId: span.traceId,
        spanId: span.spanId,
        parentSpanId: span.parentSpanId ?? "",
        name: span.name,
        kind: span.kind,
        attributes: jsonAttributes(span.attributes)
      }))
    )
  )

const jsonLogs = (body: Buffer): Array<LogData> =>
  (JSON.parse(body.toString("utf8")).resourceLogs as Array<any>).flatMap((rl) =>
    (rl.scopeLogs as Array<any>).flatMap((sl) =>
      (sl.logRecords as Array<any>).map((record) => ({
        body: jsonValue(record.body),
        traceId: record.traceId ?? "",
        spanId: record.spanId ?? "",
        attributes: jsonAttributes(record.attributes)
      }))
    )
  )

const jsonResourceAttributes = (body: Buffer): Record<string, Value> =>
  jsonAttributes(JSON.parse(body.toString("utf8")).resourceSpans[0].resource.attributes)

const jsonMetrics = (body: Buffer): Array<MetricData> =>
  (JSON.parse(body.toString("utf8")).resourceMetrics as Array<any>).flatMap((rm) =>
    (rm.scopeMetrics as Array<any>).flatMap((sm) =>
      (sm.metrics as Array<any>).map((metric) => ({
        name: metric.name,
        points: [
          ...((metric.sum ?? metric.gauge)?.dataPoints ?? []).map((point: any) => ({
            attributes: jsonAttributes(point.attributes),
            value: point.asDouble ?? (point.asInt === undefined ? undefined : Number(point.asInt))
          })),
          ...(metric.histogram?.dataPoints ?? []).map((point: any) => ({
            attributes: jsonAttributes(point.attributes),
            value: point.count === undefined ? undefined : Number(point.count)
          }))
        ]
      }))
    )
  )

/** Polls `probe` until it returns a value, for at most `ms`. */
const eventually = async <A>(probe: () => A | undefined, ms = 20_000): Promise<A> => {
  const until = Date.now() + ms
  for (;;) {
    const found = probe()
    if (found !== undefined) return found
    if (Date.now() > until) throw new Error("not received in time")
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const protocols = [
  {
    name: "http/protobuf",
    env: {},
    contentType: "application/x-protobuf",
    spans: protoSpans,
    logs: protoLogs,
    metrics: protoMetrics,
    resource: protoResourceAttributes
  },
  {
    name: "http/json",
    env: { OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" },
    contentType: "application/json",
    spans: jsonSpans,
    logs: jsonLogs,
    metrics: jsonMetrics,
    resource: jsonResourceAttributes
  }
] as const

describe("OTLP export from the server process", () => {
  const scope = Effect.runSync(Scope.make())
  let fake: Fake
  beforeAll(async () => {
    fake = await Effect.runPromise(Scope.provide(startFake({ apiKey: UPSTREAM_KEY }), scope))
    fake.behaviour = { _tag: "reply", reply: { content: ANSWER, promptTokens: 12, completionTokens: 7 } }
  })
  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)))

  const serverEnv = (dataDir: string, extra: Record<string, string>) => ({
    DATA_DIR: dataDir,
    BUILTIN_EXECUTE: "off",
    BUILTIN_SPEAK: "off",
    ADMIN_TOKEN: ADMIN,
    LLM_BASE_URL: `${fake.origin}/v1`,
    LLM_API_KEY: UPSTREAM_KEY,
    ...extra
  })

  for (const protocol of protocols) {
    it(`${protocol.name}: the request's spans, its log lines and the metrics arrive, with no secret in them`, async () => {
      const receiver = await startReceiver()
      const dataDir = mkdtempSync(join(tmpdir(), "spendgate-otlp-"))
      let server: ServerProcess | undefined
      try {
        server = await startServerProcess(serverEnv(dataDir, {
          ...protocol.env,
          // The base URL with a trailing slash: the signal paths are appended once.
          OTEL_EXPORTER_OTLP_ENDPOINT: `${receiver.url}/`,
          OTEL_SERVICE_NAME: "spendgate-under-test",
          OTEL_BSP_SCHEDULE_DELAY: "100",
          OTEL_BLRP_SCHEDULE_DELAY: "100",
          OTEL_METRIC_EXPORT_INTERVAL: "200"
        }), 60_000)
        const api = client(server.baseUrl)
        const signup = await api.post("/v1/signup", { name: "otlp" })
        const key: string = signup.body.apiKey
        const card = await api.post("/v1/wallet/fund-card", { amountUsdCents: 1500 }, key)
        expect((await fetch(`${server.baseUrl}${new URL(card.body.checkoutUrl).pathname}/pay`, { method: "POST" })).status)
          .toBe(200)
        fake.behaviour = { _tag: "reply", reply: { content: ANSWER, promptTokens: 12, completionTokens: 7 } }
        const requestId = `otlp-test-${protocol.name.replace("/", "-")}`
        const paid = await api.call("POST", "/v1/capabilities/reason", {
          key,
          body: { prompt: PROMPT, maxTokens: 100 },
          headers: { "x-request-id": requestId }
        })
        expect(paid.status).toBe(200)
        expect(paid.text).toContain(ANSWER)

        // Every export is a POST to its signal's path, in the configured encoding.
        const spansOf = () => receiver.received.filter((r) => r.path === "/v1/traces").flatMap((r) => protocol.spans(r.body))
        const request = await eventually(() =>
          spansOf().find((s) => s.attributes["spendgate.request_id"] === requestId)
        )
        const trace = await eventually(() => {
          const inTrace = spansOf().filter((s) => s.traceId === request.traceId)
          const names = new Set(inTrace.map((s) => s.name))
          return ["Authentication", "Spend.reserve", "Spend.upstream", "Spend.settle"].every((n) => names.has(n))
            ? inTrace
            : undefined
        })
        for (const r of receiver.received) {
          expect(["/v1/traces", "/v1/logs", "/v1/metrics"]).toContain(r.path)
          expect(r.contentType).toBe(protocol.contentType)
        }
        expect(protocol.resource(receiver.received.find((r) => r.path === "/v1/traces")!.body)).toMatchObject({
          "service.name": "spendgate-under-test"
        })

        // The request's span: a root (no caller's traceparent), kind server (2), named by route.
        expect(request.name).toBe("POST /v1/capabilities/reason")
        expect(request.kind).toBe(2)
        expect(request.parentSpanId).toBe("")
        expect(request.traceId).toMatch(/^[0-9a-f]{32}$/)
        expect(request.attributes).toMatchObject({
          "http.request.method": "POST",
          "http.route": "/v1/capabilities/reason",
          "http.response.status_code": 200,
          "spendgate.request_id": requestId,
          "spendgate.agent_id": expect.stringMatching(/^agt_/)
        })
        // The framework's own server span is off: one server span per request.
        expect(trace.filter((s) => s.kind === 2)).toHaveLength(1)

        const byName = (name: string) => {
          const found = trace.filter((s) => s.name === name)
          expect(found, name).toHaveLength(1)
          return found[0]!
        }
        const spansById = new Map(trace.map((s) => [s.spanId, s]))
        /** The chain of parents up to the root. */
        const ancestors = (span: SpanData): Array<string> => {
          const chain: Array<string> = []
          let at = spansById.get(span.parentSpanId)
          while (at !== undefined) {
            chain.push(at.name)
            at = spansById.get(at.parentSpanId)
          }
          return chain
        }
        const auth = byName("Authentication")
        const reserve = byName("Spend.reserve")
        const upstream = byName("Spend.upstream")
        const settle = byName("Spend.settle")
        // Authentication, reserve, upstream call and settle: children of the request, side by side.
        for (const span of [auth, reserve, upstream, settle]) {
          expect(span.parentSpanId, span.name).toBe(request.spanId)
          expect(ancestors(span)).toEqual([request.name])
        }
        // The provider's own span is inside the upstream call's.
        expect(byName("OpenAiCompatible.run").parentSpanId).toBe(upstream.spanId)
        expect(byName("Agents.authenticate").parentSpanId).toBe(auth.spanId)

        const pipeline = { "spendgate.capability": "reason", "spendgate.provider": "local", "spendgate.agent_id": request.attributes["spendgate.agent_id"] }
        expect(auth.attributes).toMatchObject({ "spendgate.auth.scheme": "bearer", "spendgate.agent_id": pipeline["spendgate.agent_id"] })
        expect(reserve.attributes).toMatchObject({ ...pipeline, "spendgate.reservation_id": expect.stringMatching(/^rsv_/) })
        expect(reserve.attributes["spendgate.quoted_micro_usd"]).toBeGreaterThan(0)
        expect(upstream.kind).toBe(3) // client
        expect(upstream.attributes).toMatchObject(pipeline)
        expect(settle.attributes).toMatchObject({
          ...pipeline,
          // SQL storage commits the settle after the answer (docs/ledger-recovery.md): "queued".
          "spendgate.outcome": "queued",
          "spendgate.reservation_id": reserve.attributes["spendgate.reservation_id"],
          "spendgate.transaction_id": expect.stringMatching(/^txn_/)
        })
        expect(settle.attributes["spendgate.charged_micro_usd"]).toBeGreaterThan(0)
        // No outgoing HTTP client span (its URL could hold a caller's query).
        expect(trace.filter((s) => s.attributes["url.full"] !== undefined)).toEqual([])

        // A failed upstream call: the hold is released, and the release has its span.
        fake.behaviour = { _tag: "json", status: 500, body: { error: { message: "upstream broke", type: "server_error" } } }
        const failedId = `${requestId}-failed`
        const failed = await api.call("POST", "/v1/capabilities/reason", {
          key,
          body: { prompt: PROMPT, maxTokens: 100 },
          headers: { "x-request-id": failedId }
        })
        expect(failed.status).toBeGreaterThanOrEqual(500)
        const failedRequest = await eventually(() => spansOf().find((s) => s.attributes["spendgate.request_id"] === failedId))
        const release = await eventually(() =>
          spansOf().find((s) => s.traceId === failedRequest.traceId && s.name === "Spend.release")
        )
        expect(release.parentSpanId).toBe(failedRequest.spanId)
        expect(release.attributes).toMatchObject({ ...pipeline, "spendgate.release_reason": "upstream failed" })
        expect(spansOf().some((s) => s.traceId === failedRequest.traceId && s.name === "Spend.settle")).toBe(false)
        expect(failedRequest.attributes["http.response.status_code"]).toBe(failed.status)

        // Logs: the access line of the request, with its trace and span ids.
        const logsOf = () => receiver.received.filter((r) => r.path === "/v1/logs").flatMap((r) => protocol.logs(r.body))
        const access = await eventually(() =>
          logsOf().find((l) => l.attributes["requestId"] === requestId && l.attributes["route"] === "/v1/capabilities/reason")
        )
        expect(access.body).toMatch(/^POST \/v1\/capabilities\/reason 200 /)
        expect(access.traceId).toBe(request.traceId)
        expect(access.spanId).toBe(request.spanId)
        expect(access.attributes).toMatchObject({ status: 200, method: "POST" })

        // Metrics: the registry /metrics serves, the paid call counted.
        const metricsOf = () => receiver.received.filter((r) => r.path === "/v1/metrics").flatMap((r) => protocol.metrics(r.body))
        const charges = await eventually(() =>
          metricsOf().find((m) =>
            m.name === "spendgate_charges_total" &&
            m.points.some((p) => p.attributes["provider"] === "local" && p.value === 1)
          )
        )
        expect(charges.points.find((p) => p.attributes["provider"] === "local")?.attributes).toMatchObject({ capability: "reason" })
        await eventually(() =>
          metricsOf().find((m) =>
            m.name === "spendgate_http_requests_total" &&
            m.points.some((p) => p.attributes["route"] === "/v1/capabilities/reason" && p.attributes["status"] === "200")
          )
        )

        // Nothing that was exported holds a key, a token, the prompt or the answer.
        const secrets = [key, key.slice(-12), UPSTREAM_KEY, ADMIN, PROMPT, ANSWER]
        for (const r of receiver.received) {
          const raw = r.body.toString("latin1")
          for (const secret of secrets) expect(raw.includes(secret), `${r.path} holds ${secret.slice(0, 6)}…`).toBe(false)
        }
        // The upstream saw no trace headers.
        expect(fake.requests.at(-1)?.headers["traceparent"]).toBeUndefined()
      } finally {
        await server?.stop()
        await receiver.close()
        rmSync(dataDir, { recursive: true, force: true })
      }
    }, 120_000)
  }

  it("a caller's traceparent makes the request span its child", async () => {
    const receiver = await startReceiver()
    const dataDir = mkdtempSync(join(tmpdir(), "spendgate-otlp-"))
    let server: ServerProcess | undefined
    try {
      server = await startServerProcess(serverEnv(dataDir, {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/custom/traces`,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_BSP_SCHEDULE_DELAY: "100"
      }), 60_000)
      const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
      const parent = "00f067aa0ba902b7"
      const health = await fetch(`${server.baseUrl}/health`, {
        headers: { traceparent: `00-${traceId}-${parent}-01`, "x-request-id": "with-traceparent" }
      })
      expect(health.status).toBe(200)
      const span = await eventually(() =>
        receiver.received.filter((r) => r.path === "/custom/traces").flatMap((r) => jsonSpans(r.body))
          .find((s) => s.attributes["spendgate.request_id"] === "with-traceparent")
      )
      expect(span).toMatchObject({ traceId, parentSpanId: parent, name: "GET /health" })
      // Only the traces endpoint was set: no logs or metrics were sent anywhere.
      expect(receiver.received.every((r) => r.path === "/custom/traces")).toBe(true)
    } finally {
      await server?.stop()
      await receiver.close()
      rmSync(dataDir, { recursive: true, force: true })
    }
  }, 120_000)

  it("off without OTEL_EXPORTER_OTLP_ENDPOINT or with OTEL_SDK_DISABLED=true; a bad endpoint or protocol stops the start", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "spendgate-otlp-"))
    const receiver = await startReceiver()
    let server: ServerProcess | undefined
    try {
      server = await startServerProcess(serverEnv(dataDir, { OTEL_BSP_SCHEDULE_DELAY: "100" }), 60_000)
      expect(server.output()).toContain("OpenTelemetry export: off")
      expect((await fetch(`${server.baseUrl}/health`)).status).toBe(200)
      await server.stop()
      // OTEL_SDK_DISABLED=true wins over an endpoint: nothing reaches the receiver, not even at shutdown.
      server = await startServerProcess(serverEnv(dataDir, {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_SDK_DISABLED: "true",
        OTEL_BSP_SCHEDULE_DELAY: "100",
        OTEL_BLRP_SCHEDULE_DELAY: "100"
      }), 60_000)
      expect(server.output()).toContain("OpenTelemetry export: off")
      expect((await fetch(`${server.baseUrl}/health`)).status).toBe(200)
      await server.stop()
      expect(receiver.received).toEqual([])
      const failure = await startServerProcess(serverEnv(dataDir, { OTEL_EXPORTER_OTLP_ENDPOINT: "ftp://collector" })).then(
        async (started) => {
          await started.stop()
          return "started"
        },
        (error: Error) => error.message
      )
      expect(failure).toContain("Invalid configuration: OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL")
      const grpc = await startServerProcess(serverEnv(dataDir, {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: "grpc"
      })).then(async (started) => {
        await started.stop()
        return "started"
      }, (error: Error) => error.message)
      expect(grpc).toContain("Invalid configuration: OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or http/json")
    } finally {
      await server?.stop()
      await receiver.close()
      rmSync(dataDir, { recursive: true, force: true })
    }
  }, 120_000)
})
