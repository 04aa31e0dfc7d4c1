import { Context, type Tracer } from "effect"

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
