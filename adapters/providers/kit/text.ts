/**
 * Text and failures every provider shares: one-line clipping, secrets kept
 * out of messages, a `ProviderFailure` built in one place, defects turned into
 * `unavailable`, and what a transport error's cause says.
 */
import { Effect, Redacted } from "effect"
import { ProviderFailure } from "../../../src/capabilities/Provider.ts"

export type FailureReason = ProviderFailure["reason"]

/** The upstream's own error message is cut to this many characters. */
export const MAX_UPSTREAM_MESSAGE_CHARS = 300
/** A key shorter than this is not scrubbed from messages (see `keySecrets`). */
const MIN_SECRET_CHARS = 8

// ---------------------------------------------------------------------------
// Text
// ---------------------------------------------------------------------------

/**
 * One line (each run of whitespace and control characters as one space), at
 * most `max` characters with the ellipsis, never cut inside a surrogate pair.
 */
export const clip = (text: string, max: number = MAX_UPSTREAM_MESSAGE_CHARS): string => {
  const line = text.replace(/[\s\u0000-\u001f\u007f]+/g, " ").trim()
  if (line.length <= max) return line
  let end = max - 1
  const last = line.charCodeAt(end - 1)
  if (last >= 0xd800 && last <= 0xdbff) end -= 1
  return `${line.slice(0, end)}…`
}

/** `text` with every secret replaced by "[redacted]". */
export const redact = (text: string, secrets: ReadonlyArray<string>): string =>
  secrets.reduce((acc, secret) => (secret === "" ? acc : acc.split(secret).join("[redacted]")), text)

/**
 * The secrets of an API key, for an upstream that may take none: a key
 * shorter than 8 characters is a placeholder ("none", "x") for a self-hosted
 * server, and replacing it would mangle ordinary text.
 */
export const keySecrets = (apiKey: Redacted.Redacted<string> | undefined): ReadonlyArray<string> => {
  const key = apiKey === undefined ? "" : Redacted.value(apiKey)
  return key.length >= MIN_SECRET_CHARS ? [key] : []
}

/** A failure of `provider`; no secret appears in its message. */
export const failure = (
  provider: string,
  reason: FailureReason,
  message: string,
  secrets: ReadonlyArray<string> = []
): ProviderFailure => new ProviderFailure({ provider, reason, message: redact(message, secrets) })

/**
 * A defect as an `unavailable` failure, logged. A bug in the HTTP stack (or in
 * an adapter) must not surface as a defect of the call: the hold is released
 * and the next provider tried, as for any upstream failure.
 */
export const defectsUnavailable = (provider: string, secrets: ReadonlyArray<string> = []) =>
<A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | ProviderFailure, R> =>
  self.pipe(Effect.catchDefect((defect) => {
    const text = clip(redact(String(defect), secrets), 200)
    return Effect.logError(`${provider}: unexpected failure`, text).pipe(
      Effect.andThen(Effect.fail(failure(provider, "unavailable", `unexpected failure: ${text}`)))
    )
  }))

/** The failing part of a transport error: its code (ECONNREFUSED, UND_ERR_SOCKET, ...), on it or an inner cause, else its message. */
export const describeCause = (cause: unknown): string | undefined => {
  if (!(cause instanceof Error)) return undefined
  const code = (cause as { code?: unknown }).code
  if (typeof code === "string") return code
  return describeCause((cause as { cause?: unknown }).cause) ?? cause.message
}

/** What a connection's failure says, for a message: ": " and its code or message clipped to 120 characters; "" when nothing. */
export const causeDetail = (cause: unknown): string => {
  const described = describeCause(cause)
  return described === undefined ? "" : `: ${clip(described, 120)}`
}
