/**
 * `speak` over OpenAI's Audio speech API (`POST {baseUrl}/audio/speech`), or
 * any server that speaks it (self-hosted TTS servers with an OpenAI-style API).
 *
 * Wire format:
 *   request  { model, input, voice, response_format }   (JSON)
 *   response the audio itself, binary, with its content type
 *   error    { error: { message, type, param, code } } with a 4xx/5xx status
 *
 * `format` is sent as `response_format` (default "wav"); `voice` defaults to
 * `defaultVoice` ("alloy") and must look like a voice id (letters, digits,
 * `_`, `-`). The answer is read up to `maxResponseBytes` (default 32 MiB;
 * 4096 characters of speech is about five minutes, 14 MB of WAV) and returned
 * as base64. `mimeType` follows the format asked for; `durationMs` is read
 * from the WAV header for WAV (a streamed header's placeholder sizes are
 * corrected first), and is null for the compressed formats. An answer that
 * is empty, is JSON or text, or claims to be WAV but is not, is `malformed`.
 *
 * Pricing (per 1k characters, from the operator's card): the quote and the
 * charge are both ceil(characters × price / 1000), characters counted as
 * Unicode code points, as the upstream bills on the input text alone.
 *
 * Failures are those of the shared OpenAI media exchange (../openaiMedia.ts).
 */
import { Effect, Option, Redacted, Result } from "effect"
import { HttpClientRequest } from "effect/http"
import type { Metered, Provider, Quote, UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { SpeakInput, SpeakOutput } from "../../../src/capabilities/schemas.ts"
import type { ValidationError } from "../../../src/domain/errors.ts"
import { checkUnitPrice } from "../kit/index.ts"
import { invalid, mediaFailure, mediaSettings, openAiAccount, sendMedia } from "../kit/openaiMedia.ts"
import { characterCount, priceOfCharacters, readWav, withTrueSizes } from "../kit/media.ts"
import { nothing, one, type ProviderConfig, unitPriceOf } from "../kit/config.ts"
import { UpstreamClient } from "../kit/index.ts"

export const DEFAULT_NAME = "openai-speech"
export const SPEECH_PATH = "/audio/speech"
export const DEFAULT_MODEL = "tts-1"
export const DEFAULT_VOICE = "alloy"
export const DEFAULT_TIMEOUT_MS = 120_000
export const DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
export const DEFAULT_MAX_CHARACTERS = 4096
export const VOICE_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/

export type SpeechFormat = NonNullable<SpeakInput["format"]>

export const MIME_TYPES: Readonly<Record<SpeechFormat, string>> = {
  wav: "audio/wav",
  mp3: "audio/mpeg",
  opus: "audio/opus",
  flac: "audio/flac"
}

export interface Options {
  /** Provider name in the catalogue and in failures; default "openai-speech". */
  readonly name?: string | undefined
  /** The API root; default https://api.openai.com/v1. */
  readonly baseUrl?: string | undefined
  /** Sent as `Authorization: Bearer …`; a self-hosted server may need none. */
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /** Default "tts-1". */
  readonly model?: string | undefined
  /** Used when the call names none; default "alloy". */
  readonly defaultVoice?: string | undefined
  /** From the operator's price card (`per: "1k_chars"`). */
  readonly unitPrice: UnitPrice
  /** Longest text taken; default 4096 characters (the API's own limit). */
  readonly maxCharacters?: number | undefined
  /** For connecting, the answer and its whole body; default 120 s. */
  readonly timeoutMs?: number | undefined
  /** Largest audio read; default 32 MiB. */
  readonly maxResponseBytes?: number | undefined
}

interface Plan {
  readonly voice: string
  readonly format: SpeechFormat
  readonly characters: number
}

export const make = (options: Options): Effect.Effect<Provider<"speak">, never, UpstreamClient> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() =>
      mediaSettings("openaiSpeech", options, {
        name: DEFAULT_NAME,
        timeoutMs: DEFAULT_TIMEOUT_MS,
        maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES
      })
    )
    const { name } = settings
    const model = options.model ?? DEFAULT_MODEL
    const defaultVoice = options.defaultVoice ?? DEFAULT_VOICE
    const maxCharacters = options.maxCharacters ?? DEFAULT_MAX_CHARACTERS
    yield* Effect.sync(() => {
      const where = `openaiSpeech ${name}`
      checkUnitPrice(where, options.unitPrice, "1k_chars")
      if (model.trim() === "") throw new RangeError(`${where}: model must not be empty`)
      if (!VOICE_PATTERN.test(defaultVoice)) throw new RangeError(`${where}: defaultVoice is not a voice id`)
      if (!Number.isSafeInteger(maxCharacters) || maxCharacters <= 0) throw new RangeError(`${where}: maxCharacters must be a positive integer`)
    })
    const client = yield* UpstreamClient
    const url = `${settings.baseUrl}${SPEECH_PATH}`
    const price = options.unitPrice.priceMicroUsd

    const plan = (input: SpeakInput): Result.Result<Plan, ValidationError> => {
      const voice = input.voice ?? defaultVoice
      if (!VOICE_PATTERN.test(voice)) {
        return Result.fail(invalid("voice", `${name} takes a voice id such as "alloy" (letters, digits, _ and -)`))
      }
      if (input.text.trim() === "") return Result.fail(invalid("text", "there is nothing to say"))
      const characters = characterCount(input.text)
      if (characters > maxCharacters) return Result.fail(invalid("text", `${name} takes at most ${maxCharacters} characters`))
      return Result.succeed({ voice, format: input.format ?? "wav", characters })
    }

    const quote = (input: SpeakInput): Result.Result<Quote, ValidationError> =>
      Result.map(plan(input), ({ characters }) => ({ microUsd: priceOfCharacters(characters, price), model }))

    const run = Effect.fn("OpenAiSpeech.run")(function*(input: SpeakInput, quoted: Quote) {
      const planned = plan(input)
      if (Result.isFailure(planned)) return yield* mediaFailure(settings, "rejected", `${name}: ${planned.failure.message}`)
      const { voice, format, characters } = planned.success
      const request = HttpClientRequest.post(url, { headers: { accept: "application/octet-stream, audio/*" } }).pipe(
        HttpClientRequest.bodyText(
          JSON.stringify({ model, input: input.text, voice, response_format: format }),
          "application/json"
        )
      )
      const reply = yield* sendMedia(client, settings, request)
      if (reply.bytes.byteLength === 0) return yield* mediaFailure(settings, "malformed", `${name} answered no audio`)
      if (reply.contentType === "application/json" || reply.contentType.startsWith("text/")) {
        return yield* mediaFailure(settings, "malformed", `${name} answered ${reply.contentType}, not audio`)
      }
      let audio = reply.bytes
      let durationMs: number | null = null
      if (format === "wav") {
        audio = withTrueSizes(reply.bytes)
        const info = readWav(audio)
        if (info === undefined) return yield* mediaFailure(settings, "malformed", `${name}'s answer is not a WAV file`)
        durationMs = Math.round(info.durationSeconds * 1000)
      }
      const charge = priceOfCharacters(characters, price)
      const metered: Metered<SpeakOutput> = {
        output: {
          audio: Buffer.from(audio).toString("base64"),
          mimeType: MIME_TYPES[format],
          durationMs,
          characters
        },
        actualMicroUsd: charge < quoted.microUsd ? charge : quoted.microUsd,
        model
      }
      return metered
    })

    return {
      name,
      capability: "speak",
      unitPrice: options.unitPrice,
      quote,
      run: (input, quoted) => run(input, quoted)
    } satisfies Provider<"speak">
  })

// ---------------------------------------------------------------------------
// Configuration

/** OPENAI_API_KEY (OPENAI_BASE_URL): the `openai-speech` price card (per 1k characters). */
export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    const account = yield* openAiAccount
    if (Option.isNone(account)) return nothing
    const unitPrice = yield* unitPriceOf(cards, "openai-speech", "speak", "1k_chars")
    return one("openai-speech", "speak", make({ ...account.value, unitPrice }))
  })
