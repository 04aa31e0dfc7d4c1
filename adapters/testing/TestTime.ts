import { Clock, Context, Duration, Effect, Option } from "effect"
import { TestClock } from "effect/testing"

/**
 * Moving the test's time, on the TestClock that TestGateway provides (or
 * any TestClock in scope). Sleeps that end on the way wake in order (a
 * scripted provider latency, a timeout). With a TestGateway, the clock
 * moves a sweep interval (one minute) at a time and, at each step, the
 * gateway's two background sweeps run to completion: invoice expiry and the
 * recovery of expired holds, the same effects a server repeats every
 * minute. So when an advance returns, every sweep due by then has been
 * applied, whatever asynchronous work it did. (`TestClock.adjust` alone
 * moves the clock and runs no sweep.) Time only moves forward: a target
 * already past leaves the clock where it is.
 */

const MS_PER_DAY = 86_400_000

/**
 * The background sweeps that moving the clock runs, and how often a server
 * runs them. TestGateway provides it; without it, moving the clock runs none.
 */
export class Sweeps extends Context.Service<Sweeps, {
  readonly everyMs: number
  readonly run: Effect.Effect<void>
}>()("spendgate/testing/Sweeps") {}

/** The current instant, by the Clock. */
export const now: Effect.Effect<Date> = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

/** Moves the clock forward to `instant`, if it is not there yet. */
export const advanceTo = (instant: Date | number): Effect.Effect<void> =>
  Effect.gen(function*() {
    const target = typeof instant === "number" ? instant : instant.getTime()
    if (!Number.isFinite(target)) return yield* Effect.die(new Error("advanceTo needs a valid instant"))
    let at = yield* Clock.currentTimeMillis
    const sweeps = yield* Effect.serviceOption(Sweeps)
    if (Option.isSome(sweeps)) {
      const every = sweeps.value.everyMs
      for (let step = (Math.floor(at / every) + 1) * every; step <= target; step += every) {
        yield* TestClock.setTime(step)
        yield* sweeps.value.run
        at = step
      }
    }
    if (at < target) yield* TestClock.setTime(target)
  })

/** Moves the clock forward by `duration` (`"5 minutes"`, `Duration.hours(2)`, milliseconds). */
export const advance = (duration: Duration.Input): Effect.Effect<void> => {
  const ms = Duration.toMillis(Duration.fromInputUnsafe(duration))
  if (!(ms >= 0)) return Effect.die(new Error(`Time only moves forward: cannot advance by ${ms} ms`))
  return Effect.flatMap(Clock.currentTimeMillis, (at) => advanceTo(at + ms))
}

/**
 * Moves the clock to the instant an invoice expires. From that instant it
 * is expired (a payment then is late), and the expiry sweep writes it at its
 * next run (within a minute).
 */
export const advanceToExpiry = (invoice: { readonly expiresAt: Date }): Effect.Effect<void> => advanceTo(invoice.expiresAt)

/** The next midnight UTC strictly after `at`. */
export const nextMidnightUtc = (at: Date): Date => new Date((Math.floor(at.getTime() / MS_PER_DAY) + 1) * MS_PER_DAY)

/** Moves the clock to the next midnight UTC: a new day, so daily caps start again from zero. */
export const advanceToNextMidnightUtc: Effect.Effect<void> = Effect.flatMap(now, (at) => advanceTo(nextMidnightUtc(at)))
