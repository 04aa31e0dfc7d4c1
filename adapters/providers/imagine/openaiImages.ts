/**
 * `imagine` over OpenAI's Images API (`POST {baseUrl}/images/generations`),
 * or any server that speaks it (LocalAI and other self-hosted gateways).
 *
 * Wire format:
 *   request  { model, prompt, n, size, response_format }   (DALL·E family)
 *            { model, prompt, n, size }                    (GPT image family)
 *   response { created, data: [{ b64_json?, url?, revised_prompt? }], ... }
 *   error    { error: { message, type, param, code } } with a 4xx/5xx status
 *
 * Model families (`modelFamily`, inferred from the model name when not
 * given): DALL·E models take `response_format` ("b64_json" or "url"); the GPT
 * image models (`gpt-image-*`, `chatgpt-image-*`) refuse that field and
 * always answer base64 images, so a call asking for `responseFormat: "url"`
 * is refused at the quote (ValidationError) rather than answered otherwise.
 *
 * Pricing: the operator's card gives a price per image for each size this
 * model offers (`prices`, micro-dollars). The quote is price(size) × n; a
 * size without a price, or `n` above the model's limit (DALL·E 3 takes one
 * image per call), is a ValidationError. The call is metered as
 * price(size) × the images actually returned (never more than `n`), so an
 * upstream that returns fewer images costs less. An answer with no usable
 * image is `malformed` and costs nothing.
 *
 * Every failure is a `ProviderFailure`, never a defect: timeout, 429
 * (rate_limited), 5xx or a refused connection (unavailable), another 4xx
 * (rejected, with the upstream's own message cut to 300 characters and the
 * API key scrubbed from it), an unreadable answer (malformed), an answer over
 * `maxResponseBytes` (too_large: the body is streamed and the connection
 * dropped at the cap), and a connection that breaks mid-answer (network).
 *
 * The section "OpenAI media exchange" is shared with speak/openaiSpeech.ts
 * and transcribe/openaiTranscribe.ts.
 */
import { Duration, Effect, Redacted, Result, Stream } from "effect"
import { HttpClient, type HttpClientError, HttpClientRequest, type HttpClientResponse } from "effect/http"
import { type Metered, type Provider, ProviderFailure, type Quote, type UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { ImagineInput, ImagineOutput } from "../../../src/capabilities/schemas.ts"
import { NotFound, ValidationError } from "../../../src/domain/errors.ts"

export const DEFAULT_NAME = "openai-images"
export const DEFAULT_BASE_URL = "https://api.openai.com/v1"
export const GENERATIONS_PATH = "/images/generations"
export const DEFAULT_SIZE = "1024x1024"
/** Image generation takes tens of seconds for large images. */
export const DEFAULT_TIMEOUT_MS = 120_000
/** Four base64 PNGs at 1792×1024 fit comfortably. */
export const DEFAULT_MAX_RESPONSE_BYTES = 48 * 1024 * 1024
/** The schema's limit on `n`. */
export const MAX_IMAGES = 4
/** An error answer is read this far for its message, and no further. */
export const MAX_ERROR_BODY_BYTES = 16 * 1024
/** The upstream's own error message is cut to this many characters. */
export const MAX_UPSTREAM_MESSAGE_CHARS = 300

export type ModelFamily = "dall-e" | "gpt-image"
export type ImageSize = NonNullable<ImagineInput["size"]>

export interface Options {
  /** Provider name in the catalogue and in failures; default "openai-images". */
  readonly name?: string | undefined
  /** The API root, e.g. https://api.openai.com/v1 (the default) or http://127.0.0.1:8080/v1. */
  readonly baseUrl?: string | undefined
  /** Sent as `Authorization: Bearer …`; a self-hosted server may need none. */
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /** The model every call uses, e.g. "dall-e-3"; a call naming another model is NotFound. */
  readonly model: string
  /** Default: "gpt-image" for `gpt-image-*` and `chatgpt-image-*` models, else "dall-e". */
  readonly modelFamily?: ModelFamily | undefined
  /** Micro-dollars per image, for each size the model offers; from the operator's price card. */
  readonly prices: Readonly<Partial<Record<ImageSize, bigint>>>
  /** Images one call may ask for; default 1 for dall-e-3 (its limit), else 4. */
  readonly maxImages?: number | undefined
  /** For connecting, the answer and its whole body; default 120 s. */
  readonly timeoutMs?: number | undefined
  /** Largest answer body read; default 48 MiB. */
  readonly maxResponseBytes?: number | undefined
}

// ---------------------------------------------------------------------------
// OpenAI media exchange (shared with openaiSpeech.ts and openaiTranscribe.ts)
// ---------------------------------------------------------------------------

export interface MediaSettings {
  readonly name: string
  /** Without a trailing slash. */
  readonly baseUrl: string
  readonly apiKey: Redacted.Redacted<string> | undefined
  readonly timeoutMs: number
  readonly maxResponseBytes: number
}

export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** One line, at most `max` characters. */
export const clip = (text: string, max: number = MAX_UPSTREAM_MESSAGE_CHARS): string => {
  const line = text.replace(/[\s\u0000-\u001f\u007f]+/g, " ").trim()
  return line.length > max ? `${line.slice(0, max)}…` : line
}

/** A positive safe integer option, or its default; anything else is a deployment error. */
export const positiveInteger = (where: string, field: string, value: number | undefined, fallback: number): number => {
  const resolved = value ?? fallback
  if (!Number.isSafeInteger(resolved) || resolved <= 0) {
    throw new RangeError(`${where}: ${field} must be a positive integer, got ${resolved}`)
  }
  return resolved
}

/** A unit price for `per`, not negative. */
export const checkUnitPrice = (where: string, unitPrice: UnitPrice, per: string): void => {
  if (unitPrice.per !== per) throw new RangeError(`${where}: the price must be per ${per}, got per ${unitPrice.per}`)
  if (unitPrice.priceMicroUsd < 0n) throw new RangeError(`${where}: the price must not be negative`)
}

/**
 * Checks the options every OpenAI media adapter shares. A bad value is a
 * deployment error: it is thrown, and `make` dies naming it.
 */
export const mediaSettings = (
  adapter: string,
  options: {
    readonly name?: string | undefined
    readonly baseUrl?: string | undefined
    readonly apiKey?: Redacted.Redacted<string> | undefined
    readonly timeoutMs?: number | undefined
    readonly maxResponseBytes?: number | undefined
  },
  defaults: { readonly name: string; readonly timeoutMs: number; readonly maxResponseBytes: number }
): MediaSettings => {
  const name = options.name ?? defaults.name
  if (name.trim() === "" || name.length > 64) throw new RangeError(`${adapter}: name must be 1 to 64 characters`)
  const base = options.baseUrl ?? DEFAULT_BASE_URL
  let url: URL
  try {
    url = new URL(base)
  } catch {
    throw new RangeError(`${adapter} ${name}: baseUrl is not a URL: ${JSON.stringify(base)}`)
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new RangeError(`${adapter} ${name}: baseUrl must be http(s), got ${url.protocol}`)
  }
  if (url.search !== "" || url.hash !== "" || url.username !== "" || url.password !== "") {
    throw new RangeError(`${adapter} ${name}: baseUrl must not carry credentials, a query or a fragment`)
  }
  if (options.apiKey !== undefined && Redacted.value(options.apiKey).trim() === "") {
    throw new RangeError(`${adapter} ${name}: the API key is empty (leave it out for a server that needs none)`)
  }
  return {
    name,
    baseUrl: url.href.replace(/\/+$/, ""),
    apiKey: options.apiKey,
    timeoutMs: positiveInteger(`${adapter} ${name}`, "timeoutMs", options.timeoutMs, defaults.timeoutMs),
    maxResponseBytes: positiveInteger(`${adapter} ${name}`, "maxResponseBytes", options.maxResponseBytes, defaults.maxResponseBytes)
  }
}

/** Secrets shorter than this are not scrubbed: replacing them would mangle ordinary text. */
const MIN_SCRUBBED_SECRET_LENGTH = 8

const scrub = (settings: MediaSettings, text: string): string => {
  if (settings.apiKey === undefined) return text
  const secret = Redacted.value(settings.apiKey)
  return secret.length >= MIN_SCRUBBED_SECRET_LENGTH ? text.split(secret).join("[redacted]") : text
}

/** A failure of this provider; the API key never appears in its message. */
export const mediaFailure = (settings: MediaSettings, reason: ProviderFailure["reason"], message: string): ProviderFailure =>
  new ProviderFailure({ provider: settings.name, reason, message: scrub(settings, message) })

/** The failing part of a transport error, by its code (ECONNREFUSED, UND_ERR_SOCKET, …) when it has one. */
const describeCause = (cause: unknown): string | undefined => {
  if (!(cause instanceof Error)) return undefined
  const code = (cause as { code?: unknown }).code
  if (typeof code === "string") return code
  return describeCause((cause as { cause?: unknown }).cause) ?? cause.message
}

const transportFailure = (settings: MediaSettings, error: HttpClientError.HttpClientError): ProviderFailure => {
  const reason = error.reason
  const cause = describeCause("cause" in reason ? reason.cause : undefined)
  const detail = cause === undefined ? "" : `: ${clip(cause, 120)}`
  switch (reason._tag) {
    case "TransportError":
      return mediaFailure(settings, "unavailable", `${settings.name} could not be reached${detail}`)
    case "DecodeError":
    case "EmptyBodyError":
      return mediaFailure(settings, "network", `the connection to ${settings.name} broke during its answer${detail}`)
    default:
      return mediaFailure(settings, "unavailable", `the request to ${settings.name} failed (${reason._tag})${detail}`)
  }
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

const parseJsonBytes = (bytes: Uint8Array): Result.Result<unknown, string> => {
  let text: string
  try {
    text = utf8.decode(bytes)
  } catch {
    return Result.fail("the answer is not UTF-8")
  }
  if (text.trim() === "") return Result.fail("the answer is empty")
  try {
    return Result.succeed(JSON.parse(text) as unknown)
  } catch {
    return Result.fail("the answer is not JSON")
  }
}

/**
 * The upstream's explanation in an error body: OpenAI's `{ error: { message,
 * code|type } }`, `{ error: "text" }`, FastAPI's `{ detail }` (self-hosted
 * Whisper servers), or plain text (never an HTML page).
 */
const upstreamMessage = (bytes: Uint8Array): string | undefined => {
  const parsed = parseJsonBytes(bytes)
  if (Result.isSuccess(parsed)) {
    const body = parsed.success
    if (!isRecord(body)) return undefined
    const error = body.error
    if (isRecord(error) && typeof error.message === "string" && error.message.trim() !== "") {
      const kind = typeof error.code === "string" && error.code !== ""
        ? error.code
        : typeof error.type === "string" && error.type !== ""
        ? error.type
        : undefined
      return kind === undefined ? clip(error.message) : `${clip(kind, 60)}: ${clip(error.message)}`
    }
    if (typeof error === "string" && error.trim() !== "") return clip(error)
    if (typeof body.detail === "string" && body.detail.trim() !== "") return clip(body.detail)
    if (typeof body.message === "string" && body.message.trim() !== "") return clip(body.message)
    return undefined
  }
  const plain = Buffer.from(bytes).toString("utf8").trim()
  return plain === "" || plain.startsWith("<") ? undefined : clip(plain)
}

/** 429 rate_limited, 408 timeout, 5xx unavailable, other 4xx rejected. */
export const reasonForStatus = (status: number): ProviderFailure["reason"] =>
  status === 429 ? "rate_limited"
  : status === 408 ? "timeout"
  : status >= 500 ? "unavailable"
  : status >= 400 ? "rejected"
  : "unavailable"

const statusFailure = (
  settings: MediaSettings,
  response: HttpClientResponse.HttpClientResponse,
  body: Uint8Array
): ProviderFailure => {
  const status = response.status
  const reason = reasonForStatus(status)
  const name = settings.name
  const lead = reason === "rejected"
    ? `${name} rejected the request (HTTP ${status})`
    : reason === "rate_limited"
    ? `${name} is rate limiting requests (HTTP ${status})`
    : reason === "timeout"
    ? `${name} timed out the request (HTTP ${status})`
    : status >= 500
    ? `${name} is unavailable (HTTP ${status})`
    : `${name} answered an unexpected HTTP ${status}`
  const text = upstreamMessage(body)
  const retryAfter = response.headers["retry-after"]
  const requestId = response.headers["x-request-id"]
  const notes = [
    retryAfter !== undefined && /^\d{1,6}$/.test(retryAfter) ? `retry after ${retryAfter} s` : undefined,
    requestId !== undefined && /^[\w.:-]{1,128}$/.test(requestId) ? `request ${requestId}` : undefined
  ].filter((note) => note !== undefined)
  return mediaFailure(
    settings,
    reason,
    (text === undefined ? lead : `${lead}: ${text}`) + (notes.length > 0 ? ` (${notes.join(", ")})` : "")
  )
}

export interface MediaReply {
  /** The media type of the answer, lower-cased, without parameters ("" when none was given). */
  readonly contentType: string
  readonly bytes: Uint8Array
}

/**
 * Sends one request (with the API key, when there is one) and reads its
 * answer, all within `timeoutMs`. The request lives in a scope of its own:
 * whatever ends it (done, failed, timed out, interrupted) aborts the
 * connection, so a slow or endless body is never left running. A status
 * outside 2xx is a failure carrying the upstream's message.
 */
export const sendMedia = (
  client: HttpClient.HttpClient,
  settings: MediaSettings,
  request: HttpClientRequest.HttpClientRequest
): Effect.Effect<MediaReply, ProviderFailure> => {
  const authorized = settings.apiKey === undefined ? request : HttpClientRequest.bearerToken(request, settings.apiKey)
  return Effect.scoped(Effect.gen(function*() {
    const response = yield* HttpClient.withScope(client).execute(authorized).pipe(
      Effect.mapError((error) => transportFailure(settings, error))
    )
    if (response.status < 200 || response.status >= 300) {
      const { bytes } = yield* readUpTo(response, MAX_ERROR_BODY_BYTES).pipe(
        Effect.orElseSucceed(() => ({ bytes: new Uint8Array(0), over: false }))
      )
      return yield* statusFailure(settings, response, bytes)
    }
    const tooLarge = () =>
      mediaFailure(settings, "too_large", `${settings.name}'s answer is larger than ${settings.maxResponseBytes} bytes`)
    const declared = Number(response.headers["content-length"])
    if (Number.isFinite(declared) && declared > settings.maxResponseBytes) return yield* tooLarge()
    const { bytes, over } = yield* readUpTo(response, settings.maxResponseBytes).pipe(
      Effect.mapError((error) => transportFailure(settings, error))
    )
    if (over) return yield* tooLarge()
    const contentType = (response.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase()
    return { contentType, bytes }
  })).pipe(
    Effect.timeoutOrElse({
      duration: Duration.millis(settings.timeoutMs),
      orElse: () => Effect.fail(mediaFailure(settings, "timeout", `${settings.name} did not answer within ${settings.timeoutMs} ms`))
    }),
    // A bug in the HTTP stack must not surface as a defect of the call: the hold is released
    // and the next provider tried, as for any upstream failure.
    Effect.catchDefect((defect) =>
      Effect.fail(mediaFailure(settings, "unavailable", `unexpected failure: ${clip(String(defect), 200)}`))
    ),
    // The bearer token is redacted from spans by default; no trace headers go upstream.
    Effect.provideService(HttpClient.TracerPropagationEnabled, false)
  )
}

/** The JSON of a successful answer, or `malformed`. */
export const jsonOf = (settings: MediaSettings, reply: MediaReply): Result.Result<unknown, ProviderFailure> => {
  const parsed = parseJsonBytes(reply.bytes)
  return Result.isSuccess(parsed)
    ? Result.succeed(parsed.success)
    : Result.fail(mediaFailure(settings, "malformed", `${settings.name}: ${parsed.failure}`))
}

/** A JSON request body. */
export const jsonRequest = (url: string, body: unknown): HttpClientRequest.HttpClientRequest =>
  HttpClientRequest.post(url, { acceptJson: true }).pipe(
    HttpClientRequest.bodyText(JSON.stringify(body), "application/json")
  )

/** A ValidationError on one input field. */
export const invalid = (path: string, message: string): ValidationError =>
  new ValidationError({ message: `${path}: ${message}`, issues: [{ path, message }] })

// ---------------------------------------------------------------------------
// Images
// ---------------------------------------------------------------------------

const SIZES: ReadonlyArray<ImageSize> = ["256x256", "512x512", "1024x1024", "1024x1792", "1792x1024"]

export const familyOf = (model: string): ModelFamily =>
  /^(gpt-image|chatgpt-image)/i.test(model) ? "gpt-image" : "dall-e"

/** The default `maxImages`: DALL·E 3 generates one image per request. */
export const defaultMaxImages = (model: string): number => (/^dall-e-3/i.test(model) ? 1 : MAX_IMAGES)

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/

/** The image type from its first bytes; PNG (what the API produces by default) when unrecognized. */
export const imageMimeOf = (b64: string): string => {
  const head = Buffer.from(b64.slice(0, 24), "base64")
  const starts = (...bytes: ReadonlyArray<number>) => bytes.every((byte, i) => head[i] === byte)
  if (starts(0x89, 0x50, 0x4e, 0x47)) return "image/png"
  if (starts(0xff, 0xd8, 0xff)) return "image/jpeg"
  if (starts(0x52, 0x49, 0x46, 0x46) && head.subarray(8, 12).toString("latin1") === "WEBP") return "image/webp"
  if (starts(0x47, 0x49, 0x46, 0x38)) return "image/gif"
  return "image/png"
}

const httpUrl = (value: string): boolean => {
  if (value.length > 8192 || /[\s\u0000-\u001f\u007f]/.test(value)) return false
  try {
    const url = new URL(value)
    return url.protocol === "https:" || url.protocol === "http:"
  } catch {
    return false
  }
}

type Image = ImagineOutput["images"][number]

/** Reads `{ created, data: [...] }`; a string is what was wrong with it. At most `limit` images are kept. */
export const parseImages = (body: unknown, limit: number): Result.Result<Array<Image>, string> => {
  if (!isRecord(body)) return Result.fail("the answer is not a JSON object")
  if (!Array.isArray(body.data)) return Result.fail("the answer has no data array")
  const images: Array<Image> = []
  for (const [index, item] of body.data.entries()) {
    if (images.length >= limit) break
    if (!isRecord(item)) return Result.fail(`data[${index}] is not an object`)
    const revised = typeof item.revised_prompt === "string" && item.revised_prompt !== ""
      ? { revisedPrompt: item.revised_prompt }
      : {}
    if (typeof item.b64_json === "string" && item.b64_json !== "") {
      const b64 = item.b64_json.replace(/\s+/g, "")
      if (b64.length % 4 !== 0 || !BASE64.test(b64)) return Result.fail(`data[${index}].b64_json is not base64`)
      images.push({ b64, mimeType: imageMimeOf(b64), ...revised })
    } else if (typeof item.url === "string" && item.url !== "") {
      if (!httpUrl(item.url)) return Result.fail(`data[${index}].url is not an http(s) URL`)
      images.push({ url: item.url, mimeType: "image/png", ...revised })
    } else {
      return Result.fail(`data[${index}] has neither b64_json nor url`)
    }
  }
  if (images.length === 0) return Result.fail("the answer holds no image")
  return Result.succeed(images)
}

interface Plan {
  readonly size: ImageSize
  readonly n: number
  readonly responseFormat: "b64_json" | "url"
  readonly pricePerImage: bigint
}

export const make = (options: Options): Effect.Effect<Provider<"imagine">, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() =>
      mediaSettings("openaiImages", options, {
        name: DEFAULT_NAME,
        timeoutMs: DEFAULT_TIMEOUT_MS,
        maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES
      })
    )
    const where = `openaiImages ${settings.name}`
    const { model } = options
    const family = options.modelFamily ?? familyOf(model)
    const { prices, maxImages } = yield* Effect.sync(() => {
      if (model.trim() === "") throw new RangeError(`${where}: model must not be empty`)
      const prices = new Map<ImageSize, bigint>()
      for (const [size, price] of Object.entries(options.prices)) {
        if (price === undefined) continue
        if (!(SIZES as ReadonlyArray<string>).includes(size)) throw new RangeError(`${where}: unknown size ${size} in prices`)
        if (price < 0n) throw new RangeError(`${where}: the price of ${size} must not be negative`)
        prices.set(size as ImageSize, price)
      }
      if (prices.size === 0) throw new RangeError(`${where}: prices must name at least one size`)
      const maxImages = positiveInteger(where, "maxImages", options.maxImages, defaultMaxImages(model))
      if (maxImages > MAX_IMAGES) throw new RangeError(`${where}: maxImages must be at most ${MAX_IMAGES}`)
      return { prices, maxImages }
    })
    const client = yield* HttpClient.HttpClient
    const url = `${settings.baseUrl}${GENERATIONS_PATH}`
    const offered = [...prices.keys()].join(", ")

    // The catalogue's "per image" figure: the default size's price, else the cheapest.
    const unitPrice: UnitPrice = {
      per: "image",
      priceMicroUsd: prices.get(DEFAULT_SIZE) ?? [...prices.values()].reduce((a, b) => (b < a ? b : a))
    }

    const plan = (input: ImagineInput): Result.Result<Plan, NotFound | ValidationError> => {
      if (input.model !== undefined && input.model !== model) {
        return Result.fail(new NotFound({ resource: `Model ${input.model.slice(0, 200)}` }))
      }
      const size = input.size ?? DEFAULT_SIZE
      const pricePerImage = prices.get(size)
      if (pricePerImage === undefined) {
        return Result.fail(invalid("size", `${size} is not offered by ${settings.name} (${model}); offered: ${offered}`))
      }
      const n = input.n ?? 1
      if (n > maxImages) {
        return Result.fail(invalid("n", `${settings.name} (${model}) makes at most ${maxImages} image(s) per call`))
      }
      const responseFormat = input.responseFormat ?? "b64_json"
      if (family === "gpt-image" && responseFormat === "url") {
        return Result.fail(invalid("responseFormat", `${model} returns images inline only; ask for b64_json`))
      }
      return Result.succeed({ size, n, responseFormat, pricePerImage })
    }

    const quote = (input: ImagineInput): Result.Result<Quote, NotFound | ValidationError> =>
      Result.map(plan(input), (p) => ({ microUsd: p.pricePerImage * BigInt(p.n), model }))

    const run = Effect.fn("OpenAiImages.run")(function*(input: ImagineInput, quoted: Quote) {
      const planned = plan(input)
      if (Result.isFailure(planned)) {
        return yield* mediaFailure(settings, "rejected", `${settings.name}: ${planned.failure.message}`)
      }
      const { size, n, responseFormat, pricePerImage } = planned.success
      const body = family === "gpt-image"
        ? { model, prompt: input.prompt, n, size }
        : { model, prompt: input.prompt, n, size, response_format: responseFormat }
      const reply = yield* sendMedia(client, settings, jsonRequest(url, body))
      const json = jsonOf(settings, reply)
      if (Result.isFailure(json)) return yield* json.failure
      const images = parseImages(json.success, n)
      if (Result.isFailure(images)) return yield* mediaFailure(settings, "malformed", `${settings.name}: ${images.failure}`)
      const actual = pricePerImage * BigInt(images.success.length)
      const metered: Metered<ImagineOutput> = {
        output: { images: images.success, size },
        actualMicroUsd: actual < quoted.microUsd ? actual : quoted.microUsd,
        model
      }
      return metered
    })

    return {
      name: settings.name,
      capability: "imagine",
      unitPrice,
      quote,
      run: (input, quoted) => run(input, quoted)
    } satisfies Provider<"imagine">
  })
