import { upstreamLayers } from "../support/upstreamLayers.ts"
import type { UpstreamClient } from "../../adapters/net/upstreamClient.ts"
import { assert, describe, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Duration, Effect, Redacted, Result, type Scope } from "effect"
import OpenAI from "openai"
import { afterAll } from "vitest"
import * as Espeak from "../../adapters/providers/speak/espeak.ts"
import * as Media from "../../adapters/providers/kit/media.ts"
import * as OpenAiSpeech from "../../adapters/providers/speak/openaiSpeech.ts"
import type { Provider, Quote } from "../../src/capabilities/Provider.ts"
import { ProviderFailure } from "../../src/capabilities/Provider.ts"
import type { SpeakInput } from "../../src/capabilities/schemas.ts"
import { ValidationError } from "../../src/domain/errors.ts"
import { type Fake, fakeMp3, openAiError, type Recorded, refusedOrigin, startFake, toneWav } from "./fakeOpenAiMedia.ts"

/**
 * `speak`: the built-in eSpeak NG provider run for real (the `espeak-ng`
 * package must be installed), and the OpenAI speech provider against a local
 * fake that the official SDK is also pointed at.
 */

// ---------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------

const KEY = "sk-proj-speechtest0123456789abcdefghij"
/** 1.5 cents per 1000 characters (tts-1's list price). */
const PER_1K = { per: "1k_chars", priceMicroUsd: 15_000n } as const

type Client = UpstreamClient

const live = <A, E>(effect: Effect.Effect<A, E, Client | Scope.Scope>) => effect.pipe(Effect.provide(upstreamLayers))

const bounded = <A, E, R>(effect: Effect.Effect<A, E, R>, ms = 20_000) =>
  Effect.timeoutOrElse(effect, {
    duration: Duration.millis(ms),
    orElse: () => Effect.die(new Error(`test: no outcome within ${ms} ms`))
  })

const quoteOf = (provider: Provider<"speak">, input: SpeakInput): Quote => {
  const quoted = provider.quote(input)
  if (Result.isFailure(quoted)) throw new Error(`quote refused: ${quoted.failure.message}`)
  return quoted.success
}

const refusalOf = (provider: Provider<"speak">, input: SpeakInput): ValidationError => {
  const quoted = provider.quote(input)
  if (Result.isSuccess(quoted)) throw new Error(`the quote of ${JSON.stringify(input)} was expected to be refused`)
  assert.instanceOf(quoted.failure, ValidationError)
  return quoted.failure as ValidationError
}

const failureOf = (provider: Provider<"speak">, input: SpeakInput, ms?: number) =>
  bounded(Effect.flip(provider.run(input, quoteOf(provider, input))), ms).pipe(
    Effect.tap((error) => Effect.sync(() => assert.instanceOf(error, ProviderFailure)))
  )

const scratch = mkdtempSync(join(tmpdir(), "spendgate-speak-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

/** An executable shell script in the scratch directory. */
const script = (name: string, text: string): string => {
  const path = join(scratch, name)
  writeFileSync(path, `#!/bin/sh\n${text}\n`)
  chmodSync(path, 0o755)
  return path
}

const hasSoxi = (() => {
  try {
    execFileSync("soxi", ["-V0", "-D", "/dev/null"], { stdio: "ignore" })
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== "ENOENT"
  }
})()

/**
 * The canonical 44-byte header eSpeak writes, read field by field (not with
 * the adapter's parser), and the length the file's size implies.
 */
const inspectWav = (wav: Buffer) => {
  assert.isAtLeast(wav.length, 44)
  return {
    riff: wav.toString("latin1", 0, 4),
    riffSize: wav.readUInt32LE(4),
    wave: wav.toString("latin1", 8, 12),
    fmt: wav.toString("latin1", 12, 16),
    audioFormat: wav.readUInt16LE(20),
    channels: wav.readUInt16LE(22),
    sampleRate: wav.readUInt32LE(24),
    byteRate: wav.readUInt32LE(28),
    bitsPerSample: wav.readUInt16LE(34),
    data: wav.toString("latin1", 36, 40),
    dataSize: wav.readUInt32LE(40),
    secondsFromFileSize: (wav.length - 44) / (22_050 * 2)
  }
}

const peak = (wav: Buffer): number => {
  let max = 0
  for (let at = 44; at + 1 < wav.length; at += 2) max = Math.max(max, Math.abs(wav.readInt16LE(at)))
  return max
}

const espeak = (overrides: Partial<Espeak.Options> = {}) => Espeak.make({ unitPrice: PER_1K, ...overrides })

// ---------------------------------------------------------------------------
// eSpeak NG, for real
// ---------------------------------------------------------------------------

describe("espeak: real synthesis", () => {
  it.live("a WAV eSpeak made: RIFF/WAVE, 16-bit PCM mono at 22050 Hz, true sizes, a duration that matches the file", () =>
    Effect.gen(function*() {
      const provider = yield* espeak()
      assert.strictEqual(provider.name, "espeak")
      assert.deepStrictEqual(provider.unitPrice, PER_1K)
      const text = "Spendgate speaks. The quick brown fox jumps over the lazy dog."
      const quote = quoteOf(provider, { text })
      // ceil(62 × 15000 / 1000) = 930
      assert.strictEqual(text.length, 62)
      assert.strictEqual(quote.microUsd, 930n)

      const metered = yield* bounded(provider.run({ text }, quote))
      const { output } = metered
      assert.strictEqual(output.mimeType, "audio/wav")
      assert.strictEqual(output.characters, 62)
      assert.strictEqual(metered.actualMicroUsd, 930n)

      const wav = Buffer.from(output.audio, "base64")
      const header = inspectWav(wav)
      assert.strictEqual(header.riff, "RIFF")
      assert.strictEqual(header.wave, "WAVE")
      assert.strictEqual(header.fmt, "fmt ")
      assert.strictEqual(header.audioFormat, 1, "PCM")
      assert.strictEqual(header.channels, 1)
      assert.strictEqual(header.sampleRate, 22_050)
      assert.strictEqual(header.bitsPerSample, 16)
      assert.strictEqual(header.byteRate, 44_100)
      assert.strictEqual(header.data, "data")
      assert.strictEqual(header.riffSize, wav.length - 8, "the RIFF size is the file's, not eSpeak's placeholder")
      assert.strictEqual(header.dataSize, wav.length - 44, "the data size is the samples', not eSpeak's placeholder")
      assert.isAbove(header.secondsFromFileSize, 2, "a sentence of speech lasts seconds")
      assert.isAbove(peak(wav), 2_000, "the samples are speech, not silence")

      assert.isNotNull(output.durationMs)
      assert.approximately(output.durationMs!, header.secondsFromFileSize * 1000, 1)

      if (hasSoxi) {
        const path = join(scratch, "espeak-check.wav")
        writeFileSync(path, wav)
        const soxSeconds = Number(execFileSync("soxi", ["-D", path], { encoding: "utf8" }).trim())
        assert.approximately(soxSeconds * 1000, output.durationMs!, 2, "sox reads the same length")
        assert.strictEqual(execFileSync("soxi", ["-r", path], { encoding: "utf8" }).trim(), "22050")
      }
    }))

  it.live("a longer text makes a longer recording; the charge grows with the characters", () =>
    Effect.gen(function*() {
      const provider = yield* espeak()
      const short = "Hello there."
      const long = "Hello there. This sentence is a good deal longer, so eSpeak has much more to say about it."
      const a = yield* bounded(provider.run({ text: short }, quoteOf(provider, { text: short })))
      const b = yield* bounded(provider.run({ text: long }, quoteOf(provider, { text: long })))
      assert.isAbove(b.output.durationMs!, a.output.durationMs! * 2)
      assert.isAbove(Buffer.from(b.output.audio, "base64").length, Buffer.from(a.output.audio, "base64").length * 2)
      assert.isTrue(b.actualMicroUsd > a.actualMicroUsd, "the longer text costs more")
    }))

  it.live("another voice (French, a variant) is used; characters are code points", () =>
    Effect.gen(function*() {
      const provider = yield* espeak()
      const text = "Bonjour à tous 👋"
      assert.strictEqual(text.length, 17, "UTF-16 units")
      const quote = quoteOf(provider, { text, voice: "fr" })
      assert.strictEqual(quote.microUsd, 240n, "ceil(16 × 15000 / 1000): the emoji counts once")
      const french = yield* bounded(provider.run({ text, voice: "fr", format: "wav" }, quote))
      assert.strictEqual(french.output.characters, 16)
      assert.isAbove(french.output.durationMs!, 300)
      const variant = yield* bounded(provider.run({ text: "Hello", voice: "en+f3" }, quoteOf(provider, { text: "Hello", voice: "en+f3" })))
      assert.isAbove(variant.output.durationMs!, 100)
    }))

  it.live("only wav: mp3, opus and flac are refused by the quote", () =>
    Effect.gen(function*() {
      const provider = yield* espeak()
      for (const format of ["mp3", "opus", "flac"] as const) {
        const refused = refusalOf(provider, { text: "Hello", format })
        assert.strictEqual(refused.issues[0]?.path, "format")
      }
      assert.isTrue(Result.isSuccess(provider.quote({ text: "Hello", format: "wav" })))
    }))

  it.live("voices that are not voice names are refused before anything runs", () =>
    Effect.gen(function*() {
      const provider = yield* espeak()
      for (const voice of ["--help", "-w/tmp/x", "en; rm -rf /", "../../etc/passwd", "en us", "EN", "english", "e", "en+", "en\nfr"]) {
        const refused = refusalOf(provider, { text: "Hello", voice })
        assert.strictEqual(refused.issues[0]?.path, "voice", voice)
      }
      // The run checks again, whatever quote it is handed.
      const failure = yield* bounded(Effect.flip(provider.run({ text: "Hello", voice: "--help" }, { microUsd: 1n })))
      assert.strictEqual(failure.reason, "rejected")
    }))

  it.live("a voice name eSpeak does not know: rejected, saying so", () =>
    Effect.gen(function*() {
      const failure = yield* failureOf(yield* espeak(), { text: "Hello", voice: "zz" })
      assert.strictEqual(failure.reason, "rejected")
      assert.include(failure.message, "no voice \"zz\"")
    }))

  it.live("text over maxCharacters, or only blanks, is refused by the quote", () =>
    Effect.gen(function*() {
      const provider = yield* espeak({ maxCharacters: 10 })
      assert.strictEqual(refusalOf(provider, { text: "eleven char" }).issues[0]?.path, "text")
      assert.isTrue(Result.isSuccess(provider.quote({ text: "ten chars!" })))
      assert.strictEqual(refusalOf(provider, { text: "   \n " }).issues[0]?.path, "text")
    }))

  it.live("audio over maxAudioBytes: too_large, the process killed", () =>
    Effect.gen(function*() {
      const failure = yield* failureOf(yield* espeak({ maxAudioBytes: 20_000 }), { text: "This is far more than twenty thousand bytes of speech." })
      assert.strictEqual(failure.reason, "too_large")
    }))

  it.live("a missing binary: unavailable, saying it is not installed; probe says the same", () =>
    Effect.gen(function*() {
      const binary = join(scratch, "no-such-espeak-ng")
      const failure = yield* failureOf(yield* espeak({ binary }), { text: "Hello" })
      assert.strictEqual(failure.reason, "unavailable")
      assert.include(failure.message, "not installed")
      assert.include(failure.message, binary)
      const probed = yield* bounded(Effect.flip(Espeak.probe({ binary })))
      assert.strictEqual(probed.reason, "unavailable")
    }))

  it.live("probe finds the installed espeak-ng", () =>
    Effect.gen(function*() {
      const found = yield* bounded(Espeak.probe())
      assert.match(found.version, /eSpeak NG/)
    }))

  it.live("a process that never ends is killed at timeoutMs: timeout", () =>
    Effect.gen(function*() {
      const pidFile = join(scratch, "hang.pid")
      const binary = script("hang", `echo $$ > ${pidFile}\nexec sleep 30`)
      const started = Date.now()
      const failure = yield* failureOf(yield* espeak({ binary, timeoutMs: 500 }), { text: "Hello" }, 5_000)
      assert.strictEqual(failure.reason, "timeout")
      assert.isBelow(Date.now() - started, 3_000)
      const pid = Number(readFileSync(pidFile, "utf8").trim())
      const deadline = Date.now() + 3_000
      let alive = true
      while (alive && Date.now() < deadline) {
        try {
          process.kill(pid, 0)
          yield* Effect.promise(() => new Promise((r) => setTimeout(r, 20)))
        } catch {
          alive = false
        }
      }
      assert.isFalse(alive, "the process was killed")
    }))

  it.live("the text reaches the process on stdin, never as an argument; nothing of the environment leaks", () =>
    Effect.gen(function*() {
      const seen = join(scratch, "seen")
      // Records what it was given, then answers with a real eSpeak WAV.
      const binary = script(
        "recorder",
        `printf '%s\\n' "$@" > ${seen}.args\nenv > ${seen}.env\ncat > ${seen}.stdin\nprintf 'hi' | espeak-ng --stdout`
      )
      process.env.SPENDGATE_TEST_SECRET = "do-not-pass-me-on"
      try {
        const text = "$(touch /tmp/pwned) `id` ; -w /tmp/x"
        const provider = yield* espeak({ binary })
        const metered = yield* bounded(provider.run({ text, voice: "en-gb" }, quoteOf(provider, { text })))
        assert.deepStrictEqual(readFileSync(`${seen}.args`, "utf8").trim().split("\n"), ["-b", "1", "-v", "en-gb", "--stdout"])
        assert.strictEqual(readFileSync(`${seen}.stdin`, "utf8"), text)
        assert.notInclude(readFileSync(`${seen}.env`, "utf8"), "do-not-pass-me-on")
        assert.isFalse(existsSync("/tmp/pwned"))
        assert.isAbove(metered.output.durationMs!, 0)
      } finally {
        delete process.env.SPENDGATE_TEST_SECRET
      }
    }))

  it.live("a process that fails: unavailable with its status and what it said", () =>
    Effect.gen(function*() {
      const binary = script("broken", "echo 'cannot open audio data' >&2\nexit 3")
      const failure = yield* failureOf(yield* espeak({ binary }), { text: "Hello" })
      assert.strictEqual(failure.reason, "unavailable")
      assert.include(failure.message, "status 3")
      assert.include(failure.message, "cannot open audio data")
      const silent = script("not-wav", "cat > /dev/null\necho 'not a wav'")
      const malformed = yield* failureOf(yield* espeak({ binary: silent }), { text: "Hello" })
      assert.strictEqual(malformed.reason, "malformed")
    }))
})

describe("WAV helpers", () => {
  it("readWav measures a WAV; withTrueSizes replaces a streamed header's placeholders", () => {
    const wav = toneWav({ seconds: 2, sampleRate: 16_000, channels: 2 })
    const info = Media.readWav(wav)!
    assert.strictEqual(info.sampleRate, 16_000)
    assert.strictEqual(info.channels, 2)
    assert.strictEqual(info.bitsPerSample, 16)
    assert.strictEqual(info.dataBytes, 128_000)
    assert.strictEqual(info.durationSeconds, 2)
    assert.strictEqual(Media.withTrueSizes(wav), wav, "a correct file is left alone")

    const streamed = toneWav({ seconds: 1.25, streamed: true })
    assert.strictEqual(Media.readWav(streamed)!.declaredDataBytes, 0xffffffff)
    const fixed = Buffer.from(Media.withTrueSizes(streamed))
    assert.strictEqual(fixed.readUInt32LE(4), fixed.length - 8)
    assert.strictEqual(fixed.readUInt32LE(40), fixed.length - 44)
    assert.strictEqual(Media.readWav(fixed)!.durationSeconds, 1.25)

    assert.isUndefined(Media.readWav(Buffer.from("RIFF\u0000\u0000\u0000\u0000WAVE", "latin1")), "no fmt or data chunk")
    assert.isUndefined(Media.readWav(fakeMp3(100)))
    assert.isUndefined(Media.readWav(new Uint8Array(0)))
  })
})

// ---------------------------------------------------------------------------
// OpenAI speech
// ---------------------------------------------------------------------------

const speech = (fake: Fake | string, overrides: Partial<OpenAiSpeech.Options> = {}) =>
  OpenAiSpeech.make({
    baseUrl: `${typeof fake === "string" ? fake : fake.origin}/v1`,
    apiKey: Redacted.make(KEY),
    unitPrice: PER_1K,
    timeoutMs: 5_000,
    ...overrides
  })

const only = (fake: Fake): Recorded => {
  assert.strictEqual(fake.requests.length, 1, "exactly one request reaches the upstream")
  return fake.requests[0]!
}

describe("openaiSpeech: request, answer, price", () => {
  it.live("wav by default: the documented request; a streamed WAV comes back with true sizes and its duration", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY })
      const provider = yield* speech(fake)
      assert.strictEqual(provider.name, "openai-speech")
      const text = "Today is a wonderful day to build something people love!"
      assert.strictEqual(text.length, 56)
      const quote = quoteOf(provider, { text })
      assert.strictEqual(quote.microUsd, 840n, "56 × 15000 / 1000")
      assert.strictEqual(quote.model, "tts-1")

      const metered = yield* bounded(provider.run({ text }, quote))
      const request = only(fake)
      assert.strictEqual(request.method, "POST")
      assert.strictEqual(request.path, "/v1/audio/speech")
      assert.strictEqual(request.headers.authorization, `Bearer ${KEY}`)
      assert.match(String(request.headers["content-type"]), /^application\/json/)
      assert.deepStrictEqual(request.json, { model: "tts-1", input: text, voice: "alloy", response_format: "wav" })

      const wav = Buffer.from(metered.output.audio, "base64")
      assert.strictEqual(wav.toString("latin1", 0, 4), "RIFF")
      assert.strictEqual(wav.readUInt32LE(4), wav.length - 8)
      assert.strictEqual(wav.readUInt32LE(40), wav.length - 44)
      assert.strictEqual(wav.length, toneWav({ seconds: 1.5 }).length)
      assert.strictEqual(metered.output.mimeType, "audio/wav")
      assert.strictEqual(metered.output.durationMs, 1_500)
      assert.strictEqual(metered.output.characters, 56)
      assert.strictEqual(metered.actualMicroUsd, 840n)
    })))

  it.live("mp3 with another voice and model: the bytes as sent, audio/mpeg, no duration", () =>
    live(Effect.gen(function*() {
      const mp3 = fakeMp3(5_000)
      const fake = yield* startFake({ apiKey: KEY, behaviour: { _tag: "ok", audio: mp3 } })
      const provider = yield* speech(fake, { model: "tts-1-hd", unitPrice: { per: "1k_chars", priceMicroUsd: 30_000n } })
      const input: SpeakInput = { text: "Hello", voice: "nova", format: "mp3" }
      const metered = yield* bounded(provider.run(input, quoteOf(provider, input)))
      assert.deepStrictEqual(only(fake).json, { model: "tts-1-hd", input: "Hello", voice: "nova", response_format: "mp3" })
      assert.isTrue(Buffer.from(metered.output.audio, "base64").equals(mp3))
      assert.strictEqual(metered.output.mimeType, "audio/mpeg")
      assert.isNull(metered.output.durationMs)
      assert.strictEqual(metered.actualMicroUsd, 150n)
    })))

  it.live("a self-hosted server without a key gets no Authorization header", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake()
      const provider = yield* OpenAiSpeech.make({ name: "kokoro", baseUrl: `${fake.origin}/v1`, unitPrice: PER_1K, model: "kokoro", defaultVoice: "af_bella" })
      yield* bounded(provider.run({ text: "Hi" }, quoteOf(provider, { text: "Hi" })))
      const request = only(fake)
      assert.isUndefined(request.headers.authorization)
      assert.deepStrictEqual(request.json, { model: "kokoro", input: "Hi", voice: "af_bella", response_format: "wav" })
    })))

  it.live("voices that are not voice ids are refused by the quote", () =>
    live(Effect.gen(function*() {
      const provider = yield* speech("http://127.0.0.1:9")
      for (const voice of ["../alloy", "alloy nova", "-x", "{\"id\":1}"]) {
        const quoted = provider.quote({ text: "Hi", voice })
        assert.isTrue(Result.isFailure(quoted), voice)
      }
      assert.isTrue(Result.isSuccess(provider.quote({ text: "Hi", voice: "voice_1234" })))
    })))
})

describe("openaiSpeech: failures", () => {
  const hello: SpeakInput = { text: "Hello" }

  it.live("401, 429, 500 and a refused connection", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: "sk-proj-the-right-key-0123456789" })
      const provider = yield* speech(fake)
      const unauthorized = yield* failureOf(provider, hello)
      assert.strictEqual(unauthorized.reason, "rejected")
      assert.include(unauthorized.message, "Incorrect API key provided")
      assert.notInclude(unauthorized.message, KEY)

      fake.apiKey = KEY
      fake.behaviour = { _tag: "json", status: 429, body: openAiError("Rate limit reached for tts-1", "requests", "rate_limit_exceeded") }
      assert.strictEqual((yield* failureOf(provider, hello)).reason, "rate_limited")
      fake.behaviour = { _tag: "json", status: 503, body: openAiError("The engine is currently overloaded", "server_error", null) }
      assert.strictEqual((yield* failureOf(provider, hello)).reason, "unavailable")

      const refused = yield* failureOf(yield* speech(yield* refusedOrigin), hello)
      assert.strictEqual(refused.reason, "unavailable")
    })))

  it.live("no answer in time: timeout; an endless body: too_large", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY, behaviour: { _tag: "hang" } })
      const slow = yield* failureOf(yield* speech(fake, { timeoutMs: 300 }), hello, 5_000)
      assert.strictEqual(slow.reason, "timeout")
      fake.behaviour = { _tag: "endless", contentType: "audio/wav" }
      const endless = yield* failureOf(yield* speech(fake, { maxResponseBytes: 512 * 1024 }), hello)
      assert.strictEqual(endless.reason, "too_large")
    })))

  it.live("answers that are not audio: malformed", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY, behaviour: { _tag: "json", status: 200, body: { error: null } } })
      const provider = yield* speech(fake)
      assert.strictEqual((yield* failureOf(provider, hello)).reason, "malformed")
      fake.behaviour = { _tag: "ok", audio: fakeMp3(1000), audioType: "audio/wav" }
      const notWav = yield* failureOf(provider, hello)
      assert.strictEqual(notWav.reason, "malformed")
      assert.include(notWav.message, "not a WAV")
      fake.behaviour = { _tag: "raw", status: 200, body: Buffer.alloc(0), contentType: "audio/wav" }
      assert.strictEqual((yield* failureOf(provider, hello)).reason, "malformed")
    })))
})

describe("the fake speaks the speech API as the official SDK does", () => {
  it.live("audio.speech.create gets the fake's audio; the SDK's request body is the adapter's", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY })
      const client = new OpenAI({ apiKey: KEY, baseURL: `${fake.origin}/v1`, maxRetries: 0, timeout: 5_000 })
      const text = "Today is a wonderful day to build something people love!"
      const response = yield* bounded(Effect.promise(() =>
        client.audio.speech.create({ model: "tts-1", input: text, voice: "alloy", response_format: "wav" })
      ))
      assert.strictEqual(response.headers.get("content-type"), "audio/wav")
      const audio = Buffer.from(yield* Effect.promise(() => response.arrayBuffer()))
      assert.isTrue(audio.equals(toneWav({ seconds: 1.5, streamed: true })))

      yield* bounded((yield* speech(fake)).run({ text }, { microUsd: 840n }))
      const [sdk, ours] = fake.requests
      assert.strictEqual(ours!.path, sdk!.path)
      assert.strictEqual(ours!.headers.authorization, sdk!.headers.authorization)
      assert.deepStrictEqual(ours!.json, sdk!.json)

      fake.behaviour = { _tag: "json", status: 429, body: openAiError("Rate limit reached for tts-1", "requests", "rate_limit_exceeded") }
      const limited = yield* bounded(Effect.flip(Effect.tryPromise({
        try: () => client.audio.speech.create({ model: "tts-1", input: "x", voice: "alloy" }),
        catch: (e) => e
      })))
      assert.instanceOf(limited, OpenAI.RateLimitError)
      assert.strictEqual((limited as InstanceType<typeof OpenAI.RateLimitError>).code, "rate_limit_exceeded")
    })))
})
