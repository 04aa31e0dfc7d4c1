import { Context, Effect, References, type Tracer } from "effect"

/**
 * Whether the spans the code opens itself (`Effect.withSpan`: the request's
 * span and authentication in the HTTP adapter, the spend pipeline's reserve,
 * upstream call, release and settle) capture their caller's stack frame.
 *
 * Effect captures one `Error` per span for it (the frame a failure inside the
 * span is reported at). A host that exports no spans turns it off: the spans
 * are dropped anyway, and the capture is a measurable part of a metered
 * call's CPU. By default (true) Effect's own rule applies.
 */
export const SpanStackTraces = Context.Reference<boolean>("spendgate/SpanStackTraces", {
  defaultValue: () => true
})

const noStackTrace: Tracer.TraceOptions = { captureStackTrace: false }

/** `Effect.withSpan`'s trace options (its third argument) for a `SpanStackTraces` setting: Effect's default, or off. */
export const spanTraceOptions = (enabled: boolean): Tracer.TraceOptions | undefined => enabled ? undefined : noStackTrace

/**
 * Runs `effect` with tracing off, for a host that exports no spans: no span
 * is recorded at all (Effect's `TracerEnabled`; `withSpan` then makes an
 * inert placeholder) and none captures a stack frame. The spans' names and
 * attributes cost CPU on every metered call and would only be dropped.
 */
export const withoutTracing = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  effect.pipe(Effect.provideService(SpanStackTraces, false), Effect.provideService(References.TracerEnabled, false))
