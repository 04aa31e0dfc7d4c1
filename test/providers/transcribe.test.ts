import { upstreamLayers } from "../support/upstreamLayers.ts"
import type { UpstreamClient } from "../../adapters/net/upstreamClient.ts"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer, Redacted, Result, type Scope } from "effect"
import OpenAI, { toFile } from "openai"
import * as SafeHttp from "../../adapters/net/SafeHttp.ts"
import * as OpenAiTranscribe from "../../adapters/providers/transcribe/openaiTranscribe.ts"
import type { Provider, Quote } from "../../src/capabilities/Provider.ts"
import { ProviderFailure } from "../../src/capabilities/Provider.ts"
import type { TranscribeInput } from "../../src/capabilities/schemas.ts"
import { ValidationError } from "../../src/domain/errors.ts"
import type { OutboundHttp } from "../../src/ports/Net.ts"
import { type Fake, fakeMp3, openAiError, type Recorded, refusedOrigin, startFake, toneWav } from "./fakeOpenAiMedia.ts"

/**
 * The `transcribe` provider over OpenAI's transcriptions API, against a local
 * fake (test/providers/fakeOpenAiMedia.ts) that the official SDK is also
 * pointed at. Audio by URL goes through the real URL-safe fetcher, allowed
 * to reach 127.0.0.1 only.
 */

const KEY = "sk-proj-whispertest0123456789abcdefghij"
/** whisper-1's list price, $0.006 a minute: 100 µUSD a second. */
const PER_SECOND = { per: "second", priceMicroUsd: 100n } as const

type Env = UpstreamClient | OutboundHttp | Scope.Scope

const live = <A, E>(effect: Effect.Effect<A, E, Env>) =>
  effect.pipe(Effect.provide(Layer.mergeAll(upstreamLayers, SafeHttp.layer({ allowHosts: ["127.0.0.1"] }))))

const bounded = <A, E, R>(effect: Effect.Effect<A, E, R>, ms = 10_000) =>
  Effect.timeoutOrElse(effect, {
    duration: Duration.millis(ms),
    orElse: () => Effect.die(new Error(`test: no outcome within ${ms} ms`))
  })

const whisper = (fake: Fake | string, overrides: Partial<OpenAiTranscribe.Options> = {}) =>
  OpenAiTranscribe.make({
    baseUrl: `${typeof fake === "string" ? fake : fake.origin}/v1`,
    apiKey: Redacted.make(KEY),
    unitPrice: PER_SECOND,
    timeoutMs: 5_000,
    fetchTimeoutMs: 5_000,
    ...overrides
  })

const quoteOf = (provider: Provider<"transcribe">, input: TranscribeInput): Quote => {
  const quoted = provider.quote(input)
  if (Result.isFailure(quoted)) throw new Error(`quote refused: ${quoted.failure.message}`)
  return quoted.success
}

const refusalOf = (provider: Provider<"transcribe">, input: TranscribeInput): ValidationError => {
  const quoted = provider.quote(input)
  if (Result.isSuccess(quoted)) throw new Error("the quote was expected to be refused")
  assert.instanceOf(quoted.failure, ValidationError)
  return quoted.failure as ValidationError
}

const failureOf = (provider: Provider<"transcribe">, input: TranscribeInput, ms?: number) =>
  bounded(Effect.flip(provider.run(input, quoteOf(provider, input))), ms).pipe(
    Effect.tap((error) => Effect.sync(() => assert.instanceOf(error, ProviderFailure)))
  )

const only = (fake: Fake): Recorded => {
  assert.strictEqual(fake.requests.length, 1, "exactly one request reaches the upstream")
  return fake.requests[0]!
}

/** The multipart fields as text, and the uploaded file. */
const formOf = (request: Recorded) =>
  Effect.gen(function*() {
    assert.match(String(request.headers["content-type"]), /^multipart\/form-data; boundary=/)
    const form = request.form
    assert.isDefined(form, "the body is a readable multipart form")
    const file = form!.get("file")
    assert.instanceOf(file, Blob)
    const fields: Record<string, string> = {}
    for (const [key, value] of form!.entries()) if (typeof value === "string") fields[key] = value
    const bytes = Buffer.from(yield* Effect.promise(() => (file as File).arrayBuffer()))
    return { fields, name: (file as File).name, type: (file as File).type, bytes }
  })

const b64 = (bytes: Buffer) => bytes.toString("base64")

describe("openaiTranscribe: inline audio", () => {
  it.live("a WAV: quoted from its header, uploaded as audio.wav with the documented fields, metered from the duration", () =>
    live(Effect.gen(function*() {
      const wav = toneWav({ seconds: 3.2, sampleRate: 16_000 })
      const fake = yield* startFake({ apiKey: KEY, behaviour: { _tag: "ok", transcript: { duration: 3.2, text: "Hello from the tone." } } })
      const provider = yield* whisper(fake)
      assert.strictEqual(provider.name, "openai-transcribe")
      assert.deepStrictEqual(provider.unitPrice, PER_SECOND)
      const input: TranscribeInput = { audio: b64(wav), language: "en-US" }
      const quote = quoteOf(provider, input)
      assert.deepStrictEqual(quote, { microUsd: 400n, model: "whisper-1" }, "ceil(3.2 s) × 100")

      const metered = yield* bounded(provider.run(input, quote))

      const request = only(fake)
      assert.strictEqual(request.method, "POST")
      assert.strictEqual(request.path, "/v1/audio/transcriptions")
      assert.strictEqual(request.headers.authorization, `Bearer ${KEY}`)
      const form = yield* formOf(request)
      assert.deepStrictEqual(form.fields, { model: "whisper-1", response_format: "verbose_json", language: "en" })
      assert.strictEqual(form.name, "audio.wav")
      assert.strictEqual(form.type, "audio/wav")
      assert.isTrue(form.bytes.equals(wav), "the uploaded file is the audio, byte for byte")

      assert.deepStrictEqual(metered.output, { text: "Hello from the tone.", language: "english", durationSeconds: 3.2 })
      assert.strictEqual(metered.actualMicroUsd, 400n)
      assert.strictEqual(metered.model, "whisper-1")
    })))

  it.live("an MP3: bounded by its size at 8 kbit/s, uploaded as audio.mp3, charged for the seconds reported", () =>
    live(Effect.gen(function*() {
      const mp3 = fakeMp3(50_000)
      const fake = yield* startFake({ apiKey: KEY, behaviour: { _tag: "ok", transcript: { duration: 12.3 } } })
      const provider = yield* whisper(fake)
      const input: TranscribeInput = { audio: b64(mp3) }
      const quote = quoteOf(provider, input)
      assert.strictEqual(quote.microUsd, 5_000n, "50 000 bytes at 1000 bytes/s: 50 s")
      const metered = yield* bounded(provider.run(input, quote))
      const form = yield* formOf(only(fake))
      assert.strictEqual(form.name, "audio.mp3")
      assert.strictEqual(form.type, "audio/mpeg")
      assert.isFalse("language" in form.fields, "no language unless given")
      assert.isTrue(form.bytes.equals(mp3))
      assert.strictEqual(metered.output.durationSeconds, 12.3)
      assert.strictEqual(metered.actualMicroUsd, 1_300n, "ceil(12.3 s) × 100")
    })))

  it.live("bytes of no recognizable type take the mimeType given (and its extension); a data: URL is read too", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY })
      const provider = yield* whisper(fake)
      const opaque = Buffer.alloc(3_000, 7)
      yield* bounded(provider.run({ audio: b64(opaque), mimeType: "audio/webm;codecs=opus" }, quoteOf(provider, { audio: b64(opaque), mimeType: "audio/webm" })))
      const webm = yield* formOf(fake.requests[0]!)
      assert.strictEqual(webm.name, "audio.webm")
      assert.strictEqual(webm.type, "audio/webm")

      const refused = refusalOf(provider, { audio: b64(opaque) })
      assert.strictEqual(refused.issues[0]?.path, "mimeType")

      const flac = Buffer.concat([Buffer.from("fLaC", "latin1"), Buffer.alloc(2_000, 1)])
      const dataUrl = `data:audio/flac;base64,${b64(flac)}`
      yield* bounded(provider.run({ audio: dataUrl }, quoteOf(provider, { audio: dataUrl })))
      const sent = yield* formOf(fake.requests[1]!)
      assert.strictEqual(sent.name, "audio.flac")
      assert.isTrue(sent.bytes.equals(flac))
    })))

  it.live("inline audio the quote refuses: too large, not base64, empty, a WAV over maxDurationSeconds, a bad language", () =>
    live(Effect.gen(function*() {
      const provider = yield* whisper("http://127.0.0.1:9", { maxInlineBytes: 10_000, maxDurationSeconds: 2 })
      assert.strictEqual(refusalOf(provider, { audio: b64(fakeMp3(10_001)) }).issues[0]?.path, "audio")
      assert.isTrue(Result.isSuccess(provider.quote({ audio: b64(fakeMp3(10_000)) })))
      assert.strictEqual(refusalOf(provider, { audio: "this is not base64!" }).issues[0]?.path, "audio")
      assert.strictEqual(refusalOf(provider, { audio: "" }).issues[0]?.path, "audio")
      const long = refusalOf(provider, { audio: b64(toneWav({ seconds: 2.5, sampleRate: 1_000 })) })
      assert.include(long.message, "at most 2 s")
      assert.strictEqual(refusalOf(provider, { audio: b64(fakeMp3(100)), language: "english!" }).issues[0]?.path, "language")
    })))

  it.live("a server that answers without a duration: a WAV is charged its own length, other audio the quote", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ behaviour: { _tag: "json", status: 200, body: { text: "hello" } } })
      const provider = yield* whisper(fake, { name: "local-whisper", apiKey: undefined, model: "Systran/faster-whisper-small" })
      const wav = toneWav({ seconds: 1.6, sampleRate: 8_000 })
      const a = yield* bounded(provider.run({ audio: b64(wav) }, quoteOf(provider, { audio: b64(wav) })))
      assert.isUndefined(fake.requests[0]!.headers.authorization, "no key, no Authorization header")
      assert.strictEqual((yield* formOf(fake.requests[0]!)).fields.model, "Systran/faster-whisper-small")
      assert.deepStrictEqual(a.output, { text: "hello", language: null, durationSeconds: 1.6 })
      assert.strictEqual(a.actualMicroUsd, 200n)

      const mp3 = fakeMp3(7_000)
      const quote = quoteOf(provider, { audio: b64(mp3) })
      const b = yield* bounded(provider.run({ audio: b64(mp3) }, quote))
      assert.isNull(b.output.durationSeconds)
      assert.strictEqual(b.actualMicroUsd, quote.microUsd)
      assert.strictEqual(b.actualMicroUsd, 700n)
    })))
})

describe("audio types", () => {
  it("recognized from the first bytes, else from a media type", () => {
    const ext = (bytes: Buffer) => OpenAiTranscribe.sniffAudio(bytes)?.extension
    assert.strictEqual(ext(toneWav({ seconds: 0.1 })), "wav")
    assert.strictEqual(ext(fakeMp3(64)), "mp3", "an ID3 tag")
    assert.strictEqual(ext(Buffer.from([0xff, 0xfb, 0x90, 0x64, 0, 0])), "mp3", "an MPEG layer III frame")
    assert.isUndefined(ext(Buffer.from([0xff, 0xf1, 0x50, 0x80, 0, 0])), "AAC in ADTS is not MP3")
    assert.strictEqual(ext(Buffer.concat([Buffer.from([0, 0, 0, 0x20]), Buffer.from("ftypM4A ", "latin1")])), "m4a")
    assert.strictEqual(ext(Buffer.from([0x1a, 0x45, 0xdf, 0xa3, 0x9f])), "webm")
    assert.strictEqual(ext(Buffer.from("OggS\u0000\u0002", "latin1")), "ogg")
    assert.strictEqual(ext(Buffer.from("fLaC\u0000", "latin1")), "flac")
    assert.isUndefined(ext(Buffer.from("<!doctype html>")))
    assert.strictEqual(OpenAiTranscribe.typeOfMime("audio/x-wav")?.extension, "wav")
    assert.strictEqual(OpenAiTranscribe.typeOfMime("Audio/MPEG; charset=binary")?.extension, "mp3")
    assert.strictEqual(OpenAiTranscribe.typeOfMime("video/mp4")?.extension, "mp4")
    assert.isUndefined(OpenAiTranscribe.typeOfMime("application/octet-stream"))
    assert.isUndefined(OpenAiTranscribe.typeOfMime(undefined))
  })
})

describe("openaiTranscribe: audio by URL", () => {
  it.live("quoted at maxDurationSeconds before the fetch; fetched, uploaded, charged for what was reported", () =>
    live(Effect.gen(function*() {
      const mp3 = fakeMp3(40_000)
      const fake = yield* startFake({ apiKey: KEY, behaviour: { _tag: "ok", transcript: { duration: 41.02 } } })
      fake.files.set("talk.mp3", { body: mp3, contentType: "audio/mpeg" })
      const provider = yield* whisper(fake)
      const input: TranscribeInput = { url: `${fake.origin}/files/talk.mp3` }
      const quote = quoteOf(provider, input)
      assert.strictEqual(quote.microUsd, 60_000n, "600 s × 100")
      const metered = yield* bounded(provider.run(input, quote))
      const form = yield* formOf(only(fake))
      assert.strictEqual(form.name, "audio.mp3")
      assert.isTrue(form.bytes.equals(mp3), "the fetched file is uploaded as it came")
      assert.strictEqual(metered.output.durationSeconds, 41.02)
      assert.strictEqual(metered.actualMicroUsd, 4_200n, "ceil(41.02 s) × 100")
    })))

  it.live("reported longer than the quote covers: charged the quote, never more", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY, behaviour: { _tag: "ok", transcript: { duration: 901.5 } } })
      fake.files.set("long.ogg", { body: Buffer.concat([Buffer.from("OggS", "latin1"), Buffer.alloc(5_000)]), contentType: "application/octet-stream" })
      const provider = yield* whisper(fake)
      const input: TranscribeInput = { url: `${fake.origin}/files/long.ogg` }
      const metered = yield* bounded(provider.run(input, quoteOf(provider, input)))
      assert.strictEqual((yield* formOf(only(fake))).name, "audio.ogg", "sniffed, whatever the Content-Type said")
      assert.strictEqual(metered.output.durationSeconds, 901.5)
      assert.strictEqual(metered.actualMicroUsd, 60_000n)
    })))

  it.live("a fetched WAV longer than maxDurationSeconds is refused before the upstream is called", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY })
      fake.files.set("long.wav", { body: toneWav({ seconds: 3, sampleRate: 8_000 }), contentType: "audio/wav" })
      const provider = yield* whisper(fake, { maxDurationSeconds: 2 })
      const failure = yield* failureOf(provider, { url: `${fake.origin}/files/long.wav` })
      assert.strictEqual(failure.reason, "rejected")
      assert.include(failure.message, "3 s long")
      assert.lengthOf(fake.requests, 0)
    })))

  it.live("a URL that answers 404, something that is not audio, or more than maxDownloadBytes: no upstream call", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY })
      fake.files.set("page.html", { body: Buffer.from("<!doctype html><p>hi</p>"), contentType: "text/html" })
      fake.files.set("big.mp3", { body: fakeMp3(300_000), contentType: "audio/mpeg" })
      const provider = yield* whisper(fake, { maxDownloadBytes: 100_000 })
      const missing = yield* failureOf(provider, { url: `${fake.origin}/files/missing.mp3` })
      assert.strictEqual(missing.reason, "rejected")
      assert.include(missing.message, "HTTP 404")
      const page = yield* failureOf(provider, { url: `${fake.origin}/files/page.html` })
      assert.strictEqual(page.reason, "rejected")
      assert.include(page.message, "not recognized audio")
      const big = yield* failureOf(provider, { url: `${fake.origin}/files/big.mp3` })
      assert.strictEqual(big.reason, "too_large")
      assert.lengthOf(fake.requests, 0)
    })))

  it.live("an address the URL rules refuse: blocked, nothing fetched or sent", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY })
      const provider = yield* whisper(fake)
      for (const url of ["http://169.254.169.254/latest/meta-data/audio.mp3", "http://10.1.2.3/a.wav", "http://localhost:1/a.wav"]) {
        const failure = yield* failureOf(provider, { url })
        assert.strictEqual(failure.reason, "blocked", url)
      }
      assert.lengthOf(fake.requests, 0)
    })))
})

describe("openaiTranscribe: upstream failures", () => {
  const input: TranscribeInput = { audio: b64(toneWav({ seconds: 0.5, sampleRate: 8_000 })) }

  it.live("401, 429, 500, a FastAPI-style error, a refused connection", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: "sk-proj-the-right-key-0123456789" })
      const provider = yield* whisper(fake)
      const unauthorized = yield* failureOf(provider, input)
      assert.strictEqual(unauthorized.reason, "rejected")
      assert.include(unauthorized.message, "invalid_api_key")
      assert.notInclude(unauthorized.message, KEY)

      fake.apiKey = KEY
      fake.behaviour = { _tag: "json", status: 429, body: openAiError("Rate limit reached for whisper-1", "requests", "rate_limit_exceeded") }
      assert.strictEqual((yield* failureOf(provider, input)).reason, "rate_limited")
      fake.behaviour = { _tag: "json", status: 500, body: openAiError("The server had an error", "server_error", null) }
      assert.strictEqual((yield* failureOf(provider, input)).reason, "unavailable")
      fake.behaviour = { _tag: "json", status: 422, body: { detail: "Unsupported audio: could not decode" } }
      const unprocessable = yield* failureOf(provider, input)
      assert.strictEqual(unprocessable.reason, "rejected")
      assert.include(unprocessable.message, "Unsupported audio: could not decode")

      assert.strictEqual((yield* failureOf(yield* whisper(yield* refusedOrigin), input)).reason, "unavailable")
    })))

  it.live("timeout, an endless body, malformed answers", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY, behaviour: { _tag: "hang" } })
      const started = Date.now()
      const slow = yield* failureOf(yield* whisper(fake, { timeoutMs: 300 }), input, 5_000)
      assert.strictEqual(slow.reason, "timeout")
      assert.isBelow(Date.now() - started, 3_000)

      fake.behaviour = { _tag: "endless", contentType: "application/json" }
      assert.strictEqual((yield* failureOf(yield* whisper(fake, { maxResponseBytes: 256 * 1024 }), input)).reason, "too_large")

      const provider = yield* whisper(fake)
      fake.behaviour = { _tag: "raw", status: 200, body: "Hello there", contentType: "text/plain" }
      assert.strictEqual((yield* failureOf(provider, input)).reason, "malformed", "a text answer where verbose_json was asked")
      fake.behaviour = { _tag: "json", status: 200, body: { task: "transcribe", duration: 1 } }
      assert.strictEqual((yield* failureOf(provider, input)).reason, "malformed", "no text")
      fake.behaviour = { _tag: "json", status: 200, body: { text: "hi", duration: "long" } }
      assert.strictEqual((yield* failureOf(provider, input)).reason, "malformed", "a duration that is not a number")
    })))
})

describe("the fake speaks the transcriptions API as the official SDK does", () => {
  it.live("audio.transcriptions.create (verbose_json) parses the fake's answer; the SDK's form is the adapter's", () =>
    live(Effect.gen(function*() {
      const wav = toneWav({ seconds: 3.2, sampleRate: 16_000 })
      const fake = yield* startFake({ apiKey: KEY, behaviour: { _tag: "ok", transcript: { duration: 3.2 } } })
      const client = new OpenAI({ apiKey: KEY, baseURL: `${fake.origin}/v1`, maxRetries: 0, timeout: 5_000 })
      const file = yield* Effect.promise(() => toFile(wav, "audio.wav", { type: "audio/wav" }))
      const transcript = yield* bounded(Effect.promise(() =>
        client.audio.transcriptions.create({ file, model: "whisper-1", response_format: "verbose_json", language: "en" })
      ))
      assert.strictEqual(transcript.duration, 3.2)
      assert.strictEqual(transcript.language, "english")
      assert.strictEqual(transcript.text, "The quick brown fox jumps over the lazy dog.")
      assert.strictEqual(transcript.segments?.[0]?.end, 3.2)

      const provider = yield* whisper(fake)
      yield* bounded(provider.run({ audio: b64(wav), language: "en" }, { microUsd: 400n }))
      const [sdk, ours] = fake.requests
      assert.strictEqual(ours!.path, sdk!.path)
      assert.strictEqual(ours!.headers.authorization, sdk!.headers.authorization)
      const sdkForm = yield* formOf(sdk!)
      const ourForm = yield* formOf(ours!)
      assert.deepStrictEqual(ourForm.fields, sdkForm.fields)
      assert.strictEqual(ourForm.name, sdkForm.name)
      assert.strictEqual(ourForm.type, sdkForm.type)
      assert.isTrue(ourForm.bytes.equals(sdkForm.bytes))

      const unnamed = yield* Effect.promise(() => toFile(wav, "recording", { type: "audio/wav" }))
      const refused = yield* bounded(Effect.flip(Effect.tryPromise({
        try: () => client.audio.transcriptions.create({ file: unnamed, model: "whisper-1" }),
        catch: (e) => e
      })))
      assert.instanceOf(refused, OpenAI.BadRequestError)
      assert.include((refused as Error).message, "Invalid file format")
    })))
})
