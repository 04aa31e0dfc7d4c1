/**
 * What the adapters over OpenAI's media APIs share (imagine/openaiImages.ts,
 * speak/openaiSpeech.ts, transcribe/openaiTranscribe.ts): their common
 * options, and the exchange (exchange.ts) with the key as a bearer token and
 * OpenAI's error bodies read for their message.
 *
 * Failures are the exchange's, with a refused connection `unavailable`.
 */
import { Effect, Option, Redacted } from "effect"
import { HttpClientRequest } from "effect/http"
import type { ProviderFailure } from "../../../src/capabilities/Provider.ts"
import { ValidationError } from "../../../src/domain/errors.ts"
import { env, envOr } from "./config.ts"
import {
  baseUrlOf,
  exchange,
  exchangeJson,
  failure,
  type FailureReason,
  keySecrets,
  openAiErrorDetail,
  positiveInteger,
  providerName,
  type Reply,
  type Upstream
} from "./index.ts"
import type { UpstreamClient } from "./exchange.ts"

export const DEFAULT_BASE_URL = "https://api.openai.com/v1"

export interface MediaSettings {
  readonly name: string
  /** Without a trailing slash. */
  readonly baseUrl: string
  readonly apiKey: Redacted.Redacted<string> | undefined
  readonly timeoutMs: number
  readonly maxResponseBytes: number
  /** How the upstream is called (exchange.ts). */
  readonly upstream: Upstream
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
  const name = providerName(adapter, options.name ?? defaults.name)
  const where = `${adapter} ${name}`
  const baseUrl = baseUrlOf(where, options.baseUrl ?? DEFAULT_BASE_URL)
  if (options.apiKey !== undefined && Redacted.value(options.apiKey).trim() === "") {
    throw new RangeError(`${where}: the API key is empty (leave it out for a server that needs none)`)
  }
  const timeoutMs = positiveInteger(where, "timeoutMs", options.timeoutMs, defaults.timeoutMs)
  const maxResponseBytes = positiveInteger(where, "maxResponseBytes", options.maxResponseBytes, defaults.maxResponseBytes)
  return {
    name,
    baseUrl,
    apiKey: options.apiKey,
    timeoutMs,
    maxResponseBytes,
    upstream: {
      provider: name,
      timeoutMs,
      maxResponseBytes,
      secrets: keySecrets(options.apiKey),
      errorDetail: openAiErrorDetail,
      requestIdHeader: "x-request-id"
    }
  }
}

/** A failure of this provider; the API key never appears in its message. */
export const mediaFailure = (settings: MediaSettings, reason: FailureReason, message: string): ProviderFailure =>
  failure(settings.name, reason, message, settings.upstream.secrets)

const authorized = (settings: MediaSettings, request: HttpClientRequest.HttpClientRequest) =>
  settings.apiKey === undefined ? request : HttpClientRequest.bearerToken(request, settings.apiKey)

/**
 * Sends one request, with the API key as a bearer token when there is one,
 * and reads its successful answer (`exchange`).
 */
export const sendMedia = (
  client: UpstreamClient["Service"],
  settings: MediaSettings,
  request: HttpClientRequest.HttpClientRequest
): Effect.Effect<Reply, ProviderFailure> => exchange(client, settings.upstream, authorized(settings, request))

/** `sendMedia`, then the answer's JSON (`malformed` when it is not JSON). */
export const sendMediaJson = (
  client: UpstreamClient["Service"],
  settings: MediaSettings,
  request: HttpClientRequest.HttpClientRequest
): Effect.Effect<unknown, ProviderFailure> => exchangeJson(client, settings.upstream, authorized(settings, request))

/** A ValidationError on one input field. */
export const invalid = (path: string, message: string): ValidationError =>
  new ValidationError({ message: `${path}: ${message}`, issues: [{ path, message }] })

/** The operator's OpenAI account (OPENAI_API_KEY, OPENAI_BASE_URL) for the media adapters, when a key is set. */
export const openAiAccount = Effect.gen(function*() {
  const key = yield* env("OPENAI_API_KEY")
  if (Option.isNone(key)) return Option.none<{ readonly apiKey: Redacted.Redacted<string>; readonly baseUrl: string }>()
  return Option.some({ apiKey: Redacted.make(key.value), baseUrl: yield* envOr("OPENAI_BASE_URL", DEFAULT_BASE_URL) })
})
