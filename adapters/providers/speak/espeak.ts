/**
 * `speak` without an upstream service: eSpeak NG on this machine
 * (Debian/Ubuntu package `espeak-ng`), run as a child process.
 *
 * - The process is spawned with an argument list, never through a shell:
 *   `espeak-ng -b 1 -v <voice> --stdout`, the text written to its standard
 *   input as UTF-8. The voice must match `VOICE_PATTERN` (a language code
 *   such as "en", "en-us" or "fr", optionally a variant as in "en+f3"), so it
 *   can never be read as an option. A voice eSpeak does not know is
 *   `rejected` when it says so.
 * - Output is WAV only (16-bit PCM, mono, 22050 Hz): `format` "wav" or
 *   omitted; "mp3", "opus" and "flac" are refused by the quote with a
 *   ValidationError (another `speak` provider may serve them).
 * - eSpeak streams its WAV to stdout with placeholder sizes in the header;
 *   the header is rewritten with the real sizes, so players and tools read
 *   the right length. `durationMs` comes from that header: data bytes /
 *   (sample rate × channels × bytes per sample).
 * - Bounds: the text is at most `maxCharacters` (default 4096, the schema's
 *   own limit); the audio at most `maxAudioBytes` (default 16 MiB, about six
 *   minutes), past which the process is killed and the call is `too_large`;
 *   the whole run at most `timeoutMs` (default 30 s), past which the process
 *   is killed and the call is `timeout`; at most `maxConcurrent` processes at
 *   once (default 2; later calls wait, within their own time limit).
 * - A missing or unusable binary is `unavailable`, naming it. `probe` runs
 *   `espeak-ng --version` for a start-up or health check.
 *
 * Pricing (per 1k characters, from the operator's card): the quote and the
 * charge are both ceil(characters × price / 1000), characters counted as
 * Unicode code points. The price is known before the call, so nothing is
 * metered afterwards.
 *
 * The WAV helpers below are shared with openaiSpeech.ts and
 * transcribe/openaiTranscribe.ts.
 */
import { spawn } from "node:child_process"
import { Duration, Effect, Result, Semaphore } from "effect"
import { type Metered, type Provider, ProviderFailure, type Quote, type UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { SpeakInput, SpeakOutput } from "../../../src/capabilities/schemas.ts"
import { ValidationError } from "../../../src/domain/errors.ts"
import { characterCount, priceOfCharacters, readWav, withTrueSizes } from "../kit/media.ts"
import { nothing, one, type ProviderConfig, switchedOn, unitPriceOf } from "../kit/config.ts"

export const DEFAULT_NAME = "espeak"
export const DEFAULT_BINARY = "espeak-ng"
export const DEFAULT_VOICE = "en"
export const DEFAULT_TIMEOUT_MS = 30_000
export const DEFAULT_MAX_AUDIO_BYTES = 16 * 1024 * 1024
export const DEFAULT_MAX_CHARACTERS = 4096
export const DEFAULT_MAX_CONCURRENT = 2
/** A language code, optionally with a region or variant; never starts with "-". */
export const VOICE_PATTERN = /^[a-z]{2,3}([-+][A-Za-z0-9-]{1,20})?$/
/** What eSpeak writes to stderr is kept this far, for failure messages. */
const MAX_STDERR_CHARS = 2048

export interface Options {
  /** Provider name in the catalogue and in failures; default "espeak". */
  readonly name?: string | undefined
  /** The executable: a path, or a name looked up on PATH; default "espeak-ng". */
  readonly binary?: string | undefined
  /** From the operator's price card (`per: "1k_chars"`). */
  readonly unitPrice: UnitPrice
  /** Used when the call names none; default "en". */
  readonly defaultVoice?: string | undefined
  /** Whole run, waiting for a slot included; default 30 s. */
  readonly timeoutMs?: number | undefined
  /** Largest WAV produced; default 16 MiB. */
  readonly maxAudioBytes?: number | undefined
  /** Longest text taken; default 4096 characters. */
  readonly maxCharacters?: number | undefined
  /** eSpeak processes running at once; default 2. */
  readonly maxConcurrent?: number | undefined
}

// ---------------------------------------------------------------------------
// The process
// ---------------------------------------------------------------------------

interface Limits {
  readonly name: string
  readonly binary: string
  readonly maxOutputBytes: number
}

interface Finished {
  readonly stdout: Uint8Array
  readonly stderr: string
  readonly code: number | null
  readonly signal: string | null
}

const failure = (provider: string, reason: ProviderFailure["reason"], message: string) =>
  new ProviderFailure({ provider, reason, message })

const oneLine = (text: string, max = 300): string => {
  const line = text.replace(/[\s\u0000-\u001f\u007f]+/g, " ").trim()
  return line.length > max ? `${line.slice(0, max)}…` : line
}

const spawnFailure = (limits: Limits, error: NodeJS.ErrnoException): ProviderFailure =>
  error.code === "ENOENT"
    ? failure(limits.name, "unavailable", `espeak-ng is not installed: no executable "${oneLine(limits.binary, 200)}" (install the espeak-ng package)`)
    : error.code === "EACCES"
    ? failure(limits.name, "unavailable", `"${oneLine(limits.binary, 200)}" cannot be executed (permission denied)`)
    : failure(limits.name, "unavailable", `espeak-ng could not be started: ${oneLine(error.message, 200)}`)

/**
 * Runs the binary with `args` (no shell), writes `stdin` and collects its
 * output. Interruption (a time limit, a cancelled call) kills the process.
 */
const runProcess = (limits: Limits, args: ReadonlyArray<string>, stdin: string): Effect.Effect<Finished, ProviderFailure> =>
  Effect.callback<Finished, ProviderFailure>((resume) => {
    let child: ReturnType<typeof spawn>
    try {
      child = spawn(limits.binary, args, {
        stdio: ["pipe", "pipe", "pipe"],
        shell: false,
        windowsHide: true,
        // Nothing of the gateway's environment (keys, tokens) is handed to the process.
        env: {
          PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
          ...(process.env.ESPEAK_DATA_PATH === undefined ? {} : { ESPEAK_DATA_PATH: process.env.ESPEAK_DATA_PATH })
        }
      })
    } catch (error) {
      resume(Effect.fail(spawnFailure(limits, error as NodeJS.ErrnoException)))
      return
    }
    const kill = () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    }
    let settled = false
    const settle = (effect: Effect.Effect<Finished, ProviderFailure>) => {
      if (settled) return
      settled = true
      resume(effect)
    }
    const chunks: Array<Buffer> = []
    let size = 0
    let stderr = ""
    child.on("error", (error: NodeJS.ErrnoException) => {
      kill()
      settle(Effect.fail(spawnFailure(limits, error)))
    })
    child.stdout!.on("data", (chunk: Buffer) => {
      if (settled) return
      size += chunk.byteLength
      if (size > limits.maxOutputBytes) {
        kill()
        settle(Effect.fail(failure(limits.name, "too_large", `the audio is larger than ${limits.maxOutputBytes} bytes`)))
        return
      }
      chunks.push(chunk)
    })
    child.stderr!.on("data", (chunk: Buffer) => {
      if (stderr.length < MAX_STDERR_CHARS) stderr += chunk.toString("utf8")
    })
    // The process may exit before reading all of its input (a bad voice); its exit status tells why.
    child.stdin!.on("error", () => {})
    child.on("close", (code, signal) => {
      settle(Effect.succeed({ stdout: Buffer.concat(chunks, size), stderr: stderr.slice(0, MAX_STDERR_CHARS), code, signal }))
    })
    child.stdin!.end(stdin, "utf8")
    return Effect.sync(kill)
  })

/** `espeak-ng --version` answered: the binary is there and runs. */
export interface ProbeResult {
  readonly binary: string
  readonly version: string
}

/** Checks that the binary runs (for start-up or health checks); `unavailable` saying why when it does not. */
export const probe = (
  options: { readonly name?: string | undefined; readonly binary?: string | undefined; readonly timeoutMs?: number | undefined } = {}
): Effect.Effect<ProbeResult, ProviderFailure> => {
  const limits: Limits = {
    name: options.name ?? DEFAULT_NAME,
    binary: options.binary ?? DEFAULT_BINARY,
    maxOutputBytes: 64 * 1024
  }
  const timeoutMs = options.timeoutMs ?? 5_000
  return runProcess(limits, ["--version"], "").pipe(
    Effect.timeoutOrElse({
      duration: Duration.millis(timeoutMs),
      orElse: () => Effect.fail(failure(limits.name, "timeout", `espeak-ng --version did not finish within ${timeoutMs} ms`))
    }),
    Effect.flatMap((done) => {
      const out = Buffer.from(done.stdout).toString("utf8")
      return done.code === 0 && /espeak/i.test(out)
        ? Effect.succeed({ binary: limits.binary, version: oneLine(out, 200) })
        : Effect.fail(
          failure(limits.name, "unavailable", `"${oneLine(limits.binary, 200)}" is not a working espeak-ng: ${oneLine(out + done.stderr, 200) || `exit ${done.code}`}`)
        )
    })
  )
}

// ---------------------------------------------------------------------------
// The provider
// ---------------------------------------------------------------------------

const invalid = (path: string, message: string) => new ValidationError({ message: `${path}: ${message}`, issues: [{ path, message }] })

interface Plan {
  readonly voice: string
  readonly characters: number
}

export const make = (options: Options): Effect.Effect<Provider<"speak">> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() => {
      const name = options.name ?? DEFAULT_NAME
      if (name.trim() === "" || name.length > 64) throw new RangeError("espeak: name must be 1 to 64 characters")
      const binary = options.binary ?? DEFAULT_BINARY
      if (binary.trim() === "" || binary.startsWith("-")) throw new RangeError(`espeak ${name}: binary must be a path or a command name`)
      if (options.unitPrice.per !== "1k_chars") throw new RangeError(`espeak ${name}: the price must be per 1k_chars`)
      if (options.unitPrice.priceMicroUsd < 0n) throw new RangeError(`espeak ${name}: the price must not be negative`)
      const defaultVoice = options.defaultVoice ?? DEFAULT_VOICE
      if (!VOICE_PATTERN.test(defaultVoice)) throw new RangeError(`espeak ${name}: defaultVoice ${JSON.stringify(defaultVoice)} is not a voice name`)
      const positive = (field: string, value: number | undefined, fallback: number) => {
        const resolved = value ?? fallback
        if (!Number.isSafeInteger(resolved) || resolved <= 0) throw new RangeError(`espeak ${name}: ${field} must be a positive integer`)
        return resolved
      }
      return {
        name,
        binary,
        defaultVoice,
        timeoutMs: positive("timeoutMs", options.timeoutMs, DEFAULT_TIMEOUT_MS),
        maxAudioBytes: positive("maxAudioBytes", options.maxAudioBytes, DEFAULT_MAX_AUDIO_BYTES),
        maxCharacters: positive("maxCharacters", options.maxCharacters, DEFAULT_MAX_CHARACTERS),
        maxConcurrent: positive("maxConcurrent", options.maxConcurrent, DEFAULT_MAX_CONCURRENT)
      }
    })
    const { name } = settings
    const price = options.unitPrice.priceMicroUsd
    const slots = yield* Semaphore.make(settings.maxConcurrent)
    const limits: Limits = { name, binary: settings.binary, maxOutputBytes: settings.maxAudioBytes }

    const plan = (input: SpeakInput): Result.Result<Plan, ValidationError> => {
      if (input.format !== undefined && input.format !== "wav") {
        return Result.fail(invalid("format", `${name} produces wav only`))
      }
      const voice = input.voice ?? settings.defaultVoice
      if (!VOICE_PATTERN.test(voice)) {
        return Result.fail(invalid("voice", `${name} takes an eSpeak voice such as "en", "en-us", "fr" or "en+f3"`))
      }
      if (input.text.trim() === "") return Result.fail(invalid("text", "there is nothing to say"))
      const characters = characterCount(input.text)
      if (characters > settings.maxCharacters) {
        return Result.fail(invalid("text", `${name} takes at most ${settings.maxCharacters} characters`))
      }
      return Result.succeed({ voice, characters })
    }

    const quote = (input: SpeakInput): Result.Result<Quote, ValidationError> =>
      Result.map(plan(input), ({ characters }) => ({ microUsd: priceOfCharacters(characters, price) }))

    const synthesize = (text: string, voice: string) =>
      slots.withPermits(1)(runProcess(limits, ["-b", "1", "-v", voice, "--stdout"], text)).pipe(
        Effect.timeoutOrElse({
          duration: Duration.millis(settings.timeoutMs),
          orElse: () => Effect.fail(failure(name, "timeout", `espeak-ng did not finish within ${settings.timeoutMs} ms`))
        })
      )

    const run = Effect.fn("Espeak.run")(function*(input: SpeakInput, quoted: Quote) {
      const planned = plan(input)
      if (Result.isFailure(planned)) return yield* failure(name, "rejected", `${name}: ${planned.failure.message}`)
      const { voice, characters } = planned.success
      const done = yield* synthesize(input.text, voice)
      if (done.code !== 0) {
        if (/voice does not exist/i.test(done.stderr)) {
          return yield* failure(name, "rejected", `${name} has no voice "${voice}"`)
        }
        const how = done.code === null ? `was killed (${done.signal ?? "signal"})` : `exited with status ${done.code}`
        const said = oneLine(done.stderr, 200)
        return yield* failure(name, "unavailable", `espeak-ng ${how}${said === "" ? "" : `: ${said}`}`)
      }
      const wav = withTrueSizes(done.stdout)
      const info = readWav(wav)
      if (info === undefined) return yield* failure(name, "malformed", "espeak-ng did not produce a WAV file")
      const charge = priceOfCharacters(characters, price)
      const metered: Metered<SpeakOutput> = {
        output: {
          audio: Buffer.from(wav).toString("base64"),
          mimeType: "audio/wav",
          durationMs: Math.round(info.durationSeconds * 1000),
          characters
        },
        actualMicroUsd: charge < quoted.microUsd ? charge : quoted.microUsd
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

/** On unless BUILTIN_SPEAK=off: the `espeak` price card (per 1k characters); probed at start-up for the binary. */
export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    if (!(yield* switchedOn("BUILTIN_SPEAK"))) return nothing
    const unitPrice = yield* unitPriceOf(cards, DEFAULT_NAME, "speak", "1k_chars")
    const healthy = probe().pipe(
      Effect.as({ ok: true } as const),
      Effect.catch((failure) => Effect.succeed({ ok: false, reason: failure.message } as const))
    )
    return one(DEFAULT_NAME, "speak", make({ unitPrice }), healthy)
  })
