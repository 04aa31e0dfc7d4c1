import { assert, describe, it, layer } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber } from "effect"
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import * as BuiltinRead from "../../adapters/providers/read/builtin.ts"
import { makePool, type ParseFailure } from "../../adapters/providers/kit/parse-pool.ts"
import * as BuiltinScrape from "../../adapters/providers/scrape/builtin.ts"
import { ProviderFailure } from "../../src/capabilities/Provider.ts"
import { ARTICLE_HTML, html, startSite, testOutboundHttp } from "./pages.ts"

/**
 * The built-in reader's and scraper's parsing runs in worker threads: a page
 * that takes long to parse hits its deadline while the event loop keeps
 * answering other work, and the pool is bounded.
 */

const PRICE = { per: "page", priceMicroUsd: 500n }

/** The worst lateness of a 10 ms timer while `effect` runs: how long the event loop was blocked. */
const withLagProbe = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    let worstLagMs = 0
    let expected = performance.now() + 10
    const timer = setInterval(() => {
      const now = performance.now()
      worstLagMs = Math.max(worstLagMs, now - expected)
      expected = now + 10
    }, 10)
    const exit = yield* Effect.exit(effect).pipe(Effect.ensuring(Effect.sync(() => clearInterval(timer))))
    return { exit, worstLagMs }
  })

/** A flat page wide enough that linkedom + Readability take well over a second on it (under the element cap). */
const WIDE_PAGE = `<!DOCTYPE html><html><head><title>Wide</title></head><body>${
  "<div><span>x</span></div>".repeat(BuiltinRead.MAX_ELEMENTS / 2 - 100)
}</body></html>`

const failureIn = <A>(exit: Exit.Exit<A, unknown>): ProviderFailure => {
  if (Exit.isSuccess(exit)) return assert.fail("expected a failure")
  assert.isFalse(Cause.hasDies(exit.cause), `a defect: ${Cause.pretty(exit.cause)}`)
  const error = Cause.squash(exit.cause)
  assert.instanceOf(error, ProviderFailure)
  return error as ProviderFailure
}

layer(testOutboundHttp, { excludeTestServices: true })("parsing in worker threads", (it) => {
  it.effect("a page that parses too long hits the deadline while the event loop stays free; normal pages still read", () =>
    Effect.gen(function*() {
      const pool = makePool({ maxWorkers: 1 })
      yield* Effect.addFinalizer(() => Effect.promise(() => pool.close()))
      const site = yield* startSite({ "/wide": html(WIDE_PAGE), "/article": html(ARTICLE_HTML) })
      const reader = yield* BuiltinRead.make({ unitPrice: PRICE, pool, parseDeadlineMs: 400 })
      const generous = yield* BuiltinRead.make({ unitPrice: PRICE, pool })
      // A first page loads the worker, so that the deadline below measures parsing only.
      const first = yield* generous.run({ url: `${site.url}/article` }, { microUsd: 500n })
      assert.isNotNull(first.output.title)

      const started = performance.now()
      const { exit, worstLagMs } = yield* withLagProbe(reader.run({ url: `${site.url}/wide` }, { microUsd: 500n }))
      const failure = failureIn(exit)
      assert.strictEqual(failure.reason, "timeout")
      assert.strictEqual(failure.code, "PROVIDER_ERROR")
      assert.include(failure.message, "400 ms")
      assert.isBelow(performance.now() - started, 3000, "the call ended at its deadline")
      assert.isBelow(worstLagMs, 250, "timers kept firing while the page was parsed")
      assert.deepStrictEqual(pool.stats(), { workers: 0, busy: 0, queued: 0 }, "the stuck worker was terminated")

      // The pool recovers: the next page reads exactly as it did on the event loop.
      const again = yield* generous.run({ url: `${site.url}/article` }, { microUsd: 500n })
      assert.deepStrictEqual(again.output, first.output)
    }), 30_000)

  it.effect("the scraper parses in the pool too, under the same deadline", () =>
    Effect.gen(function*() {
      const pool = makePool({ maxWorkers: 1 })
      yield* Effect.addFinalizer(() => Effect.promise(() => pool.close()))
      const site = yield* startSite({ "/wide": html(WIDE_PAGE.replace("<body>", "<body><a href=\"/x\">x</a>")) })
      const scraper = yield* BuiltinScrape.make({ unitPrice: PRICE, pool, parseDeadlineMs: 1 })
      const { exit } = yield* withLagProbe(scraper.run({ url: `${site.url}/wide`, selectors: { s: "span" } }, { microUsd: 500n }))
      assert.strictEqual(failureIn(exit).reason, "timeout")
    }), 30_000)
})

describe("the parse pool", () => {
  it.live("a parse past its deadline is terminated; the event loop is not blocked meanwhile", () =>
    Effect.gen(function*() {
      const pool = makePool({ maxWorkers: 1 })
      yield* Effect.addFinalizer(() => Effect.promise(() => pool.close()))
      yield* pool.run({ kind: "spin", ms: 1 }, 20_000)
      const started = performance.now()
      const { exit, worstLagMs } = yield* withLagProbe(pool.run({ kind: "spin", ms: 5_000 }, 300))
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) assert.strictEqual((Cause.squash(exit.cause) as ParseFailure).reason, "timeout")
      assert.isBelow(performance.now() - started, 1500)
      assert.isBelow(worstLagMs, 250)
      assert.strictEqual(pool.stats().workers, 0)
    }), 30_000)

  it.live("the queue is bounded: past it a parse fails at once as rate_limited", () =>
    Effect.gen(function*() {
      const pool = makePool({ maxWorkers: 1, maxQueued: 1 })
      yield* Effect.addFinalizer(() => Effect.promise(() => pool.close()))
      const running = yield* Effect.forkChild(Effect.exit(pool.run({ kind: "spin", ms: 2_000 }, 20_000)))
      const waiting = yield* Effect.forkChild(Effect.exit(pool.run({ kind: "spin", ms: 1 }, 20_000)))
      yield* Effect.sleep("50 millis")
      assert.deepStrictEqual(pool.stats().queued, 1)
      const refused = yield* Effect.flip(pool.run({ kind: "spin", ms: 1 }, 20_000))
      assert.strictEqual(refused.reason, "rate_limited")
      assert.isTrue(Exit.isSuccess(yield* Fiber.join(running)))
      assert.isTrue(Exit.isSuccess(yield* Fiber.join(waiting)))
    }), 30_000)

  it.live("an interrupted parse frees its worker", () =>
    Effect.gen(function*() {
      const pool = makePool({ maxWorkers: 1 })
      yield* Effect.addFinalizer(() => Effect.promise(() => pool.close()))
      const fiber = yield* Effect.forkChild(pool.run({ kind: "spin", ms: 10_000 }, 20_000))
      yield* Effect.sleep("200 millis")
      assert.strictEqual(pool.stats().busy, 1)
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(pool.stats(), { workers: 0, busy: 0, queued: 0 })
      assert.isNull(yield* pool.run({ kind: "spin", ms: 1 }, 20_000))
    }), 30_000)

  it("the worker also loads in a plain Node process (type stripping, as `npm start` runs the gateway)", () => {
    const pool = fileURLToPath(new URL("../../adapters/providers/kit/parse-pool.ts", import.meta.url))
    const script = [
      `import { Effect } from "effect"`,
      `import { makePool } from ${JSON.stringify(pool)}`,
      `const pool = makePool({ maxWorkers: 1 })`,
      `const html = "<html><head><title>Plain</title></head><body><article><h1>Plain</h1><p>" + "Words to read here. ".repeat(40) + "</p></article></body></html>"`,
      `const read = await Effect.runPromise(pool.run({ kind: "read", html, pageUrl: "https://example.test/" }, 20000))`,
      `console.log(JSON.stringify({ ok: read.ok, title: read.output.title }))`,
      `await pool.close()`
    ].join("\n")
    const result = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
      cwd: fileURLToPath(new URL("../..", import.meta.url)),
      encoding: "utf8",
      timeout: 60_000
    })
    assert.strictEqual(result.status, 0, result.stderr)
    assert.deepStrictEqual(JSON.parse(result.stdout.trim()), { ok: true, title: "Plain" })
  }, 60_000)
})
