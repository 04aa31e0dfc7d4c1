import { Clock, Context, Effect, Exit, Fiber, FiberSet, Layer, Stream } from "effect"
import { HttpRouter, HttpServerRequest, type HttpServerResponse } from "effect/http"

/**
 * A request the server has read is carried out to its end, whether or not its
 * caller waits for the answer.
 *
 * Node's server interrupts a request's fiber when its client closes the
 * connection before the answer is written. For a metered call that used to
 * mean: the upstream request aborted and the hold released, so the agent was
 * not charged and the call did not count against its caps, although the
 * upstream may already have done (and billed) the work, or sent the email or
 * SMS. An agent could spend past its caps by hanging up on purpose.
 *
 * So every request that may change something (POST, PUT, PATCH, DELETE) runs
 * in a fiber of its own, which the caller's fiber only waits for. A caller
 * that goes away stops waiting; the request goes on: the call is made,
 * settled at what it cost and counted against the caps, and an answer under
 * an `Idempotency-Key` is stored, so a retry with the same key gets the
 * answer of the call it paid for (not a second call). The answer itself goes
 * nowhere. A streamed answer that nobody will read is closed at once: the
 * upstream stops and the call is charged what was streamed, as when a caller
 * leaves in the middle of a stream (src/services/stream.ts).
 *
 * Reads (GET, HEAD, OPTIONS) change nothing and stop with their caller.
 *
 * When the server stops, a carried request gets the same grace as requests
 * whose callers still wait (counted from the start of the shutdown, see
 * `markShutdownStart` in server.ts); one still running at its end is interrupted, which
 * releases its hold, as for the others.
 */

const CARRIED_METHODS: ReadonlySet<string> = new Set(["POST", "PUT", "PATCH", "DELETE"])

export class CarriedRequests extends Context.Service<CarriedRequests, {
  /** Runs `app` in a fiber of its own when the request may change something (see above). */
  readonly carry: <E, R>(
    app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
  ) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest>
  /** The server has begun to stop: the grace of carried requests is counted from now. */
  readonly shutdownStarted: Effect.Effect<void>
}>()("spendgate/http/CarriedRequests") {
  /**
   * The carried requests of one server. When this layer's scope closes, the
   * ones still running get until `graceMs` after `shutdownStarted` (after now
   * if it was not called), then are interrupted.
   */
  static readonly layer = (graceMs: number): Layer.Layer<CarriedRequests> =>
    Layer.effect(
      CarriedRequests,
      Effect.gen(function*() {
        const fibers = yield* FiberSet.make<HttpServerResponse.HttpServerResponse, unknown>()
        let shutdownAt: number | undefined
        // Added after the set: runs before the set's own finalizer, which interrupts what is left.
        yield* Effect.addFinalizer(() =>
          Effect.gen(function*() {
            const now = yield* Clock.currentTimeMillis
            const left = Math.max(0, (shutdownAt ?? now) + graceMs - now)
            if (left > 0) yield* Effect.timeoutOption(FiberSet.awaitEmpty(fibers), left)
          })
        )

        const carry = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
          Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
            CARRIED_METHODS.has(request.method) ? carried(app, request) : app)

        const carried = <E, R>(
          app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>,
          request: HttpServerRequest.HttpServerRequest
        ) =>
          Effect.suspend(() => {
            // Whichever of the two sees the other's mark closes an answer nobody will read:
            // one of them always does, and only one.
            let callerGone = false
            let outcome: Exit.Exit<HttpServerResponse.HttpServerResponse, E> | undefined
            const own = Effect.onExit(app, (exit) => {
              outcome = exit
              return callerGone ? unread(request, exit) : Effect.void
            })
            return Effect.flatMap(FiberSet.run(fibers, own), (fiber) =>
              // The router runs its global middleware uninterruptibly (only a route's own handler
              // is interruptible): the wait is made interruptible, so that a caller's going away
              // (or the end of a shutdown's grace) ends the wait at once, and only the wait.
              Effect.onInterrupt(Effect.interruptible(Fiber.join(fiber)), () => {
                callerGone = true
                return outcome === undefined ? Effect.void : unread(request, outcome)
              }))
          })

        return CarriedRequests.of({
          carry,
          shutdownStarted: Effect.flatMap(Clock.currentTimeMillis, (now) =>
            Effect.sync(() => {
              shutdownAt ??= now
            }))
        })
      })
    )
}

/** What becomes of an answer whose caller went away: a stream is closed (its producer stops); a line says so. */
const unread = <E>(request: HttpServerRequest.HttpServerRequest, exit: Exit.Exit<HttpServerResponse.HttpServerResponse, E>) => {
  const path = request.url.split("?")[0]!
  if (Exit.isFailure(exit)) {
    return Effect.logInfo(`${request.method} ${path}: its caller went away; carried to its end, which failed`)
  }
  const response = exit.value
  const line = Effect.logInfo(`${request.method} ${path}: its caller went away; carried to its end (${response.status})`)
  if (response.body._tag !== "Stream") return line
  // Opening the stream and closing it at once runs its finalizers (a proxied stream's stops the upstream).
  return Effect.andThen(Effect.scoped(Effect.ignore(Stream.toPull(response.body.stream))), line)
}

/**
 * The router's outermost middleware: every route, and every middleware of the
 * API (authentication, idempotency keys), runs inside the carried fiber. It
 * must be added before any other global middleware: the router applies them
 * in the order added, the first outermost.
 */
export const carryMiddleware = HttpRouter.middleware(
  Effect.map(CarriedRequests, (carried) => carried.carry),
  { global: true }
)
