import { Cause, Effect } from "effect"
import { RailError } from "../../../src/ports/Rails.ts"

/** The LND rail's failures: one line, clipped, as a `RailError`. */

export const RAIL_NAME = "lnd"

const MAX_MESSAGE_LENGTH = 300

export const railError = (message: string) => new RailError({ rail: RAIL_NAME, message })

export const clip = (text: string): string => {
  const oneLine = text.replace(/\s+/g, " ").trim()
  return oneLine.length > MAX_MESSAGE_LENGTH ? `${oneLine.slice(0, MAX_MESSAGE_LENGTH)}…` : oneLine
}

export const describeCause = (cause: unknown): string => {
  if (cause instanceof Error) {
    // Node and undici errors carry a code (ECONNREFUSED, UND_ERR_SOCKET, …) and sometimes a cause.
    const code = (cause as { code?: unknown }).code
    const inner = (cause as { cause?: unknown }).cause
    const detail = typeof code === "string" && !cause.message.includes(code) ? `${code}: ${cause.message}` : cause.message
    return inner instanceof Error && inner.message !== cause.message ? `${detail} (${describeCause(inner)})` : detail
  }
  return String(cause)
}

/** A failure as a `RailError` (kept as is when it already is one). */
export const toRailError = (context: string, cause: Cause.Cause<unknown>): RailError => {
  const error = Cause.squash(cause)
  return error instanceof RailError ? error : railError(clip(`${context}: ${describeCause(error)}`))
}

/** Anything but an interruption becomes a `RailError`, so that it leads to a reconnection. */
export const asRailError = (context: string) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, RailError, R> =>
  Effect.catchCause(effect, (cause) =>
    Cause.hasInterruptsOnly(cause)
      ? Effect.failCause(cause as Cause.Cause<never>)
      : Effect.fail(toRailError(context, cause)))
