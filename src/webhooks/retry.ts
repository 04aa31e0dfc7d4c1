/**
 * When a failed delivery is tried again: exponential backoff from
 * `baseDelayMs`, doubled per attempt up to `maxDelayMs`, with jitter (the
 * delay is drawn uniformly between half and all of it, so a burst of
 * failures does not come back in lockstep). Retries stop once the next
 * attempt would fall after `windowMs` (3 days) from the window's start: the
 * delivery is then given up (null).
 */

export interface RetryRule {
  readonly baseDelayMs: number
  readonly maxDelayMs: number
  readonly windowMs: number
}

export const defaultRetryRule: RetryRule = {
  baseDelayMs: 10_000,
  maxDelayMs: 6 * 60 * 60_000,
  windowMs: 3 * 24 * 60 * 60_000
}

/** Bounded: the exponent stops growing long before it could overflow. */
export const backoffMs = (rule: RetryRule, attempt: number, random: number): number => {
  const exponent = Math.min(Math.max(attempt - 1, 0), 30)
  const full = Math.min(rule.baseDelayMs * 2 ** exponent, rule.maxDelayMs)
  const unit = Math.min(Math.max(random, 0), 1)
  return Math.round(full / 2 + (full / 2) * unit)
}

/** `attempt` is the number of the attempt that just failed (1 for the first). */
export const nextAttemptAt = (
  rule: RetryRule,
  attempt: number,
  windowStart: Date,
  now: Date,
  random: number
): Date | null => {
  const at = now.getTime() + backoffMs(rule, attempt, random)
  return at > windowStart.getTime() + rule.windowMs ? null : new Date(at)
}
