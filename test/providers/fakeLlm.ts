/**
 * Fake LLM APIs for tests: one real HTTP server on 127.0.0.1 (port 0) that
 * speaks both OpenAI's Chat Completions (`POST /v1/chat/completions`) and
 * Anthropic's Messages (`POST /v1/messages`) wire formats, as documented:
 * the same authentication checks, the same request validation for the fields
 * that matter here, the same answer and error JSON. The official client
 * libraries are pointed at it too, so its payloads cannot drift from what
 * those libraries parse.
 *
 * Every request is recorded (method, path, headers, raw and parsed body).
 * What the server does next is set by `behaviour`, which a test may change.
 */
import { Effect } from "effect"
import * as Http from "node:http"
import type { AddressInfo, Socket } from "node:net"

export type Api = "openai" | "anthropic"

export interface Reply {
  readonly content?: string | null
  /** Anthropic: text blocks, joined by the adapter; other block kinds may be mixed in. */
  readonly blocks?: ReadonlyArray<Record<string, unknown>>
  readonly promptTokens?: number
  readonly completionTokens?: number
  /** OpenAI `finish_reason` / Anthropic `stop_reason`. */
  readonly finish?: string | null
  /** The model the answer names; `undefined` echoes the requested one, `null` leaves the field out. */
  readonly model?: string | null
  /** Leave `usage` out of the answer. */
  readonly noUsage?: boolean
  /** Replace `usage` with this. */
  readonly usage?: unknown
  /** Anthropic: `cache_creation_input_tokens`. */
  readonly cacheCreation?: number
  /** Anthropic: `cache_read_input_tokens`; OpenAI: `prompt_tokens_details.cached_tokens` (a part of `promptTokens`). */
  readonly cacheRead?: number
}

export type Behaviour =
  /** The documented success payload, built from the request and `reply`. */
  | { readonly _tag: "reply"; readonly reply?: Reply }
  /** Any status with a JSON body. */
  | { readonly _tag: "json"; readonly status: number; readonly body: unknown; readonly headers?: Record<string, string> }
  /** Any status with a raw body. */
  | { readonly _tag: "raw"; readonly status: number; readonly body: string; readonly contentType: string; readonly headers?: Record<string, string> }
  /** Accepts the request and never answers. */
  | { readonly _tag: "hang" }
  /** 200 and a body that never ends (no content-length), until the client goes away. */
  | { readonly _tag: "endless" }
  /** 200 announcing a content-length of this many bytes, then hangs. */
  | { readonly _tag: "declared"; readonly bytes: number }

export interface Recorded {
  readonly method: string
  readonly path: string
  readonly headers: Http.IncomingHttpHeaders
  readonly raw: string
  readonly json: unknown
}

export interface Fake {
  /** http://127.0.0.1:{port} */
  readonly origin: string
  readonly requests: Array<Recorded>
  behaviour: Behaviour
  /** The key the server accepts (Bearer for OpenAI, x-api-key for Anthropic); undefined: no auth (self-hosted). */
  apiKey: string | undefined
  /** Bytes of body written by the endless answer so far. */
  readonly endless: { sent: number; closed: boolean }
  /** Sockets accepted and how many of them have closed. */
  readonly connections: { opened: number; closed: number }
}

// ---------------------------------------------------------------------------
// Documented payloads
// ---------------------------------------------------------------------------

/** `POST /v1/chat/completions` answer (OpenAI's API reference, non-streaming). */
export const chatCompletion = (request: Record<string, unknown>, reply: Reply = {}): Record<string, unknown> => {
  const promptTokens = reply.promptTokens ?? 19
  const completionTokens = reply.completionTokens ?? 10
  const model = reply.model === undefined ? `${String(request.model)}-2024-07-18` : reply.model
  return {
    id: "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
    object: "chat.completion",
    created: 1741570283,
    ...(model === null ? {} : { model }),
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: reply.content === undefined ? "The sky is blue because of Rayleigh scattering." : reply.content,
          refusal: null,
          annotations: []
        },
        logprobs: null,
        finish_reason: reply.finish === undefined ? "stop" : reply.finish
      }
    ],
    ...(reply.noUsage === true ? {} : {
      usage: reply.usage ?? {
        prompt_tokens: promptTokens,
        completion_tokens: completionTokens,
        total_tokens: promptTokens + completionTokens,
        prompt_tokens_details: { cached_tokens: reply.cacheRead ?? 0, audio_tokens: 0 },
        completion_tokens_details: {
          reasoning_tokens: 0,
          audio_tokens: 0,
          accepted_prediction_tokens: 0,
          rejected_prediction_tokens: 0
        }
      }
    }),
    service_tier: "default",
    system_fingerprint: "fp_06737a9306"
  }
}

/** OpenAI's error body. */
export const openAiError = (message: string, type: string, code: string | null, param: string | null = null) => ({
  error: { message, type, param, code }
})

/** `POST /v1/messages` answer (Anthropic's API reference, non-streaming). */
export const anthropicMessage = (request: Record<string, unknown>, reply: Reply = {}): Record<string, unknown> => {
  const model = reply.model === undefined ? request.model : reply.model
  return {
    id: "msg_013Zva2CMHLNnXjNJJKqJ2EF",
    type: "message",
    role: "assistant",
    ...(model === null ? {} : { model }),
    content: reply.blocks ?? [
      { type: "text", text: reply.content === undefined ? "Hi! My name is Claude." : reply.content ?? "" }
    ],
    stop_reason: reply.finish === undefined ? "end_turn" : reply.finish,
    stop_sequence: null,
    ...(reply.noUsage === true ? {} : {
      usage: reply.usage ?? {
        input_tokens: reply.promptTokens ?? 2095,
        output_tokens: reply.completionTokens ?? 503,
        cache_creation_input_tokens: reply.cacheCreation ?? 0,
        cache_read_input_tokens: reply.cacheRead ?? 0,
        service_tier: "standard"
      }
    })
  }
}

/** Anthropic's error body. */
export const anthropicError = (type: string, message: string) => ({
  type: "error",
  error: { type, message },
  request_id: "req_011CSHoEeqs5C35K2UUqR7Fy"
})

// ---------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

type Answer = { readonly status: number; readonly body: unknown; readonly headers?: Record<string, string> }

/** What the real API answers to a request that fails its checks; undefined when it passes. */
const refuse = (api: Api, fake: Fake, headers: Http.IncomingHttpHeaders, json: unknown): Answer | undefined => {
  if (api === "openai") {
    const auth = headers.authorization
    if (fake.apiKey !== undefined && auth !== `Bearer ${fake.apiKey}`) {
      return {
        status: 401,
        body: auth === undefined
          ? openAiError(
            "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
            "invalid_request_error",
            null
          )
          : openAiError("Incorrect API key provided: sk-wr***ng. You can find your API key at https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key")
      }
    }
    if (!isRecord(json)) return { status: 400, body: openAiError("We could not parse the JSON body of your request.", "invalid_request_error", null) }
    if (typeof json.model !== "string") {
      return { status: 400, body: openAiError("you must provide a model parameter", "invalid_request_error", null) }
    }
    if (!Array.isArray(json.messages) || json.messages.length === 0) {
      return { status: 400, body: openAiError("Missing required parameter: 'messages'.", "invalid_request_error", "missing_required_parameter", "messages") }
    }
    return undefined
  }
  // The key in x-api-key or as a bearer token; x-api-key wins when both are sent.
  const key = headers["x-api-key"] ?? headers.authorization?.replace(/^Bearer /, "")
  if (fake.apiKey !== undefined && key !== fake.apiKey) {
    return { status: 401, body: anthropicError("authentication_error", "invalid x-api-key") }
  }
  const version = headers["anthropic-version"]
  if (typeof version !== "string" || version === "") {
    return { status: 400, body: anthropicError("invalid_request_error", "anthropic-version: header is required") }
  }
  if (!isRecord(json)) return { status: 400, body: anthropicError("invalid_request_error", "Request body is not valid JSON") }
  if (typeof json.max_tokens !== "number") {
    return { status: 400, body: anthropicError("invalid_request_error", "max_tokens: Field required") }
  }
  if (typeof json.model !== "string") return { status: 400, body: anthropicError("invalid_request_error", "model: Field required") }
  if (!Array.isArray(json.messages) || json.messages.some((m) => isRecord(m) && m.role === "system")) {
    return {
      status: 400,
      body: anthropicError(
        "invalid_request_error",
        "messages: Unexpected role \"system\". The Messages API accepts a top-level `system` parameter, not \"system\" as an input message role."
      )
    }
  }
  // API version 2026-10-21 removed the sampling parameters, whatever their value.
  if (version >= "2026-10-21") {
    for (const field of ["temperature", "top_p", "top_k"]) {
      if (field in json) return { status: 400, body: anthropicError("invalid_request_error", `${field}: Extra inputs are not permitted`) }
    }
  }
  if (typeof json.temperature === "number" && (json.temperature < 0 || json.temperature > 1)) {
    return { status: 400, body: anthropicError("invalid_request_error", "temperature: range: 0..1") }
  }
  return undefined
}

const requestIdHeader = (api: Api): Record<string, string> =>
  api === "openai" ? { "x-request-id": "req_4c3b0e1f9a8d7c6b5a4f3e2d1c0b9a8f" } : { "request-id": "req_011CSHoEeqs5C35K2UUqR7Fy" }

const send = (res: Http.ServerResponse, status: number, body: string, contentType: string, headers: Record<string, string> = {}) => {
  res.writeHead(status, { "content-type": contentType, "content-length": String(Buffer.byteLength(body)), ...headers })
  res.end(body)
}

/** Starts the fake in the current scope; it is closed (connections and all) with the scope. */
export const startFake = (options: { readonly apiKey?: string; readonly behaviour?: Behaviour } = {}) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ fake: Fake; server: Http.Server }>((resolve) => {
        const fake: Fake = {
          origin: "",
          requests: [],
          behaviour: options.behaviour ?? { _tag: "reply" },
          apiKey: options.apiKey,
          endless: { sent: 0, closed: false },
          connections: { opened: 0, closed: 0 }
        }
        const server = Http.createServer((req, res) => {
          res.on("error", () => {})
          const chunks: Array<Buffer> = []
          req.on("data", (chunk: Buffer) => chunks.push(chunk))
          req.on("end", () => {
            const raw = Buffer.concat(chunks).toString("utf8")
            let json: unknown
            try {
              json = JSON.parse(raw)
            } catch {
              json = undefined
            }
            const path = req.url ?? ""
            fake.requests.push({ method: req.method ?? "", path, headers: req.headers, raw, json })
            const api: Api | undefined = path === "/v1/chat/completions" ? "openai" : path === "/v1/messages" ? "anthropic" : undefined
            if (api === undefined || req.method !== "POST") {
              return send(res, 404, JSON.stringify(openAiError(`Unknown request URL: ${req.method} ${path}`, "invalid_request_error", "unknown_url")), "application/json")
            }
            const behaviour = fake.behaviour
            const refused = behaviour._tag === "reply" ? refuse(api, fake, req.headers, json) : undefined
            if (refused !== undefined) {
              return send(res, refused.status, JSON.stringify(refused.body), "application/json", requestIdHeader(api))
            }
            switch (behaviour._tag) {
              case "reply": {
                const request = json as Record<string, unknown>
                const body = api === "openai" ? chatCompletion(request, behaviour.reply) : anthropicMessage(request, behaviour.reply)
                return send(res, 200, JSON.stringify(body), "application/json", requestIdHeader(api))
              }
              case "json":
                return send(res, behaviour.status, JSON.stringify(behaviour.body), "application/json", {
                  ...requestIdHeader(api),
                  ...behaviour.headers
                })
              case "raw":
                return send(res, behaviour.status, behaviour.body, behaviour.contentType, behaviour.headers)
              case "hang":
                return
              case "declared":
                res.writeHead(200, { "content-type": "application/json", "content-length": String(behaviour.bytes) })
                res.write("{\"id\":")
                return
              case "endless": {
                res.writeHead(200, { "content-type": "application/json" })
                res.on("close", () => {
                  fake.endless.closed = true
                })
                const chunk = Buffer.alloc(16 * 1024, " ")
                res.write("{\"id\":\"chatcmpl-1\",\"padding\":\"")
                // Writes for as long as the client reads; stops only when the connection goes.
                const pump = () => {
                  while (!res.destroyed) {
                    fake.endless.sent += chunk.length
                    if (!res.write(chunk)) return void res.once("drain", pump)
                  }
                }
                pump()
                return
              }
            }
          })
        })
        server.on("connection", (socket: Socket) => {
          fake.connections.opened++
          socket.on("close", () => {
            fake.connections.closed++
          })
        })
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as AddressInfo
          resolve({ fake: Object.assign(fake, { origin: `http://127.0.0.1:${port}` }), server })
        })
      })
    ),
    ({ server }) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() => resolve())
        })
      )
  ).pipe(Effect.map(({ fake }) => fake))

/** A 127.0.0.1 port nothing listens on: bound, then released. */
export const closedPort = Effect.promise(() =>
  new Promise<number>((resolve, reject) => {
    const server = Http.createServer()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(port))
    })
  })
)
