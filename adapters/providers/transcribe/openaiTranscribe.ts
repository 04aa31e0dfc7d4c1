/**
 * `transcribe` over OpenAI's Audio transcriptions API
 * (`POST {baseUrl}/audio/transcriptions`), and the self-hosted Whisper
 * servers that expose the same API (faster-whisper-server / Speaches,
 * whisper.cpp's server, LocalAI, ...).
 *
 * Wire format: multipart/form-data with
 *   file             the audio, named `audio.<ext>` with the extension of its type
 *   model            e.g. "whisper-1"
 *   response_format  "verbose_json" (the answer then carries the duration and language)
 *   language         optional; the primary subtag of the caller's tag ("en-US" → "en")
 * answer   { task: "transcribe", language, duration, text, segments: [...] }
 * error    { error: { message, type, param, code } } (FastAPI servers: { detail })
 *
 * The audio comes inline (`audio`, base64, at most `maxInlineBytes` decoded,
 * default 750 KB, as the gateway's request body is at most 1 MiB) or by URL
 * (`url`, fetched through the URL-safe `OutboundHttp`, at most
 * `maxDownloadBytes`, default 25 MB, the API's own file limit; a larger file
 * fails `too_large`, a refused address `blocked`). Its type is recognized
 * from its first bytes (WAV, MP3, FLAC, Ogg, WebM, MP4/M4A), else taken from
 * `mimeType` or the fetched Content-Type; an unrecognized type is refused.
 *
 * Pricing is per second of audio (operator's card), and the quote must bound
 * it before anything is sent:
 * - inline WAV (PCM or G.711): its exact length from the header, rounded up
 *   to the second; longer than `maxDurationSeconds` is a ValidationError;
 * - other inline audio: bytes / `minBytesPerSecond` (default 1000, i.e.
 *   8 kbit/s, the lowest bitrate speech is plausibly encoded at), rounded up;
 * - audio by URL: `maxDurationSeconds` (default 600 s), since the quote comes
 *   before the fetch. A fetched WAV longer than that is refused (`rejected`)
 *   before the upstream is called.
 * The call is metered as ceil(duration) × price with the `duration` the
 * upstream reports; without one, the WAV's own length, else the quote.
 * The charge never exceeds the quote: audio below 8 kbit/s, or a compressed
 * file by URL longer than `maxDurationSeconds`, is charged the quote.
 *
 * Failures are those of the shared OpenAI media exchange (../openaiMedia.ts),
 * plus the fetch's: `blocked`, `timeout`, `too_large`, `rejected` (the audio
 * URL answered an error, nothing, or not audio), `network`.
 */
import { Effect, Option, Redacted, Result, Schema } from "effect"
import { HttpClientRequest } from "effect/http"
import type { Metered, Provider, Quote, UnitPrice } from "../../../src/capabilities/Provider.ts"
import { ProviderFailure } from "../../../src/capabilities/Provider.ts"
import type { TranscribeInput, TranscribeOutput } from "../../../src/capabilities/schemas.ts"
import type { ValidationError } from "../../../src/domain/errors.ts"
import { type FetchFailed, OutboundHttp, type UnsafeUrl } from "../../../src/ports/Net.ts"
import { checkUnitPrice, clip, positiveInteger } from "../kit/index.ts"
import { invalid, type MediaSettings, mediaFailure, mediaSettings, openAiAccount, sendMediaJson } from "../kit/openaiMedia.ts"
import { readWav, type WavInfo } from "../kit/media.ts"
import { type Configured, env, envOr, httpUrl, type ProviderConfig, unitPriceOf } from "../kit/config.ts"
import { UpstreamClient } from "../kit/index.ts"

export const DEFAULT_NAME = "openai-transcribe"
export const TRANSCRIPTIONS_PATH = "/audio/transcriptions"
export const DEFAULT_MODEL = "whisper-1"
export const DEFAULT_TIMEOUT_MS = 180_000
export const DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
export const DEFAULT_MAX_INLINE_BYTES = 750_000
export const DEFAULT_MAX_DOWNLOAD_BYTES = 25 * 1000 * 1000
export const DEFAULT_FETCH_TIMEOUT_MS = 30_000
export const DEFAULT_MAX_DURATION_SECONDS = 600
/** 8 kbit/s. */
export const DEFAULT_MIN_BYTES_PER_SECOND = 1000

export interface Options {
  /** Provider name in the catalogue and in failures; default "openai-transcribe". */
  readonly name?: string | undefined
  /** The API root; default https://api.openai.com/v1. */
  readonly baseUrl?: string | undefined
  /** Sent as `Authorization: Bearer …`; a self-hosted server may need none. */
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /** Default "whisper-1". */
  readonly model?: string | undefined
  /** From the operator's price card (`per: "second"`). */
  readonly unitPrice: UnitPrice
  /** The upstream call, connecting to the end of the answer; default 180 s. */
  readonly timeoutMs?: number | undefined
  /** Largest answer read; default 4 MiB. */
  readonly maxResponseBytes?: number | undefined
  /** Largest inline audio, decoded; default 750 KB. */
  readonly maxInlineBytes?: number | undefined
  /** Largest audio fetched by URL; default 25 MB. */
  readonly maxDownloadBytes?: number | undefined
  /** Fetching audio by URL, redirects included; default 30 s. */
  readonly fetchTimeoutMs?: number | undefined
  /** The quote for audio by URL, and the longest WAV taken; default 600 s. */
  readonly maxDurationSeconds?: number | undefined
  /** The bitrate floor behind the bound for compressed audio; default 1000 bytes/s (8 kbit/s). */
  readonly minBytesPerSecond?: number | undefined
}

// ---------------------------------------------------------------------------
// Audio types
// ---------------------------------------------------------------------------

export interface AudioType {
  readonly mimeType: string
  readonly extension: string
}

const TYPES: ReadonlyArray<AudioType & { readonly aliases: ReadonlyArray<string> }> = [
  { mimeType: "audio/wav", extension: "wav", aliases: ["audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"] },
  { mimeType: "audio/mpeg", extension: "mp3", aliases: ["audio/mpeg", "audio/mp3", "audio/mpeg3", "audio/x-mpeg-3", "audio/mpga"] },
  { mimeType: "audio/mp4", extension: "m4a", aliases: ["audio/mp4", "audio/m4a", "audio/x-m4a"] },
  { mimeType: "video/mp4", extension: "mp4", aliases: ["video/mp4"] },
  { mimeType: "audio/webm", extension: "webm", aliases: ["audio/webm", "video/webm"] },
  { mimeType: "audio/ogg", extension: "ogg", aliases: ["audio/ogg", "audio/opus", "application/ogg"] },
  { mimeType: "audio/flac", extension: "flac", aliases: ["audio/flac", "audio/x-flac"] }
]

const byExtension = (extension: string): AudioType => TYPES.find((t) => t.extension === extension)!

/** The type a media type names, when it is one the API takes. */
export const typeOfMime = (mime: string | undefined): AudioType | undefined => {
  if (mime === undefined) return undefined
  const bare = (mime.split(";")[0] ?? "").trim().toLowerCase()
  return TYPES.find((t) => t.aliases.includes(bare))
}

/** The type the first bytes show, when they show one. */
export const sniffAudio = (bytes: Uint8Array): AudioType | undefined => {
  const ascii = (from: number, to: number) => Buffer.from(bytes.subarray(from, to)).toString("latin1")
  if (ascii(0, 4) === "RIFF" && ascii(8, 12) === "WAVE") return byExtension("wav")
  if (ascii(0, 4) === "fLaC") return byExtension("flac")
  if (ascii(0, 4) === "OggS") return byExtension("ogg")
  if (bytes[0] === 0x1a && bytes[1] === 0x45 && bytes[2] === 0xdf && bytes[3] === 0xa3) return byExtension("webm")
  if (ascii(4, 8) === "ftyp") return byExtension("m4a")
  if (ascii(0, 3) === "ID3") return byExtension("mp3")
  // An MPEG audio frame header; layer bits 00 would be AAC's ADTS, which is not MP3.
  if (bytes[0] === 0xff && bytes[1] !== undefined && (bytes[1] & 0xe0) === 0xe0 && (bytes[1] & 0x06) !== 0) {
    return byExtension("mp3")
  }
  return undefined
}

/** WAV codecs whose length follows from the byte count: PCM, IEEE float, A-law, µ-law, extensible. */
const CONSTANT_RATE_WAV = new Set([1, 3, 6, 7, 0xfffe])

/** The exact length of a WAV file, when it is one whose header tells it. */
export const wavSeconds = (bytes: Uint8Array): number | undefined => {
  const info: WavInfo | undefined = readWav(bytes)
  return info !== undefined && CONSTANT_RATE_WAV.has(info.audioFormat) ? info.durationSeconds : undefined
}

// ---------------------------------------------------------------------------
// Inline audio
// ---------------------------------------------------------------------------

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/
const BASE64URL = /^[A-Za-z0-9_-]*={0,2}$/

/** Base64 (or base64url) text, optionally a `data:` URL, as bytes and the media type the data URL names. */
export const decodeInline = (text: string): Result.Result<{ readonly bytes: Uint8Array; readonly mime: string | undefined }, string> => {
  let data = text
  let mime: string | undefined
  const dataUrl = /^data:([^;,]*)(;[^,]*)?,/i.exec(text)
  if (dataUrl !== null) {
    if (!/;base64$/i.test(dataUrl[2] ?? "")) return Result.fail("a data: URL must be base64")
    mime = dataUrl[1] === "" ? undefined : dataUrl[1]
    data = text.slice(dataUrl[0].length)
  }
  const compact = data.replace(/\s+/g, "")
  if (compact.length % 4 === 1) return Result.fail("is not base64")
  const encoding = BASE64.test(compact) ? "base64" : BASE64URL.test(compact) ? "base64url" : undefined
  if (encoding === undefined) return Result.fail("is not base64")
  return Result.succeed({ bytes: Buffer.from(compact, encoding), mime })
}

const LANGUAGE = /^([A-Za-z]{2,3})(?:[-_][A-Za-z0-9]{1,8})*$/

// ---------------------------------------------------------------------------
// The provider
// ---------------------------------------------------------------------------

interface Inline {
  readonly _tag: "inline"
  readonly bytes: Uint8Array
  readonly type: AudioType
  readonly seconds: number | undefined
  readonly bound: number
}

interface ByUrl {
  readonly _tag: "url"
  readonly url: string
}

type Source = Inline | ByUrl

interface Plan {
  readonly source: Source
  readonly language: string | undefined
  /** Seconds the quote covers. */
  readonly seconds: number
}

const fetchFailure = (settings: MediaSettings, error: UnsafeUrl | FetchFailed, limits: { readonly maxBytes: number; readonly timeoutMs: number }) => {
  if (error._tag === "UnsafeUrl") return mediaFailure(settings, "blocked", clip(error.reason))
  switch (error.reason) {
    case "timeout":
      return mediaFailure(settings, "timeout", `the audio did not download within ${limits.timeoutMs} ms`)
    case "too_large":
      return mediaFailure(settings, "too_large", `the audio is larger than ${limits.maxBytes} bytes`)
    case "too_many_redirects":
      return mediaFailure(settings, "rejected", "the audio URL redirected too many times")
    case "network":
      return mediaFailure(settings, "network", clip(`the audio could not be fetched: ${error.message}`))
  }
}

/** The parts of a `verbose_json` transcription read here: `{ text, language?, duration?, segments?, ... }`. */
const Transcription = Schema.Struct({
  text: Schema.String,
  language: Schema.optional(Schema.Unknown),
  duration: Schema.optional(Schema.NullOr(Schema.Number.check(
    Schema.makeFilter((seconds: number) => (Number.isFinite(seconds) && seconds >= 0) || "a number of seconds")
  )))
})
const decodeTranscription = Schema.decodeUnknownResult(Transcription)

export const make = (options: Options): Effect.Effect<Provider<"transcribe">, never, UpstreamClient | OutboundHttp> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() =>
      mediaSettings("openaiTranscribe", options, {
        name: DEFAULT_NAME,
        timeoutMs: DEFAULT_TIMEOUT_MS,
        maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES
      })
    )
    const { name } = settings
    const model = options.model ?? DEFAULT_MODEL
    const limits = yield* Effect.sync(() => {
      const where = `openaiTranscribe ${name}`
      checkUnitPrice(where, options.unitPrice, "second")
      if (model.trim() === "") throw new RangeError(`${where}: model must not be empty`)
      return {
        maxInlineBytes: positiveInteger(where, "maxInlineBytes", options.maxInlineBytes, DEFAULT_MAX_INLINE_BYTES),
        maxDownloadBytes: positiveInteger(where, "maxDownloadBytes", options.maxDownloadBytes, DEFAULT_MAX_DOWNLOAD_BYTES),
        fetchTimeoutMs: positiveInteger(where, "fetchTimeoutMs", options.fetchTimeoutMs, DEFAULT_FETCH_TIMEOUT_MS),
        maxDurationSeconds: positiveInteger(where, "maxDurationSeconds", options.maxDurationSeconds, DEFAULT_MAX_DURATION_SECONDS),
        minBytesPerSecond: positiveInteger(where, "minBytesPerSecond", options.minBytesPerSecond, DEFAULT_MIN_BYTES_PER_SECOND)
      }
    })
    const client = yield* UpstreamClient
    const outbound = yield* OutboundHttp
    const url = `${settings.baseUrl}${TRANSCRIPTIONS_PATH}`
    const price = options.unitPrice.priceMicroUsd
    const cost = (seconds: number): bigint => BigInt(Math.ceil(seconds)) * price

    const plan = (input: TranscribeInput): Result.Result<Plan, ValidationError> => {
      let language: string | undefined
      if (input.language !== undefined) {
        const match = LANGUAGE.exec(input.language)
        if (match === null) return Result.fail(invalid("language", "expected a language code such as \"en\" or \"pt-BR\""))
        language = match[1]!.toLowerCase()
      }
      if ((input.url === undefined) === (input.audio === undefined)) {
        return Result.fail(invalid("audio", "give exactly one of url or audio"))
      }
      if (input.url !== undefined) {
        return Result.succeed({ source: { _tag: "url", url: input.url }, language, seconds: limits.maxDurationSeconds })
      }
      const decoded = decodeInline(input.audio!)
      if (Result.isFailure(decoded)) return Result.fail(invalid("audio", decoded.failure))
      const { bytes } = decoded.success
      if (bytes.byteLength === 0) return Result.fail(invalid("audio", "is empty"))
      if (bytes.byteLength > limits.maxInlineBytes) {
        return Result.fail(invalid("audio", `is larger than ${limits.maxInlineBytes} bytes; give a url instead`))
      }
      const type = sniffAudio(bytes) ?? typeOfMime(input.mimeType) ?? typeOfMime(decoded.success.mime)
      if (type === undefined) {
        return Result.fail(invalid("mimeType", "the audio's type is not recognized; give mimeType (wav, mp3, m4a, mp4, webm, ogg or flac)"))
      }
      const seconds = type.extension === "wav" ? wavSeconds(bytes) : undefined
      if (seconds !== undefined && seconds > limits.maxDurationSeconds) {
        return Result.fail(invalid("audio", `is ${Math.ceil(seconds)} s long; ${name} takes at most ${limits.maxDurationSeconds} s`))
      }
      const bound = seconds !== undefined ? Math.ceil(seconds) : Math.ceil(bytes.byteLength / limits.minBytesPerSecond)
      return Result.succeed({ source: { _tag: "inline", bytes, type, seconds, bound }, language, seconds: bound })
    }

    const quote = (input: TranscribeInput): Result.Result<Quote, ValidationError> =>
      Result.map(plan(input), ({ seconds }) => ({ microUsd: cost(seconds), model }))

    /** The audio by URL, checked: bytes, type and (for WAV) length. */
    const download = Effect.fnUntraced(function*(target: string, declaredMime: string | undefined) {
      const fetchLimits = { maxBytes: limits.maxDownloadBytes, timeoutMs: limits.fetchTimeoutMs }
      const response = yield* outbound.get(target, {
        ...fetchLimits,
        failIfLarger: true,
        headers: { accept: "audio/*, video/mp4, video/webm, application/ogg, */*;q=0.1" }
      }).pipe(Effect.mapError((error) => fetchFailure(settings, error, fetchLimits)))
      if (response.truncated) return yield* mediaFailure(settings, "too_large", `the audio is larger than ${limits.maxDownloadBytes} bytes`)
      if (response.status >= 300) return yield* mediaFailure(settings, "rejected", `the audio URL answered HTTP ${response.status}`)
      if (response.body.byteLength === 0) return yield* mediaFailure(settings, "rejected", "the audio URL answered an empty body")
      const type = sniffAudio(response.body) ?? typeOfMime(declaredMime) ?? typeOfMime(response.contentType)
      if (type === undefined) {
        return yield* mediaFailure(settings, "rejected", `the audio URL answered ${clip(response.contentType || "something", 80)} that is not recognized audio`)
      }
      const seconds = type.extension === "wav" ? wavSeconds(response.body) : undefined
      if (seconds !== undefined && seconds > limits.maxDurationSeconds) {
        return yield* mediaFailure(settings, "rejected", `the audio is ${Math.ceil(seconds)} s long; ${name} takes at most ${limits.maxDurationSeconds} s`)
      }
      return { bytes: response.body, type, seconds }
    })

    const run = Effect.fn("OpenAiTranscribe.run")(function*(input: TranscribeInput, quoted: Quote) {
      const planned = plan(input)
      if (Result.isFailure(planned)) return yield* mediaFailure(settings, "rejected", `${name}: ${planned.failure.message}`)
      const { source, language } = planned.success
      const audio = source._tag === "inline" ? source : yield* download(source.url, input.mimeType)

      const form = new FormData()
      form.append("file", new Blob([new Uint8Array(audio.bytes)], { type: audio.type.mimeType }), `audio.${audio.type.extension}`)
      form.append("model", model)
      form.append("response_format", "verbose_json")
      if (language !== undefined) form.append("language", language)
      const request = HttpClientRequest.post(url, { acceptJson: true }).pipe(HttpClientRequest.bodyFormData(form))

      const answer = yield* sendMediaJson(client, settings, request)
      const malformed = (what: string) => new ProviderFailure({ provider: name, reason: "malformed", message: `${name}: ${what}` })
      const decoded = decodeTranscription(answer, { errors: "first" })
      if (Result.isFailure(decoded)) return yield* malformed(`the answer is not a verbose_json transcription: ${clip(decoded.failure.message, 200)}`)
      const body = decoded.success
      const reported = body.duration ?? undefined
      const detected = typeof body.language === "string" && body.language.trim() !== "" ? clip(body.language, 64) : null
      const seconds = reported ?? audio.seconds
      const charge = seconds === undefined ? quoted.microUsd : cost(seconds)
      const metered: Metered<TranscribeOutput> = {
        output: { text: body.text, language: detected, durationSeconds: seconds ?? null },
        actualMicroUsd: charge < quoted.microUsd ? charge : quoted.microUsd,
        model
      }
      return metered
    })

    return {
      name,
      capability: "transcribe",
      unitPrice: options.unitPrice,
      quote,
      run: (input, quoted) => run(input, quoted)
    } satisfies Provider<"transcribe">
  })

// ---------------------------------------------------------------------------
// Configuration

/**
 * OPENAI_API_KEY (OPENAI_BASE_URL): the `openai-transcribe` price card (per
 * second); and a self-hosted server at WHISPER_BASE_URL (WHISPER_API_KEY,
 * WHISPER_MODEL, default whisper-1): the `whisper` price card.
 */
export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    const providers: Array<Configured> = []
    const account = yield* openAiAccount
    if (Option.isSome(account)) {
      const unitPrice = yield* unitPriceOf(cards, "openai-transcribe", "transcribe", "second")
      providers.push({ name: "openai-transcribe", capability: "transcribe", build: make({ ...account.value, unitPrice }) })
    }
    const whisper = yield* env("WHISPER_BASE_URL")
    if (Option.isSome(whisper)) {
      const baseUrl = yield* httpUrl("WHISPER_BASE_URL", whisper.value)
      const whisperKey = yield* env("WHISPER_API_KEY")
      const unitPrice = yield* unitPriceOf(cards, "whisper", "transcribe", "second")
      providers.push({
        name: "whisper",
        capability: "transcribe",
        build: make({
          name: "whisper",
          baseUrl,
          ...(Option.isSome(whisperKey) ? { apiKey: Redacted.make(whisperKey.value) } : {}),
          model: yield* envOr("WHISPER_MODEL", "whisper-1"),
          unitPrice
        })
      })
    }
    return { providers, services: [] }
  })
