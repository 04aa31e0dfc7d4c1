import { Clock, Effect, Option, Result, Schema } from "effect"
import { StringDecoder } from "node:string_decoder"
import { type Metered, type Provider, ProviderFailure, type Quote, type UnitPrice } from "../../../src/capabilities/Provider.ts"
import { type ExecuteInput, type ExecuteOutput, MAX_EXECUTE_TIMEOUT_MS } from "../../../src/capabilities/schemas.ts"
import {
  baseUrlOf,
  causeDetail,
  checkUnitPrice,
  clip,
  failure,
  answerDecoder,
  decodeOrUndefined,
  MAX_ERROR_BODY_BYTES,
  MAX_UPSTREAM_MESSAGE_CHARS,
  isSuccessStatus,
  parseJson,
  providerName,
  UpstreamClient
} from "../kit/index.ts"
import { env, httpUrl, nothing, one, type ProviderConfig, unitPriceOf } from "../kit/config.ts"

/**
 * `execute` through a Piston server (engineer-man/piston, self-hosted; its
 * v2 API, no key).
 *
 * Request: `POST {baseUrl}/api/v2/execute` with
 * `{ language, version: "*", files: [{ name, content }], run_timeout }`:
 * the language is Piston's name for it (`python`, `javascript`, `bash` unless
 * configured otherwise), "*" picks the newest installed version, the file is
 * `main.py`, `main.js` or `main.sh`, and `run_timeout` is the call's wall
 * time in milliseconds: min(timeout ?? `defaultTimeoutMs`, `maxTimeoutMs`).
 * Piston refuses a `run_timeout` above its own configured limit (3 s unless
 * PISTON_RUN_TIMEOUT says otherwise) with a 400, so `maxTimeoutMs` should be
 * set to that limit (the defaults here match Piston's). Its CPU-time limit
 * (PISTON_RUN_CPU_TIME, also 3 s by default) applies as well: a CPU-bound
 * program can be stopped there, before the wall time, and is reported as
 * timed out.
 *
 * Answer: `{ language, version, run: { stdout, stderr, output, code, signal } }`
 * (`code` null when `signal` is not). Servers built on isolate add
 * `run.status` ("TO" time limit, "OL"/"EL" stdout/stderr limit, "SG" signal,
 * "RE" runtime error, "XX" internal error), `run.message`, `run.wall_time`
 * and `run.cpu_time` (ms); those are used when present.
 *
 * Mapping to ExecuteOutput:
 * - `timedOut`: `run.status` is "TO"; on servers without `status`, the
 *   heuristic is `signal` "SIGKILL" and a duration (see below) at least the
 *   timeout — Piston kills with SIGKILL at its deadline, and a SIGKILL well
 *   before it comes from something else (memory, output).
 * - `exitCode`: `run.code`; null when the program was killed (a signal, or
 *   timed out).
 * - `truncated`: Piston stopped the program for its output ("OL"/"EL"), or a
 *   stream was longer than `maxOutputBytes` here and was cut (on a character
 *   boundary).
 * - `durationMs`: `run.wall_time` when reported; otherwise the round trip of
 *   the HTTP call, measured here (it includes queueing and transfer, so it
 *   is an upper bound of the run).
 * - `run.status` "XX" (Piston failed internally) is `unavailable`.
 *
 * Pricing (per second, from the operator's price card), like the built-in
 * sandbox: the quote is price × ceil(timeout s); the charge is price ×
 * ceil(duration s) with the duration above, at least one second, never more
 * than the quote. Without `wall_time` the round trip is billed: it is what
 * the call occupied, and never more than the quote.
 *
 * Failures: no answer within the timeout plus `overheadMs` (queueing,
 * start-up, transfer; default 10 s) → `timeout`; 429 → `rate_limited`; 5xx →
 * `unavailable`; another 4xx (an unknown language, a timeout above the
 * server's limit) → `rejected` with Piston's `message`; an answer that is not
 * the documented JSON → `malformed`; one larger than `maxResponseBytes` →
 * `too_large`; no connection → `unavailable`.
 */

export const PROVIDER_NAME = "piston"
export const EXECUTE_PATH = "/api/v2/execute"
/** Piston's own defaults for run_timeout and its configured maximum. */
export const DEFAULT_TIMEOUT_MS = 3_000
export const DEFAULT_MAX_TIMEOUT_MS = 3_000
export const DEFAULT_OVERHEAD_MS = 10_000
export const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024
export const DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024
export { MAX_UPSTREAM_MESSAGE_CHARS }

export type Language = ExecuteInput["language"]

const FILE_NAMES: { readonly [L in Language]: string } = {
  python: "main.py",
  javascript: "main.js",
  bash: "main.sh"
}

export interface PistonOptions {
  /** Provider name in the catalogue and in failures; default "piston". */
  readonly name?: string | undefined
  /** The server: scheme, host and optional path prefix, e.g. `http://127.0.0.1:2000`. */
  readonly baseUrl: string
  /** From the operator's price card: `per: "second"`. */
  readonly unitPrice: UnitPrice
  /** Wall time of a call that names none; default 3 s. */
  readonly defaultTimeoutMs?: number | undefined
  /** Longest wall time a call may ask for; default 3 s (Piston's default limit), at most 60 s. */
  readonly maxTimeoutMs?: number | undefined
  /** Time allowed beyond the run's own for queueing, start-up and transfer; default 10 s. */
  readonly overheadMs?: number | undefined
  /** Kept per stream; default 1 MiB. */
  readonly maxOutputBytes?: number | undefined
  /** Largest answer accepted; default 8 MiB. */
  readonly maxResponseBytes?: number | undefined
  /** Piston's names for the languages, when the server's differ. */
  readonly runtimes?: { readonly [L in Language]?: string } | undefined
}

// ---------------------------------------------------------------------------
// Settings

interface Settings {
  readonly name: string
  readonly url: string
  readonly unitPrice: UnitPrice
  readonly defaultTimeoutMs: number
  readonly maxTimeoutMs: number
  readonly overheadMs: number
  readonly maxOutputBytes: number
  readonly maxResponseBytes: number
  readonly runtimes: { readonly [L in Language]: string }
}

const settingsOf = (options: PistonOptions): Settings => {
  const name = providerName("piston", options.name ?? PROVIDER_NAME)
  const baseUrl = baseUrlOf(name, options.baseUrl)
  checkUnitPrice(name, options.unitPrice, "second")
  const integer = (field: string, value: number | undefined, fallback: number, min: number, max: number) => {
    const resolved = value ?? fallback
    if (!Number.isSafeInteger(resolved) || resolved < min || resolved > max) {
      throw new RangeError(`${name}: ${field} must be an integer from ${min} to ${max}`)
    }
    return resolved
  }
  const maxTimeoutMs = integer("maxTimeoutMs", options.maxTimeoutMs, DEFAULT_MAX_TIMEOUT_MS, 1, MAX_EXECUTE_TIMEOUT_MS)
  const runtimes = { python: "python", javascript: "javascript", bash: "bash", ...options.runtimes }
  for (const [language, runtime] of Object.entries(runtimes)) {
    if (typeof runtime !== "string" || !/^[A-Za-z0-9][A-Za-z0-9+#._-]{0,63}$/.test(runtime)) {
      throw new RangeError(`${name}: runtimes.${language} is not a Piston language name`)
    }
  }
  return {
    name,
    url: baseUrl + EXECUTE_PATH,
    unitPrice: options.unitPrice,
    defaultTimeoutMs: integer("defaultTimeoutMs", options.defaultTimeoutMs, Math.min(DEFAULT_TIMEOUT_MS, maxTimeoutMs), 1, maxTimeoutMs),
    maxTimeoutMs,
    overheadMs: integer("overheadMs", options.overheadMs, DEFAULT_OVERHEAD_MS, 0, 10 * 60_000),
    maxOutputBytes: integer("maxOutputBytes", options.maxOutputBytes, DEFAULT_MAX_OUTPUT_BYTES, 1, 64 * 1024 * 1024),
    maxResponseBytes: integer("maxResponseBytes", options.maxResponseBytes, DEFAULT_MAX_RESPONSE_BYTES, 1024, 256 * 1024 * 1024),
    runtimes
  }
}

// ---------------------------------------------------------------------------
// Failures

const statusFailure = (settings: Settings, status: number, upstream: string): ProviderFailure => {
  const detail = upstream === "" ? "" : `: ${upstream}`
  const name = settings.name
  if (status === 429) return failure(name, "rate_limited", `${name} is rate limiting requests (HTTP 429)${detail}`)
  if (status >= 400 && status < 500) return failure(name, "rejected", `${name} refused the request (HTTP ${status})${detail}`)
  return failure(name, "unavailable", `${name} answered HTTP ${status}${detail}`)
}

// ---------------------------------------------------------------------------
// Transport

interface Reply {
  readonly status: number
  readonly bytes: Uint8Array
  /** The body went past the limit (only what fits was kept). */
  readonly overflow: boolean
}

/**
 * Sends the request and reads its answer (the upstream client: one
 * exchange within `deadlineMs`). Once the answer is read, fails or the
 * deadline passes, the connection is closed if still open, so a slow or
 * endless body is never left running. An error answer is read up to 16 KiB.
 */
const exchange = (
  client: UpstreamClient["Service"],
  settings: Settings,
  body: unknown,
  deadlineMs: number
): Effect.Effect<Reply, ProviderFailure> =>
  client.send({
    url: new URL(settings.url),
    method: "POST",
    headers: { accept: "application/json", "content-type": "application/json" },
    body: JSON.stringify(body),
    timeoutMs: deadlineMs,
    maxBytes: (status) => (isSuccessStatus(status) ? settings.maxResponseBytes : MAX_ERROR_BODY_BYTES)
  }).pipe(
    Effect.map((answer) => ({ status: answer.status, bytes: answer.bytes, overflow: answer.overflow })),
    Effect.catchTags({
      UpstreamTimeout: () => Effect.fail(failure(settings.name, "timeout", `${settings.name} did not answer within ${deadlineMs} ms`)),
      UpstreamUnreachable: (error) =>
        Effect.fail(failure(settings.name, "unavailable", `${settings.name} is unreachable${causeDetail(error.cause)}`)),
      UpstreamBroken: (error) =>
        Effect.fail(
          failure(settings.name, "network", `the connection to ${settings.name} broke during its answer${causeDetail(error.cause)}`)
        )
    })
  )

const errorBodyOf = decodeOrUndefined(Schema.Struct({ message: Schema.String }))

/** Piston's errors are `{ message }`; anything else is shown as text. */
const upstreamMessage = (bytes: Uint8Array): string => {
  const json = parseJson(bytes)
  const said = Result.isSuccess(json) ? errorBodyOf(json.success) : undefined
  if (said !== undefined) return clip(said.message)
  return clip(new TextDecoder().decode(bytes).replace(/<[^>]*>/g, " "))
}

/** The decoded JSON of a successful answer, or the failure its status or body stands for. */
const answerOf = (settings: Settings, reply: Reply): Result.Result<unknown, ProviderFailure> => {
  if (reply.status < 200 || reply.status >= 300) {
    return Result.fail(statusFailure(settings, reply.status, upstreamMessage(reply.bytes)))
  }
  if (reply.overflow) {
    return Result.fail(
      failure(settings.name, "too_large", `${settings.name}'s answer is larger than ${settings.maxResponseBytes} bytes`)
    )
  }
  const json = parseJson(reply.bytes)
  if (Result.isFailure(json)) return Result.fail(failure(settings.name, "malformed", `${settings.name}'s answer is not JSON`))
  return Result.succeed(json.success)
}

// ---------------------------------------------------------------------------
// Piston's answer

interface Run {
  readonly stdout: string
  readonly stderr: string
  readonly code: number | null
  readonly signal: string | null
  readonly status: string | null
  readonly message: string | null
  readonly wallTimeMs: number | null
}

/** Piston's answer: `{ language, version, run: { stdout, stderr, code, signal, output, status?, message?, wall_time? } }`. */
const RunAnswer = Schema.Struct({
  run: Schema.Struct({
    stdout: Schema.String,
    stderr: Schema.String,
    code: Schema.optional(Schema.NullOr(Schema.Number.check(Schema.isInt()))),
    signal: Schema.optional(Schema.NullOr(Schema.String)),
    status: Schema.optional(Schema.Unknown),
    message: Schema.optional(Schema.Unknown),
    wall_time: Schema.optional(Schema.Unknown)
  })
})
const decodeRun = answerDecoder(RunAnswer)

const parseRun = (settings: Settings, json: unknown): Result.Result<Run, ProviderFailure> =>
  Result.map(decodeRun(settings.name, json), ({ run }) => ({
    stdout: run.stdout,
    stderr: run.stderr,
    code: run.code ?? null,
    signal: run.signal ?? null,
    status: typeof run.status === "string" ? run.status : null,
    message: typeof run.message === "string" ? run.message : null,
    wallTimeMs: typeof run.wall_time === "number" && Number.isFinite(run.wall_time) && run.wall_time >= 0 ? run.wall_time : null
  }))

/** At most `maxBytes` of UTF-8, cut on a character boundary. */
const cutUtf8 = (text: string, maxBytes: number): { readonly text: string; readonly cut: boolean } => {
  if (text.length <= maxBytes / 3 || Buffer.byteLength(text, "utf8") <= maxBytes) return { text, cut: false }
  // A decoder that is never ended drops the incomplete character at the end.
  return { text: new StringDecoder("utf8").write(Buffer.from(text, "utf8").subarray(0, maxBytes)), cut: true }
}

const secondsOf = (ms: number): bigint => BigInt(Math.max(1, Math.ceil(ms / 1000)))

// ---------------------------------------------------------------------------
// The provider

export const make = (options: PistonOptions): Effect.Effect<Provider<"execute">, never, UpstreamClient> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() => settingsOf(options))
    const client = yield* UpstreamClient
    const { name } = settings
    const price = settings.unitPrice.priceMicroUsd

    const timeoutOf = (input: ExecuteInput) => Math.min(input.timeout ?? settings.defaultTimeoutMs, settings.maxTimeoutMs)

    const quote = (input: ExecuteInput): Result.Result<Quote, never> =>
      Result.succeed({ microUsd: price * secondsOf(timeoutOf(input)) })

    const run = Effect.fn("Piston.run")(
      function*(input: ExecuteInput, quoted: Quote) {
        const timeoutMs = timeoutOf(input)
        const body = {
          language: settings.runtimes[input.language],
          version: "*",
          files: [{ name: FILE_NAMES[input.language], content: input.code }],
          run_timeout: timeoutMs
        }
        const deadlineMs = timeoutMs + settings.overheadMs
        const sentAt = yield* Clock.currentTimeMillis
        const reply = yield* exchange(client, settings, body, deadlineMs)
        const roundTripMs = (yield* Clock.currentTimeMillis) - sentAt
        const json = answerOf(settings, reply)
        if (Result.isFailure(json)) return yield* json.failure
        const parsed = parseRun(settings, json.success)
        if (Result.isFailure(parsed)) return yield* parsed.failure
        const result = parsed.success
        if (result.status === "XX") {
          const said = result.message === null ? "" : `: ${clip(result.message)}`
          return yield* failure(name, "unavailable", `${name} failed to run the code${said}`)
        }
        const durationMs = Math.round(result.wallTimeMs ?? roundTripMs)
        const timedOut = result.status !== null
          ? result.status === "TO"
          : result.signal === "SIGKILL" && durationMs >= timeoutMs
        const stdout = cutUtf8(result.stdout, settings.maxOutputBytes)
        const stderr = cutUtf8(result.stderr, settings.maxOutputBytes)
        const output: ExecuteOutput = {
          stdout: stdout.text,
          stderr: stderr.text,
          exitCode: timedOut || result.signal !== null ? null : result.code,
          timedOut,
          durationMs,
          truncated: stdout.cut || stderr.cut || result.status === "OL" || result.status === "EL"
        }
        const charge = price * secondsOf(durationMs)
        const metered: Metered<ExecuteOutput> = {
          output,
          actualMicroUsd: charge < quoted.microUsd ? charge : quoted.microUsd
        }
        return metered
      },
      (effect) =>
        effect.pipe(
          // A bug in the HTTP stack must not surface as a defect of the call: the hold is released
          // and the next provider tried, as for any upstream failure.
          Effect.catchDefect((defect) => {
            const text = clip(String(defect), 200)
            return Effect.logError(`${name}: unexpected failure`, text).pipe(
              Effect.andThen(Effect.fail(failure(name, "unavailable", `unexpected failure: ${text}`)))
            )
          })
        )
    )

    return {
      name,
      capability: "execute",
      unitPrice: settings.unitPrice,
      quote,
      run: (input, quoted) => run(input, quoted)
    } satisfies Provider<"execute">
  })

// ---------------------------------------------------------------------------
// Configuration

/** PISTON_URL: a self-hosted Piston server, the `piston` price card (per second). */
export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    const url = yield* env("PISTON_URL")
    if (Option.isNone(url)) return nothing
    const baseUrl = yield* httpUrl("PISTON_URL", url.value)
    const unitPrice = yield* unitPriceOf(cards, PROVIDER_NAME, "execute", "second")
    return one(PROVIDER_NAME, "execute", make({ baseUrl, unitPrice }))
  })
