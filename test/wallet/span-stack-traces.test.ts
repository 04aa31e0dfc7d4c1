import { assert, describe, layer } from "@effect/vitest"
import { Effect, References } from "effect"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { SpanStackTraces, withoutTracing } from "../../src/observability/Tracing.ts"
import { Spend } from "../../src/wallet/Spend.ts"
import { fundedAccount, testLayer } from "./ledger.contract.ts"

/**
 * The spend pipeline's spans capture their caller's stack frame (Effect's
 * default) unless SpanStackTraces is off, as the server sets it when it
 * exports no spans. Seen from inside the upstream call: the stack frame of
 * its `Spend.upstream` span.
 */

const upstreamFrameStack = Effect.gen(function*() {
  const owner = yield* fundedAccount(100n)
  const spend = yield* Spend
  const { value } = yield* spend.spend(owner, {
    capability: "search",
    provider: "test",
    quotedMicroUsd: 10_000n,
    description: "test call",
    run: Effect.map(References.CurrentStackFrame, (frame) => ({
      value: { name: frame?.name, stack: frame?.stack() },
      actualMicroUsd: 10_000n
    }))
  })
  return value
})

describe("span stack traces", () => {
  layer(testLayer(MemoryStore.layer))((it) => {
    it.effect("are captured by default", () =>
      Effect.gen(function*() {
        const frame = yield* upstreamFrameStack
        assert.strictEqual(frame.name, "Spend.upstream")
        assert.isString(frame.stack)
      }))

    it.effect("are not captured with SpanStackTraces off; the spans are still made", () =>
      Effect.gen(function*() {
        const frame = yield* upstreamFrameStack.pipe(Effect.provideService(SpanStackTraces, false))
        assert.strictEqual(frame.name, "Spend.upstream")
        assert.isUndefined(frame.stack)
      }))
  })
})

describe("withoutTracing (a host that exports no spans)", () => {
  layer(testLayer(MemoryStore.layer))((it) => {
    it.effect("records no span: the pipeline's spans are inert placeholders, and the call is still charged", () =>
      Effect.gen(function*() {
        const spanOf = Effect.map(Effect.currentSpan, (span) => ({ spanId: span.spanId, sampled: span.sampled }))
        const traced = yield* spanOf.pipe(Effect.withSpan("traced"))
        assert.notStrictEqual(traced.spanId, "noop")
        const owner = yield* fundedAccount(100n)
        const spend = yield* Spend
        const { value, receipt } = yield* withoutTracing(spend.spend(owner, {
          capability: "search",
          provider: "test",
          quotedMicroUsd: 10_000n,
          description: "test call",
          run: Effect.map(
            Effect.all([Effect.option(Effect.currentSpan), References.CurrentStackFrame]),
            ([span, frame]) => ({ value: { span, stack: frame?.stack() }, actualMicroUsd: 10_000n })
          )
        }))
        // Inside the untraced pipeline there is no span to report to, and no stack frame was captured.
        assert.isTrue(value.span._tag === "None" || value.span.value.spanId === "noop")
        assert.isUndefined(value.stack)
        assert.strictEqual(receipt.chargedMicroUsd, 10_000n)
      }))
  })
})
