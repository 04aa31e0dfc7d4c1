import { upstreamLayers } from "../support/upstreamLayers.ts"
import { assert, describe, layer } from "@effect/vitest"
import { Cause, Effect, Exit, Result } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Piston from "../../adapters/providers/execute/piston.ts"
import { type Provider, ProviderFailure, type UnitPrice } from "../../src/capabilities/Provider.ts"
import type { ExecuteInput } from "../../src/capabilities/schemas.ts"
import { type Answer, json, type Recorded, refusedUrl, startFake, text } from "./fakeUpstream.ts"

/**
 * The Piston adapter against a local server speaking Piston's v2 API: the
 * request it sends, the documented answers mapped, metering, and every
 * failure mode.
 */

const PRICE = 400n
const unitPrice: UnitPrice = { per: "second", priceMicroUsd: PRICE }

// ---------------------------------------------------------------------------
// Piston's answers, as its API documents them

interface RunFields {
  readonly stdout?: string
  readonly stderr?: string
  readonly code?: number | null
  readonly signal?: string | null
  /** Only servers built on isolate report these. */
  readonly status?: string | null
  readonly message?: string | null
  readonly wall_time?: number
  readonly cpu_time?: number
}

/** The documented answer; `extended` adds the fields of isolate-based servers. */
const answer = (request: Recorded, run: RunFields, extended = true): unknown => {
  const body = JSON.parse(request.body) as { language: string }
  const stdout = run.stdout ?? ""
  const stderr = run.stderr ?? ""
  return {
    language: body.language,
    version: body.language === "javascript" ? "24.16.0" : body.language === "python" ? "3.12.0" : "5.2.0",
    run: {
      stdout,
      stderr,
      code: run.code === undefined ? 0 : run.code,
      signal: run.signal ?? null,
      output: stdout + stderr,
      ...(extended
        ? {
          memory: 8_400_000,
          message: run.message ?? null,
          status: run.status ?? null,
          cpu_time: run.cpu_time ?? 12,
          wall_time: run.wall_time ?? 31
        }
        : {})
    }
  }
}

const input = (language: ExecuteInput["language"], code: string, timeout?: number): ExecuteInput =>
  timeout === undefined ? { language, code } : { language, code, timeout }

const quoteOf = (provider: Provider<"execute">, request: ExecuteInput) => {
  const quoted = provider.quote(request)
  if (Result.isFailure(quoted)) return assert.fail("the quote was refused")
  return quoted.success
}

/** One call, quoted first, with a hard bound on the wait whatever the adapter does. */
const call = (provider: Provider<"execute">, request: ExecuteInput) =>
  Effect.gen(function*() {
    const quote = quoteOf(provider, request)
    const metered = yield* provider.run(request, quote).pipe(
      Effect.timeoutOrElse({ duration: "10 seconds", orElse: () => Effect.die(new Error("the call did not finish within 10 s")) })
    )
    return { ...metered, quote }
  })

const failureOf = (provider: Provider<"execute">, request: ExecuteInput) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(call(provider, request))
    if (Exit.isSuccess(exit)) return assert.fail(`expected a failure, got ${JSON.stringify(exit.value.output).slice(0, 200)}`)
    assert.isFalse(Cause.hasDies(exit.cause), `a defect: ${Cause.pretty(exit.cause)}`)
    const error = Cause.squash(exit.cause)
    assert.instanceOf(error, ProviderFailure)
    return error as ProviderFailure
  })

const bodyOf = (request: Recorded) => JSON.parse(request.body) as Record<string, unknown>

/** A Piston that answers after `delayMs`, as a real one does when it runs code until its deadline. */
const startSlow = (delayMs: number, respond: (request: Recorded) => unknown) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ server: Http.Server; url: string }>((resolve, reject) => {
        const server = Http.createServer((req, res) => {
          const chunks: Array<Buffer> = []
          req.on("data", (chunk: Buffer) => chunks.push(chunk))
          req.on("end", () => {
            const url = new URL(req.url ?? "/", "http://127.0.0.1")
            const recorded: Recorded = {
              method: req.method ?? "",
              path: url.pathname,
              query: url.searchParams,
              headers: req.headers,
              body: Buffer.concat(chunks).toString("utf8")
            }
            setTimeout(() => {
              res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(respond(recorded)))
            }, delayMs)
          })
        })
        server.on("error", reject)
        server.listen(0, "127.0.0.1", () => {
          resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })
        })
      })
    ),
    ({ server }) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() => resolve())
        })
      )
  ).pipe(Effect.map(({ url }) => url))

// ---------------------------------------------------------------------------

// Real sockets and real time: the test clock is left out.
layer(upstreamLayers, { excludeTestServices: true })("piston over HTTP", (it) => {
  describe("requests and answers", () => {
    it.effect("POSTs /api/v2/execute with the documented body, and maps the documented answer", () =>
      Effect.gen(function*() {
        const fake = yield* startFake((request) => json(answer(request, { stdout: "hello\n", wall_time: 1_200 })))
        const provider = yield* Piston.make({ baseUrl: fake.url, unitPrice })
        assert.strictEqual(provider.name, "piston")
        assert.strictEqual(provider.capability, "execute")
        assert.deepStrictEqual(provider.unitPrice, unitPrice)

        const code = "print('hello')\n"
        const result = yield* call(provider, input("python", code))
        const request = fake.requests[0]!
        assert.strictEqual(fake.requests.length, 1)
        assert.strictEqual(request.method, "POST")
        assert.strictEqual(request.path, "/api/v2/execute")
        assert.match(String(request.headers["content-type"]), /^application\/json/)
        assert.strictEqual(request.headers.accept, "application/json")
        assert.isUndefined(request.headers.traceparent, "no trace context is sent upstream")
        assert.isUndefined(request.headers.authorization)
        assert.deepStrictEqual(bodyOf(request), {
          language: "python",
          version: "*",
          files: [{ name: "main.py", content: code }],
          run_timeout: Piston.DEFAULT_TIMEOUT_MS
        })

        assert.deepStrictEqual(result.output, {
          stdout: "hello\n",
          stderr: "",
          exitCode: 0,
          timedOut: false,
          durationMs: 1_200,
          truncated: false
        })
        assert.strictEqual(result.quote.microUsd, PRICE * 3n, "the quote assumes the whole 3 s")
        assert.strictEqual(result.actualMicroUsd, PRICE * 2n, "billed ceil(1.2 s) of Piston's wall time")
      }))

    it.effect("JavaScript and bash: their Piston names and file names; configured names and a path prefix", () =>
      Effect.gen(function*() {
        const fake = yield* startFake((request) => json(answer(request, { stdout: "ok\n" })))
        const provider = yield* Piston.make({ baseUrl: `${fake.url}/piston/`, unitPrice })
        yield* call(provider, input("javascript", "console.log('ok')"))
        yield* call(provider, input("bash", "echo ok"))
        const renamed = yield* Piston.make({ baseUrl: fake.url, unitPrice, runtimes: { javascript: "node-js" } })
        yield* call(renamed, input("javascript", "console.log('ok')"))
        assert.deepStrictEqual(fake.requests.map((r) => r.path), ["/piston/api/v2/execute", "/piston/api/v2/execute", "/api/v2/execute"])
        assert.deepStrictEqual(
          fake.requests.map((r) => {
            const body = bodyOf(r) as { language: string; files: Array<{ name: string }> }
            return [body.language, body.files[0]!.name]
          }),
          [["javascript", "main.js"], ["bash", "main.sh"], ["node-js", "main.js"]]
        )
      }))

    it.effect("the timeout is the caller's, capped at the configured maximum; the quote follows", () =>
      Effect.gen(function*() {
        const fake = yield* startFake((request) => json(answer(request, {})))
        const provider = yield* Piston.make({ baseUrl: fake.url, unitPrice, maxTimeoutMs: 5_000, defaultTimeoutMs: 2_000 })
        const asked = yield* call(provider, input("python", "pass", 4_500))
        const capped = yield* call(provider, input("python", "pass", 60_000))
        const byDefault = yield* call(provider, input("python", "pass"))
        assert.deepStrictEqual(fake.requests.map((r) => bodyOf(r).run_timeout), [4_500, 5_000, 2_000])
        assert.deepStrictEqual([asked.quote.microUsd, capped.quote.microUsd, byDefault.quote.microUsd], [PRICE * 5n, PRICE * 5n, PRICE * 2n])
        assert.strictEqual(asked.actualMicroUsd, PRICE, "31 ms of wall time is one second")
      }))

    it.effect("exit codes and stderr propagate", () =>
      Effect.gen(function*() {
        const stderr = "Traceback (most recent call last):\n  File \"/piston/jobs/x/main.py\", line 1\nZeroDivisionError: division by zero\n"
        const fake = yield* startFake((request) => json(answer(request, { stderr, code: 1, status: "RE", message: "Exited with error status 1" })))
        const provider = yield* Piston.make({ baseUrl: fake.url, unitPrice })
        const result = yield* call(provider, input("python", "1/0"))
        assert.strictEqual(result.output.exitCode, 1)
        assert.strictEqual(result.output.stderr, stderr)
        assert.strictEqual(result.output.stdout, "")
        assert.isFalse(result.output.timedOut)
      }))

    it.effect("status TO is a timeout: no exit code, billed its wall time (the whole timeout)", () =>
      Effect.gen(function*() {
        const fake = yield* startFake((request) =>
          json(answer(request, { stdout: "partial\n", code: null, signal: "SIGKILL", status: "TO", message: "Time limit exceeded", wall_time: 3_004 }))
        )
        const provider = yield* Piston.make({ baseUrl: fake.url, unitPrice })
        const result = yield* call(provider, input("python", "while True: pass"))
        assert.isTrue(result.output.timedOut)
        assert.isNull(result.output.exitCode)
        assert.strictEqual(result.output.stdout, "partial\n")
        assert.strictEqual(result.output.durationMs, 3_004)
        assert.strictEqual(result.actualMicroUsd, result.quote.microUsd, "ceil(3.004 s) is capped at the quote's 3 s")
      }))

    it.effect("without status: SIGKILL at the deadline is a timeout, SIGKILL before it is not; the round trip is billed", () =>
      Effect.gen(function*() {
        const killed = { code: null, signal: "SIGKILL" } as const
        const slow = yield* startSlow(1_100, (request) => answer(request, killed, false))
        const provider = yield* Piston.make({ baseUrl: slow, unitPrice })
        const late = yield* call(provider, input("python", "while True: pass", 1_000))
        assert.isTrue(late.output.timedOut)
        assert.isNull(late.output.exitCode)
        assert.isAtLeast(late.output.durationMs, 1_000)
        assert.strictEqual(late.actualMicroUsd, PRICE, "ceil(round trip) capped at the quote's 1 s")

        const fast = yield* startFake((request) => json(answer(request, killed, false)))
        const early = yield* call(yield* Piston.make({ baseUrl: fast.url, unitPrice }), input("python", "x = ' ' * 10**10", 3_000))
        assert.isFalse(early.output.timedOut)
        assert.isNull(early.output.exitCode, "killed by a signal")
        assert.isBelow(early.output.durationMs, 3_000)
        assert.strictEqual(early.actualMicroUsd, PRICE, "a quick round trip is one second")
      }))

    it.effect("output Piston stopped (OL/EL) or longer than the cap is truncated, cut on a character boundary", () =>
      Effect.gen(function*() {
        const limited = yield* startFake((request) =>
          json(answer(request, { stdout: "x".repeat(1024), code: null, signal: "SIGKILL", status: "OL", message: "stdout length exceeded" }))
        )
        const stopped = yield* call(yield* Piston.make({ baseUrl: limited.url, unitPrice }), input("python", "print('x' * 10**9)"))
        assert.isTrue(stopped.output.truncated)
        assert.isFalse(stopped.output.timedOut)
        assert.isNull(stopped.output.exitCode)

        const long = yield* startFake((request) => json(answer(request, { stdout: "é".repeat(600), stderr: "short" })))
        const cut = yield* call(yield* Piston.make({ baseUrl: long.url, unitPrice, maxOutputBytes: 1_001 }), input("python", "..."))
        assert.isTrue(cut.output.truncated)
        assert.strictEqual(cut.output.stdout, "é".repeat(500))
        assert.strictEqual(cut.output.stderr, "short")
        assert.strictEqual(cut.output.exitCode, 0)
      }))

    it.effect("status XX (Piston failed internally) is unavailable, with its message", () =>
      Effect.gen(function*() {
        const fake = yield* startFake((request) => json(answer(request, { code: null, status: "XX", message: "isolate: cannot create box" })))
        const failure = yield* failureOf(yield* Piston.make({ baseUrl: fake.url, unitPrice }), input("bash", "echo"))
        assert.strictEqual(failure.reason, "unavailable")
        assert.include(failure.message, "isolate: cannot create box")
      }))
  })

  describe("failures", () => {
    const statusCases: ReadonlyArray<readonly [number, ProviderFailure["reason"]]> = [
      [400, "rejected"],
      [404, "rejected"],
      [415, "rejected"],
      [429, "rate_limited"],
      [500, "unavailable"],
      [502, "unavailable"],
      [503, "unavailable"]
    ]
    for (const [status, reason] of statusCases) {
      it.effect(`HTTP ${status} is ${reason}, with Piston's message`, () =>
        Effect.gen(function*() {
          const fake = yield* startFake(() => json({ message: `Piston says ${status}` }, status))
          const failure = yield* failureOf(yield* Piston.make({ baseUrl: fake.url, unitPrice }), input("python", "1"))
          assert.strictEqual(failure.reason, reason)
          assert.strictEqual(failure.provider, "piston")
          assert.include(failure.message, `Piston says ${status}`)
        }))
    }

    it.effect("an unknown language and a timeout above the server's limit are refused (400)", () =>
      Effect.gen(function*() {
        const fake = yield* startFake((request): Answer => {
          const body = bodyOf(request)
          if (body.language === "bash") return json({ message: "bash-* runtime is unknown" }, 400)
          return json({ message: "run_timeout cannot exceed the configured limit of 3000" }, 400)
        })
        const provider = yield* Piston.make({ baseUrl: fake.url, unitPrice, maxTimeoutMs: 10_000 })
        const unknown = yield* failureOf(provider, input("bash", "echo"))
        assert.strictEqual(unknown.reason, "rejected")
        assert.include(unknown.message, "bash-* runtime is unknown")
        const tooLong = yield* failureOf(provider, input("python", "1", 10_000))
        assert.include(tooLong.message, "cannot exceed the configured limit of 3000")
      }))

    it.effect("answers that are not the documented JSON are malformed", () =>
      Effect.gen(function*() {
        const answers: ReadonlyArray<Answer> = [
          text(200, "<html>Bad gateway page</html>", "text/html"),
          json([1, 2, 3]),
          json({ language: "python", version: "3.12.0" }),
          json({ run: { stdout: 1, stderr: "" } }),
          json({ run: { stdout: "", stderr: "", code: "zero", signal: null } }),
          json({ run: { stdout: "", stderr: "", code: null, signal: 9 } })
        ]
        let next = 0
        const fake = yield* startFake(() => answers[next++]!)
        const provider = yield* Piston.make({ baseUrl: fake.url, unitPrice })
        for (let i = 0; i < answers.length; i++) {
          const failure = yield* failureOf(provider, input("python", "1"))
          assert.strictEqual(failure.reason, "malformed", `answer ${i}: ${failure.message}`)
        }
      }))

    it.effect("an answer larger than maxResponseBytes is too_large, declared or streamed", () =>
      Effect.gen(function*() {
        const declared = yield* startFake(() => ({ _tag: "declared", length: 50 * 1024 * 1024 }))
        const first = yield* failureOf(yield* Piston.make({ baseUrl: declared.url, unitPrice }), input("python", "1"))
        assert.strictEqual(first.reason, "too_large")
        const endless = yield* startFake(() => ({ _tag: "endless" }))
        const second = yield* failureOf(yield* Piston.make({ baseUrl: endless.url, unitPrice, maxResponseBytes: 64 * 1024 }), input("python", "1"))
        assert.strictEqual(second.reason, "too_large")
      }))

    it.effect("no answer within the timeout plus the overhead is a timeout", () =>
      Effect.gen(function*() {
        const fake = yield* startFake(() => ({ _tag: "hang" }))
        const provider = yield* Piston.make({ baseUrl: fake.url, unitPrice, maxTimeoutMs: 200, overheadMs: 300 })
        const startedAt = Date.now()
        const failure = yield* failureOf(provider, input("python", "1", 200))
        assert.strictEqual(failure.reason, "timeout")
        assert.include(failure.message, "500 ms")
        assert.isBelow(Date.now() - startedAt, 3_000)
      }))

    it.effect("no server is unavailable; a connection cut mid-answer is a network failure", () =>
      Effect.gen(function*() {
        const refused = yield* failureOf(yield* Piston.make({ baseUrl: yield* refusedUrl, unitPrice }), input("python", "1"))
        assert.strictEqual(refused.reason, "unavailable")
        const cut = yield* startFake(() => ({ _tag: "cut" }))
        const broken = yield* failureOf(yield* Piston.make({ baseUrl: cut.url, unitPrice }), input("python", "1"))
        assert.strictEqual(broken.reason, "network")
      }))
  })

  describe("configuration", () => {
    const dies = <A, E, R>(effect: Effect.Effect<A, E, R>, pattern: RegExp) =>
      Effect.gen(function*() {
        const exit = yield* Effect.exit(effect)
        assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause), "a configuration error is a defect")
        if (Exit.isFailure(exit)) assert.match(String(Cause.squash(exit.cause)), pattern)
      })

    it.effect("bad options are refused when the provider is built", () =>
      Effect.gen(function*() {
        yield* dies(Piston.make({ baseUrl: "ftp://127.0.0.1", unitPrice }), /http\(s\)/)
        yield* dies(Piston.make({ baseUrl: "not a url", unitPrice }), /not a URL/)
        yield* dies(Piston.make({ baseUrl: "http://u:p@127.0.0.1", unitPrice }), /credentials/)
        yield* dies(Piston.make({ baseUrl: "http://127.0.0.1", unitPrice: { per: "query", priceMicroUsd: 1n } }), /per second/)
        yield* dies(Piston.make({ baseUrl: "http://127.0.0.1", unitPrice, maxTimeoutMs: 61_000 }), /maxTimeoutMs/)
        yield* dies(Piston.make({ baseUrl: "http://127.0.0.1", unitPrice, maxTimeoutMs: 1_000, defaultTimeoutMs: 2_000 }), /defaultTimeoutMs/)
        yield* dies(Piston.make({ baseUrl: "http://127.0.0.1", unitPrice, runtimes: { python: "--evil" } }), /runtimes\.python/)
      }))
  })
})
