/**
 * `reason` over any OpenAI-compatible Chat Completions API: OpenAI itself,
 * OpenRouter, Groq, or a self-hosted llama.cpp / vLLM / Ollama server, told
 * apart only by `name`, `baseUrl` and the operator's price card.
 *
 * Wire format (POST {baseUrl}/chat/completions, non-streaming):
 *   request  { model, messages: [{ role: "system", content }?, { role: "user", content }],
 *              max_tokens, temperature?, stream: false }
 *   response { id, object: "chat.completion", created, model,
 *              choices: [{ index, message: { role, content }, finish_reason, logprobs }],
 *              usage: { prompt_tokens, completion_tokens, total_tokens } }
 *   error    { error: { message, type, param, code } } with a 4xx/5xx status
 *
 * Billing (decisions §2): the upstream is always called with the quote's
 * `max_tokens`, so the completion cannot outgrow the quote. The call is
 * metered from the upstream's own `usage` at the quoted model's prices (the
 * `model` an upstream answers with is often a dated alias that is not on the
 * price card). An upstream that answers without any `usage` is charged the
 * quote, its upper bound, and `usage` then reports the bounds charged; a
 * `usage` that is present but unreadable makes the answer malformed.
 *
 * Every failure is a `ProviderFailure` (never a defect): timeout, 429
 * (rate_limited), 5xx (unavailable), other 4xx (rejected, with the upstream's
 * own message cut to 300 characters and the API key scrubbed from it), an
 * unreadable answer (malformed), an answer larger than `maxResponseBytes`
 * (too_large: the body is read as a stream and the connection dropped at the
 * cap), and a failed connection (network).
 *
 * The helpers under "Upstream exchange" are shared with the other `reason`
 * adapters (anthropic.ts).
 */
import { Duration, Effect, Redacted, Result, Stream } from "effect"
import { Headers, HttpClient, type HttpClientError, HttpClientRequest, type HttpClientResponse } from "effect/http"
import type { Metered, ModelInfo, Provider, Quote } from "../../../src/capabilities/Provider.ts"
import { ProviderFailure } from "../../../src/capabilities/Provider.ts"
import { meterReason, promptTokenBound, quoteReason } from "../../../src/capabilities/pricing.ts"
import type { ReasonInput, ReasonOutput } from "../../../src/capabilities/schemas.ts"

export const DEFAULT_TIMEOUT_MS = 60_000
export const DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
/** An error body is read this far for its message; the rest is not needed. */
export const MAX_ERROR_BODY_BYTES = 16 * 1024
/** The upstream's own error message is cut to this many characters. */
export const MAX_UPSTREAM_MESSAGE_CHARS = 300

export interface Options {
  /** The provider's name in the catalogue and in failures: "openai", "openrouter", "groq", "local", ... */
  readonly name: string
  /** The API root the paths hang from, e.g. https://api.openai.com/v1 or http://127.0.0.1:8080/v1. */
  readonly baseUrl: string
  /** Sent as `Authorization: Bearer …`; a self-hosted server may need none. */
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /** From the operator's price card; the first is the default. */
  readonly models: ReadonlyArray<ModelInfo>
  /** For connecting, the answer and its whole body; default 60 s. */
  readonly timeoutMs?: number | undefined
  /** Largest answer body read; default 4 MiB. */
  readonly maxResponseBytes?: number | undefined
  /**
   * Extra request headers (e.g. OpenRouter's `HTTP-Referer`, `X-Title`). They never replace the
   * content type or framing headers, nor `Authorization` when `apiKey` is given; without an
   * `apiKey` they may carry a gateway's own credentials (redacted in traces like the key).
   */
  readonly extraHeaders?: Readonly<Record<string, string>> | undefined
  /**
   * The request field that carries the completion cap. `max_tokens` (the
   * default) is what OpenRouter, Groq, llama.cpp, vLLM and Ollama read;
   * OpenAI's reasoning models refuse it and want `max_completion_tokens`,
   * which also bounds their hidden reasoning tokens.
   */
  readonly tokenLimitField?: "max_tokens" | "max_completion_tokens" | undefined
}

// ---------------------------------------------------------------------------
// Upstream exchange (shared with the other reason adapters)
// ---------------------------------------------------------------------------

export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** One line, at most `max` characters. */
export const clip = (text: string, max: number = MAX_UPSTREAM_MESSAGE_CHARS): string => {
  const oneLine = text.replace(/\s+/g, " ").trim()
  return oneLine.length > max ? `${oneLine.slice(0, max)}…` : oneLine
}

/** A token count from the wire: a non-negative safe integer, or undefined. */
export const tokenCount = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : undefined

/** Checks the settings every adapter shares; a mistake is a configuration error, hence a defect. */
export const checkSettings = (
  adapter: string,
  options: {
    readonly name: string
    readonly baseUrl: string
    readonly models: ReadonlyArray<ModelInfo>
    readonly timeoutMs?: number | undefined
    readonly maxResponseBytes?: number | undefined
  }
): { readonly baseUrl: string; readonly timeoutMs: number; readonly maxResponseBytes: number } => {
  if (options.name.trim() === "") throw new RangeError(`${adapter}: name must not be empty`)
  let url: URL
  try {
    url = new URL(options.baseUrl)
  } catch {
    throw new RangeError(`${adapter} ${options.name}: baseUrl is not a URL: ${JSON.stringify(options.baseUrl)}`)
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new RangeError(`${adapter} ${options.name}: baseUrl must be http(s): ${JSON.stringify(options.baseUrl)}`)
  }
  if (url.search !== "" || url.hash !== "") {
    throw new RangeError(`${adapter} ${options.name}: baseUrl must not carry a query or fragment`)
  }
  if (options.models.length === 0) throw new RangeError(`${adapter} ${options.name}: at least one model is required`)
  const ids = new Set(options.models.map((model) => model.id))
  if (ids.size !== options.models.length) throw new RangeError(`${adapter} ${options.name}: a model is listed twice`)
  for (const model of options.models) {
    if (!Number.isSafeInteger(model.maxTokens) || model.maxTokens < 1) {
      throw new RangeError(`${adapter} ${options.name}: ${model.id} needs a positive integer maxTokens`)
    }
    if (!Number.isSafeInteger(model.defaultMaxTokens) || model.defaultMaxTokens < 1 || model.defaultMaxTokens > model.maxTokens) {
      throw new RangeError(`${adapter} ${options.name}: ${model.id} needs a defaultMaxTokens between 1 and its maxTokens`)
    }
  }
  const positiveInteger = (field: string, value: number | undefined, fallback: number): number => {
    const resolved = value ?? fallback
    if (!Number.isSafeInteger(resolved) || resolved <= 0) {
      throw new RangeError(`${adapter} ${options.name}: ${field} must be a positive integer, got ${resolved}`)
    }
    return resolved
  }
  return {
    baseUrl: url.href.replace(/\/+$/, ""),
    timeoutMs: positiveInteger("timeoutMs", options.timeoutMs, DEFAULT_TIMEOUT_MS),
    maxResponseBytes: positiveInteger("maxResponseBytes", options.maxResponseBytes, DEFAULT_MAX_RESPONSE_BYTES)
  }
}

export interface Exchange {
  /** The provider's name, for failures. */
  readonly provider: string
  readonly request: HttpClientRequest.HttpClientRequest
  readonly timeoutMs: number
  readonly maxResponseBytes: number
  /** Text that must never appear in a failure message (the API key). */
  readonly secrets: ReadonlyArray<string>
  /** The upstream's own explanation in an error body: its message, and its error type when it has one. */
  readonly errorDetail: (body: unknown) => { readonly message: string; readonly type?: string | undefined } | undefined
  /** The response header carrying the upstream's request id. */
  readonly requestIdHeader: string
}

export interface Answer {
  readonly body: unknown
}

/** Secrets shorter than this are not scrubbed: replacing them would mangle ordinary text. */
const MIN_SCRUBBED_SECRET_LENGTH = 8

const scrub = (text: string, secrets: ReadonlyArray<string>): string =>
  secrets.reduce(
    (acc, secret) => (secret.length >= MIN_SCRUBBED_SECRET_LENGTH ? acc.split(secret).join("[redacted]") : acc),
    text
  )

const failure = (exchange: Exchange, reason: ProviderFailure["reason"], message: string) =>
  new ProviderFailure({ provider: exchange.provider, reason, message: scrub(message, exchange.secrets) })

/** The failing part of a transport error, by its code (ECONNREFUSED, UND_ERR_SOCKET, …) when it has one. */
const describeCause = (cause: unknown): string => {
  if (!(cause instanceof Error)) return String(cause)
  const code = (cause as { code?: unknown }).code
  const inner = (cause as { cause?: unknown }).cause
  const own = typeof code === "string" && !cause.message.includes(code) ? `${code}: ${cause.message}` : cause.message
  return inner instanceof Error && inner.message !== cause.message ? `${own} (${describeCause(inner)})` : own
}

const transportFailure = (exchange: Exchange, error: HttpClientError.HttpClientError): ProviderFailure => {
  const reason = error.reason
  const cause = "cause" in reason && reason.cause !== undefined ? describeCause(reason.cause) : reason._tag
  const what = reason._tag === "DecodeError" || reason._tag === "EmptyBodyError"
    ? "the connection broke while reading the answer"
    : "could not be reached"
  return failure(exchange, "network", clip(`${exchange.provider} ${what}: ${cause}`))
}

/** Body bytes up to `limit`; `over` when more was on its way (reading stops there). */
const readUpTo = (
  response: HttpClientResponse.HttpClientResponse,
  limit: number
): Effect.Effect<{ readonly bytes: Uint8Array; readonly over: boolean }, HttpClientError.HttpClientError> =>
  Effect.suspend(() => {
    const chunks: Array<Uint8Array> = []
    let size = 0
    let over = false
    return Stream.runForEachWhile(response.stream, (chunk) =>
      Effect.sync(() => {
        if (size + chunk.byteLength > limit) {
          chunks.push(chunk.subarray(0, limit - size))
          size = limit
          over = true
          return false
        }
        chunks.push(chunk)
        size += chunk.byteLength
        return true
      })).pipe(Effect.map(() => ({ bytes: Buffer.concat(chunks, size), over })))
  })

const utf8 = new TextDecoder("utf-8", { fatal: true })

const parseJson = (bytes: Uint8Array): Result.Result<unknown, string> => {
  let text: string
  try {
    text = utf8.decode(bytes)
  } catch {
    return Result.fail("the answer is not UTF-8")
  }
  try {
    return Result.succeed(JSON.parse(text) as unknown)
  } catch {
    return Result.fail(text.trim() === "" ? "the answer is empty" : "the answer is not JSON")
  }
}

/** 429 rate_limited, 408 timeout, 5xx (Anthropic's 529 too) unavailable, other 4xx rejected. */
export const reasonForStatus = (status: number): ProviderFailure["reason"] =>
  status === 429 ? "rate_limited"
  : status === 408 ? "timeout"
  : status >= 500 ? "unavailable"
  : status >= 400 ? "rejected"
  : "unavailable"

const requestIdOf = (response: HttpClientResponse.HttpClientResponse, header: string): string | undefined => {
  const value = response.headers[header]
  return value !== undefined && /^[\w.:-]{1,128}$/.test(value) ? value : undefined
}

const statusFailure = (
  exchange: Exchange,
  response: HttpClientResponse.HttpClientResponse,
  body: Uint8Array
): ProviderFailure => {
  const parsed = parseJson(body)
  const detail = Result.isSuccess(parsed) ? exchange.errorDetail(parsed.success) : undefined
  let text: string | undefined
  if (detail !== undefined) {
    text = detail.type === undefined ? clip(detail.message) : `${clip(detail.type, 60)}: ${clip(detail.message)}`
  } else if (Result.isFailure(parsed)) {
    // A proxy's plain-text answer can say what went wrong; an HTML error page cannot, usefully.
    const plain = Buffer.from(body).toString("utf8").trim()
    if (plain !== "" && !plain.startsWith("<")) text = clip(plain)
  }
  const status = response.status
  const reason = reasonForStatus(status)
  const lead = reason === "rejected"
    ? `${exchange.provider} rejected the request (HTTP ${status})`
    : reason === "rate_limited"
    ? `${exchange.provider} is rate limiting (HTTP ${status})`
    : reason === "timeout"
    ? `${exchange.provider} timed out the request (HTTP ${status})`
    : status >= 500
    ? `${exchange.provider} is unavailable (HTTP ${status})`
    : `${exchange.provider} answered an unexpected HTTP ${status}`
  const retryAfter = response.headers["retry-after"]
  const requestId = requestIdOf(response, exchange.requestIdHeader)
  const notes = [
    retryAfter !== undefined && /^\d{1,6}$/.test(retryAfter) ? `retry after ${retryAfter} s` : undefined,
    requestId === undefined ? undefined : `request ${requestId}`
  ].filter((note) => note !== undefined)
  const message = (text === undefined ? lead : `${lead}: ${text}`) + (notes.length > 0 ? ` (${notes.join(", ")})` : "")
  return failure(exchange, reason, message)
}

/**
 * Sends one request and reads its JSON answer, all within `timeoutMs`. The
 * request lives in a scope of its own: whatever ends it (done, failed, timed
 * out, interrupted) aborts the connection, so a slow or endless body is not
 * left running.
 */
export const exchangeJson = (client: HttpClient.HttpClient, exchange: Exchange): Effect.Effect<Answer, ProviderFailure> =>
  Effect.scoped(Effect.gen(function*() {
    const scoped = HttpClient.withScope(client)
    const response = yield* scoped.execute(exchange.request).pipe(
      Effect.mapError((error) => transportFailure(exchange, error))
    )
    if (response.status < 200 || response.status >= 300) {
      const { bytes } = yield* readUpTo(response, MAX_ERROR_BODY_BYTES).pipe(
        Effect.orElseSucceed(() => ({ bytes: new Uint8Array(), over: false }))
      )
      return yield* statusFailure(exchange, response, bytes)
    }
    const tooLarge = () =>
      failure(exchange, "too_large", `${exchange.provider}'s answer is larger than ${exchange.maxResponseBytes} bytes`)
    const declared = Number(response.headers["content-length"])
    if (Number.isFinite(declared) && declared > exchange.maxResponseBytes) return yield* tooLarge()
    const { bytes, over } = yield* readUpTo(response, exchange.maxResponseBytes).pipe(
      Effect.mapError((error) => transportFailure(exchange, error))
    )
    if (over) return yield* tooLarge()
    const parsed = parseJson(bytes)
    if (Result.isFailure(parsed)) return yield* failure(exchange, "malformed", `${exchange.provider}: ${parsed.failure}`)
    return { body: parsed.success }
  })).pipe(
    Effect.timeoutOrElse({
      duration: Duration.millis(exchange.timeoutMs),
      orElse: () => Effect.fail(failure(exchange, "timeout", `${exchange.provider} did not answer within ${exchange.timeoutMs} ms`))
    }),
    // Header names only ever reach traces redacted; Authorization and x-api-key are redacted by default.
    Effect.updateService(Headers.CurrentRedactedNames, (names) => [...names, ...redactedExtraHeaders(exchange.request)])
  )

/** Every header except the ones known to be harmless is treated as possibly secret in traces. */
const HARMLESS_HEADERS = new Set(["accept", "content-type", "content-length", "anthropic-version", "user-agent"])
const redactedExtraHeaders = (request: HttpClientRequest.HttpClientRequest): ReadonlyArray<string> =>
  Object.keys(request.headers).filter((name) => !HARMLESS_HEADERS.has(name))

/** The model and completion cap a quote names, checked against this provider's models. */
export const quotedModel = (
  provider: string,
  models: ReadonlyArray<ModelInfo>,
  quote: Quote
): Result.Result<{ readonly model: ModelInfo; readonly maxTokens: number }, ProviderFailure> => {
  const model = models.find((m) => m.id === quote.model)
  if (model === undefined) {
    return Result.fail(
      new ProviderFailure({ provider, reason: "rejected", message: `${provider} does not offer the quoted model ${clip(String(quote.model), 100)}` })
    )
  }
  const maxTokens = quote.maxTokens
  if (maxTokens === undefined || !Number.isSafeInteger(maxTokens) || maxTokens < 1 || maxTokens > model.maxTokens) {
    return Result.fail(
      new ProviderFailure({ provider, reason: "rejected", message: `${provider}: the quote carries no usable max_tokens for ${model.id}` })
    )
  }
  return Result.succeed({ model, maxTokens })
}

/** Usage when the upstream reported none: the bounds the quote charged for. */
export const quotedUsage = (input: ReasonInput, maxTokens: number): ReasonOutput["usage"] => {
  const promptTokens = promptTokenBound(input)
  return { promptTokens, completionTokens: maxTokens, totalTokens: promptTokens + maxTokens }
}

// ---------------------------------------------------------------------------
// Chat Completions
// ---------------------------------------------------------------------------

/** OpenAI's error body: `{ "error": { "message", "type", "param", "code" } }`. */
const openAiErrorDetail = (body: unknown) => {
  if (!isRecord(body)) return undefined
  const error = body.error
  // Some compatible servers answer `{ "error": "text" }` or `{ "message": "text" }`.
  if (typeof error === "string" && error.trim() !== "") return { message: error }
  if (!isRecord(error)) return typeof body.message === "string" && body.message.trim() !== "" ? { message: body.message } : undefined
  if (typeof error.message !== "string" || error.message.trim() === "") return undefined
  const type = typeof error.code === "string" && error.code !== "" ? error.code : typeof error.type === "string" && error.type !== "" ? error.type : undefined
  return { message: error.message, type }
}

/** Set by the client from the body and the connection; an operator's header must not change them. */
const RESERVED_HEADERS = new Set(["content-type", "content-length", "transfer-encoding", "host", "connection"])

type Parsed = { readonly output: ReasonOutput; readonly reported: boolean; readonly model: string | undefined }

/** Reads a chat.completion object; a string is what was wrong with it. */
const parseCompletion = (body: unknown, billedUsage: () => ReasonOutput["usage"]): Result.Result<Parsed, string> => {
  if (!isRecord(body)) return Result.fail("the answer is not a JSON object")
  if (!Array.isArray(body.choices)) {
    const detail = openAiErrorDetail(body)
    return Result.fail(detail === undefined ? "the answer has no choices" : `the answer is an error: ${clip(detail.message)}`)
  }
  const choice: unknown = body.choices[0]
  if (!isRecord(choice)) return Result.fail("the answer has no first choice")
  const message = choice.message
  if (!isRecord(message)) return Result.fail("the first choice has no message")
  const content = message.content
  if (content !== null && content !== undefined && typeof content !== "string") {
    return Result.fail("the message content is not a string")
  }
  const finish = choice.finish_reason
  if (finish !== null && finish !== undefined && typeof finish !== "string") return Result.fail("finish_reason is not a string")
  let usage: ReasonOutput["usage"]
  let reported: boolean
  if (body.usage === undefined || body.usage === null) {
    usage = billedUsage()
    reported = false
  } else {
    if (!isRecord(body.usage)) return Result.fail("usage is not an object")
    const promptTokens = tokenCount(body.usage.prompt_tokens)
    const completionTokens = tokenCount(body.usage.completion_tokens)
    if (promptTokens === undefined || completionTokens === undefined) {
      return Result.fail("usage lacks prompt_tokens or completion_tokens")
    }
    usage = {
      promptTokens,
      completionTokens,
      totalTokens: tokenCount(body.usage.total_tokens) ?? promptTokens + completionTokens
    }
    reported = true
  }
  return Result.succeed({
    output: {
      content: content ?? "",
      // Compatible servers sometimes leave it null; the caller still gets a string.
      finishReason: typeof finish === "string" && finish !== "" ? finish : "unknown",
      usage
    },
    reported,
    model: typeof body.model === "string" && body.model !== "" ? body.model : undefined
  })
}

export const make = (options: Options): Effect.Effect<Provider<"reason">, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const settings = yield* Effect.try({
      try: () => checkSettings("openaiCompatible", options),
      catch: (error) => error
    }).pipe(Effect.orDie)
    const client = yield* HttpClient.HttpClient
    const { name, models } = options
    const url = `${settings.baseUrl}/chat/completions`
    const tokenLimitField = options.tokenLimitField ?? "max_tokens"
    const secrets = options.apiKey === undefined ? [] : [Redacted.value(options.apiKey)]
    const extraHeaders = Object.fromEntries(
      Object.entries(options.extraHeaders ?? {}).filter(([header]) => !RESERVED_HEADERS.has(header.toLowerCase()))
    )

    const quote = (input: ReasonInput) => quoteReason(models, input)

    const run = Effect.fn("OpenAiCompatible.run")(function*(input: ReasonInput, quote: Quote) {
      const checked = quotedModel(name, models, quote)
      if (Result.isFailure(checked)) return yield* checked.failure
      const { model, maxTokens } = checked.success
      yield* Effect.annotateCurrentSpan({ provider: name, model: model.id, maxTokens })
      const messages: Array<{ readonly role: "system" | "user"; readonly content: string }> = []
      if (input.systemPrompt !== undefined && input.systemPrompt !== "") {
        messages.push({ role: "system", content: input.systemPrompt })
      }
      messages.push({ role: "user", content: input.prompt })
      const body = {
        model: model.id,
        messages,
        [tokenLimitField]: maxTokens,
        ...(input.temperature === undefined ? {} : { temperature: input.temperature }),
        stream: false
      }
      let request = HttpClientRequest.post(url, { headers: extraHeaders, acceptJson: true }).pipe(
        HttpClientRequest.bodyText(JSON.stringify(body), "application/json")
      )
      if (options.apiKey !== undefined) request = HttpClientRequest.bearerToken(request, options.apiKey)

      const answer = yield* exchangeJson(client, {
        provider: name,
        request,
        timeoutMs: settings.timeoutMs,
        maxResponseBytes: settings.maxResponseBytes,
        secrets,
        errorDetail: openAiErrorDetail,
        requestIdHeader: "x-request-id"
      })
      const parsed = parseCompletion(answer.body, () => quotedUsage(input, maxTokens))
      if (Result.isFailure(parsed)) {
        return yield* new ProviderFailure({ provider: name, reason: "malformed", message: `${name}: ${parsed.failure}` })
      }
      const { output, reported } = parsed.success
      const metered: Metered<ReasonOutput> = {
        output,
        actualMicroUsd: reported ? meterReason(model, output.usage) : quote.microUsd,
        model: parsed.success.model ?? model.id
      }
      return metered
    })

    return { name, capability: "reason", models, quote, run } satisfies Provider<"reason">
  })
