import { type Cause, Deferred, Effect, Queue, Stream } from "effect"
import { ProviderFailure } from "../capabilities/Provider.ts"
import type { Principal } from "../domain/Agent.ts"
import { ValidationError } from "../domain/errors.ts"
import type { ServiceTransport } from "../ports/ServiceTransport.ts"
import { callReceipt } from "../wallet/receipt.ts"
import type { Spend } from "../wallet/Spend.ts"
import type { Catalogue } from "./catalogue.ts"
import {
  blockedAsCallerError,
  blockedAsFailure,
  describeCall,
  type ProxyCall,
  proxyCapability,
  type ProxyError,
  resolveCall,
  upstreamRequest
} from "./proxy.ts"
import { anthropicErrorEvent, errorEvent, metadataEvent, openAiErrorEvent, usageTracker } from "./sse.ts"

/**
 * A streamed proxied call (`stream: true` to a token-priced chat endpoint):
 * the answer passes through as it arrives, the call is held, metered from the
 * streamed usage and settled when the stream ends, and the receipt follows as
 * the stream's last event.
 */

/** Events buffered between the upstream and a slow caller. */
const STREAM_BUFFER_CHUNKS = 64

export interface StreamedProxy {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  /**
   * The upstream's events as they arrive, then one last event
   * `event: spendgate.metadata` with the charge. Ending the stream early (the
   * client went away) stops the upstream; the call is then charged what the
   * upstream reported or, when no usable usage arrived, by `countedStreamCost`:
   * the prompt part plus what had been streamed. A refusal after the answer
   * began (a call that outlived its hold and could not be charged) ends the
   * stream with `event: spendgate.error` instead of the metadata.
   */
  readonly body: Stream.Stream<Uint8Array>
  /** The upper bound held for the call, µUSD. */
  readonly quotedMicroUsd: bigint
}

export interface StreamOptions {
  /**
   * "spendgate" (the proxy): the receipt follows as `event: spendgate.metadata`
   * and a late refusal as `event: spendgate.error`. "openai" (the
   * OpenAI-compatible route): the upstream's events only, ending with its usage
   * chunk, so that OpenAI's stream parsers see nothing they do not know; a late
   * refusal is `data: {"error": ...}`, which they raise as an API error.
   * "anthropic" (the Anthropic-compatible route): likewise the upstream's
   * events only, ending with its `message_stop`; a late refusal is Anthropic's
   * own `event: error`, which its clients raise as an API error.
   */
  readonly trailer?: "spendgate" | "openai" | "anthropic"
}

/** How a refusal after the answer began is written, per trailer. */
const lateRefusal = {
  spendgate: errorEvent,
  openai: openAiErrorEvent,
  anthropic: anthropicErrorEvent
} as const

export const makeProxyStream = (deps: {
  readonly catalogue: Catalogue
  readonly transport: ServiceTransport["Service"]
  readonly spend: Spend["Service"]
}) =>
(principal: Principal, slug: string, call: ProxyCall, options: StreamOptions = {}): Effect.Effect<StreamedProxy, ProxyError> =>
  Effect.gen(function*() {
    const { catalogue, transport, spend } = deps
    const trailer = options.trailer ?? "spendgate"
    const { service, quote } = yield* resolveCall(catalogue, slug, call)
    const tokens = quote.tokens
    if (tokens === undefined || !tokens.stream) {
      return yield* new ValidationError({
        message: "Only token-priced chat endpoints stream; send stream: true to one of them",
        issues: [{ path: "body.stream", message: "not a streaming call" }]
      })
    }
    const queue = yield* Queue.bounded<Uint8Array, Cause.Done>(STREAM_BUFFER_CHUNKS)
    const head = yield* Deferred.make<{ readonly status: number; readonly headers: Readonly<Record<string, string>> }, ProxyError>()
    const tracker = usageTracker(tokens.format)
    const gone = yield* Deferred.make<void>()
    const run: Effect.Effect<{ readonly value: undefined; readonly actualMicroUsd: bigint }, ProviderFailure> = Effect.scoped(
      Effect.gen(function*() {
        const upstream = yield* transport.stream(service, upstreamRequest(call, quote)).pipe(
          Effect.mapError(blockedAsFailure(service))
        )
        if (upstream.status >= 500) {
          return yield* new ProviderFailure({ provider: service.slug, reason: "unavailable", message: `answered ${upstream.status}` })
        }
        yield* Deferred.succeed(head, { status: upstream.status, headers: upstream.headers })
        yield* upstream.body.pipe(
          Stream.runForEachWhile((chunk) => {
            tracker.push(chunk)
            return Queue.offer(queue, chunk)
          }),
          // Output already reached the caller: a broken stream is settled, not retried.
          Effect.catch(() => Effect.void),
          // The caller went away: stop reading (the upstream connection closes with the scope).
          Effect.raceFirst(Deferred.await(gone))
        )
        if (upstream.status >= 400) return { value: undefined, actualMicroUsd: 0n }
        const usage = tracker.usage()
        return {
          value: undefined,
          actualMicroUsd: usage === undefined ? tokens.counted(tracker.streamedBytes()) : tokens.cost(usage)
        }
      })
    )
    yield* spend.spend(principal, {
      capability: proxyCapability(service),
      provider: `proxy:${service.slug}`,
      quotedMicroUsd: quote.microUsd,
      description: describeCall(service, call, quote, " stream"),
      run
    }).pipe(
      Effect.flatMap(({ receipt }) =>
        trailer !== "spendgate"
          ? Effect.void
          : Queue.offer(queue, metadataEvent(callReceipt(receipt, { provider: service.slug, model: quote.model })))
      ),
      Effect.catch((error) =>
        Deferred.fail(head, blockedAsCallerError(error)).pipe(
          // The answer already started (e.g. the call outlived its hold and could not be
          // charged): the refusal ends the stream as its last event, in the error envelope.
          Effect.flatMap((first) => first ? Effect.void : Queue.offer(queue, lateRefusal[trailer](error)).pipe(Effect.asVoid))
        )),
      Effect.ensuring(Queue.end(queue)),
      Effect.forkDetach
    )
    // Stopped before the answer began (its caller gone, the server stopping): nobody will read
    // the stream, so the call stops as if its reader had gone (else it would wait on a full buffer).
    const started = yield* Deferred.await(head).pipe(Effect.onInterrupt(() => Deferred.succeed(gone, undefined)))
    return {
      ...started,
      quotedMicroUsd: quote.microUsd,
      body: Stream.fromQueue(queue).pipe(
        Stream.ensuring(Effect.andThen(Queue.shutdown(queue), Deferred.succeed(gone, undefined)))
      )
    }
  })
