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

/** A span's options, or a function that makes them (called only when the span is recorded). */
export type SpanOptionsOf = Tracer.SpanOptionsNoTrace | (() => Tracer.SpanOptionsNoTrace)

/**
 * The spans of code on a metered call's path, as the fiber's context has
 * them: with tracing on (Effect's `TracerEnabled`), `span` is `Effect.withSpan`
 * with the `SpanStackTraces` setting and `annotate` is
 * `Effect.annotateCurrentSpan`; with tracing off both do nothing and cost
 * nothing. Off, `Effect.withSpan` would still make an inert placeholder span,
 * register its end, and provide it and its stack frame to the wrapped effect
 * (several fiber steps and allocations per span, on every call), and an
 * annotation would still be a fiber step: only to be dropped.
 */
export interface Spans {
  readonly enabled: boolean
  readonly span: (name: string, options?: SpanOptionsOf) => <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  readonly annotate: (attributes: Record<string, unknown>) => Effect.Effect<void>
  /** Annotates the current span with what `attributes` makes of the effect's value (nothing, with tracing off). */
  readonly annotateWith: <A>(
    attributes: (value: A) => Record<string, unknown>
  ) => <E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

const spansOff: Spans = {
  enabled: false,
  span: () => (self) => self,
  annotate: () => Effect.void,
  annotateWith: () => (self) => self
}

const spansOn = (traceOptions: Tracer.TraceOptions | undefined): Spans => ({
  enabled: true,
  span: (name, options) => (self) =>
    Effect.withSpan(name, typeof options === "function" ? options() : options, traceOptions)(self),
  annotate: (attributes) => Effect.annotateCurrentSpan(attributes),
  annotateWith: (attributes) => Effect.tap((value) => Effect.annotateCurrentSpan(attributes(value)))
})

const spansWithStack = spansOn(undefined)
const spansWithoutStack = spansOn(noStackTrace)

/** The `Spans` for a context's `TracerEnabled` and `SpanStackTraces`. */
export const spansIn = (context: Context.Context<never>): Spans =>
  !Context.get(context, References.TracerEnabled)
    ? spansOff
    : Context.get(context, SpanStackTraces)
    ? spansWithStack
    : spansWithoutStack

/** The current fiber's `Spans` (one fiber step). */
export const currentSpans: Effect.Effect<Spans> = Effect.contextWith((context: Context.Context<never>) =>
  Effect.succeed(spansIn(context))
)

/**
 * `Effect.withSpan(name, options)` when spans are recorded, `self` when not
 * (one fiber step either way): for functions on a metered call's path in
 * place of `Effect.fn(name)`, which per call also captures an `Error` for
 * its call site and provides a stack frame, whether or not a span is kept.
 */
export const spanned = (name: string, options?: SpanOptionsOf) =>
<A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.contextWith((context: Context.Context<never>) => spansIn(context).span(name, options)(self))
