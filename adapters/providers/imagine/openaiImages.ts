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
 * The exchange and the options it shares with speak/openaiSpeech.ts and
 * transcribe/openaiTranscribe.ts are in ../openaiMedia.ts.
 */
import { Effect, Option, Redacted, Result, Schema } from "effect"
import type { Metered, Provider, Quote, UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { ImagineInput, ImagineOutput } from "../../../src/capabilities/schemas.ts"
import { NotFound, type ValidationError } from "../../../src/domain/errors.ts"
import { jsonPost, positiveInteger } from "../kit/index.ts"
import { invalid, mediaFailure, mediaSettings, openAiAccount, sendMediaJson } from "../kit/openaiMedia.ts"
import { nothing, one, type ProviderConfig } from "../kit/config.ts"
import { UpstreamClient } from "../kit/index.ts"

export { MAX_ERROR_BODY_BYTES, MAX_UPSTREAM_MESSAGE_CHARS } from "../kit/index.ts"
export { DEFAULT_BASE_URL } from "../kit/openaiMedia.ts"

export const DEFAULT_NAME = "openai-images"
export const GENERATIONS_PATH = "/images/generations"
export const DEFAULT_SIZE = "1024x1024"
/** Image generation takes tens of seconds for large images. */
export const DEFAULT_TIMEOUT_MS = 120_000
/** Four base64 PNGs at 1792×1024 fit comfortably. */
export const DEFAULT_MAX_RESPONSE_BYTES = 48 * 1024 * 1024
/** The schema's limit on `n`. */
export const MAX_IMAGES = 4

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
const Images = Schema.Struct({ data: Schema.Array(Schema.Unknown) })
const ImageItem = Schema.Struct({
  b64_json: Schema.optional(Schema.Unknown),
  url: Schema.optional(Schema.Unknown),
  revised_prompt: Schema.optional(Schema.Unknown)
})
const decodeImages = Schema.decodeUnknownResult(Images)
const decodeItem = Schema.decodeUnknownResult(ImageItem)

export const parseImages = (body: unknown, limit: number): Result.Result<Array<Image>, string> => {
  const decoded = decodeImages(body, { errors: "first" })
  if (Result.isFailure(decoded)) return Result.fail(`the answer has no data array: ${decoded.failure.message.replace(/\s+/g, " ")}`)
  const images: Array<Image> = []
  for (const [index, raw] of decoded.success.data.entries()) {
    if (images.length >= limit) break
    const parsed = decodeItem(raw)
    if (Result.isFailure(parsed)) return Result.fail(`data[${index}] is not an object`)
    const item = parsed.success
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

export const make = (options: Options): Effect.Effect<Provider<"imagine">, never, UpstreamClient> =>
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
    const client = yield* UpstreamClient
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
      const json = yield* sendMediaJson(client, settings, jsonPost(url, body))
      const images = parseImages(json, n)
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

// ---------------------------------------------------------------------------
// Configuration

/** OPENAI_API_KEY (OPENAI_BASE_URL), when an `openai-images` price card (model and sizes) is given. */
export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    const account = yield* openAiAccount
    const card = cards.get("openai-images")
    if (Option.isNone(account) || card?.kind !== "images") return nothing
    return one("openai-images", "imagine", make({ ...account.value, model: card.model, prices: card.sizes }))
  })
