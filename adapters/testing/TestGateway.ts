import { Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { Agents } from "../../src/agents/Agents.ts"
import { Policies } from "../../src/agents/Policies.ts"
import type { Principal } from "../../src/domain/Agent.ts"
import type { InvalidAmount } from "../../src/domain/errors.ts"
import { Funding, type InvoiceView } from "../../src/funding/Funding.ts"
import { Spend } from "../../src/wallet/Spend.ts"
import type { PaymentOutcome, RailError } from "../../src/ports/Rails.ts"
import type { PolicyPatch } from "../../src/ports/Store.ts"
import * as Spendgate from "../embed/Spendgate.ts"
import * as FakeRails from "./FakeRails.ts"
import { TestRails } from "./FakeRails.ts"
import { Sweeps } from "./TestTime.ts"

/**
 * A whole gateway for a test, in one line: `Spendgate.memory()` on a
 * TestClock, with the kit's payment rails.
 *
 * ```ts
 * const search = FakeProvider.make("search", { priceMicroUsd: 4_000n })
 * const program = Effect.gen(function*() { ... })
 * await Effect.runPromise(Effect.provide(program, TestGateway.layer({ providers: [search] })))
 * ```
 *
 * Time starts at `startAt` and moves only when the test moves it. Moving
 * it with TestTime runs the background jobs of a server at their cadence
 * (every minute), so moving past an invoice's expiry expires the invoice
 * and moving past a hold's lifetime (15 minutes) releases the hold — each
 * sweep finished before the move returns, so tests are deterministic. Each
 * `Effect.provide` of the layer builds a fresh, empty gateway.
 */

/** What the layer provides: the ready gateway and the rails a test pays through (`yield* TestRails`). */
export type Provided = Spendgate.Provided | TestRails | Sweeps

export interface Options extends Omit<Spendgate.Options, "rails" | "background" | "publicUrl"> {
  /** The rails to pay through (default: new ones, reachable as `yield* TestRails`; `FakeRails.make({ publicUrl })` sets checkout links). */
  readonly rails?: FakeRails.FakeRails
  /** Where the clock starts (default 2026-01-01T12:00:00Z, noon UTC). */
  readonly startAt?: Date | string | number
  /** Run the expiry and recovery sweeps when TestTime moves the clock (default true). */
  readonly background?: boolean
}

/** How often a server runs its sweeps (Spend.sweeper and Funding.expirer defaults). */
export const SWEEP_EVERY_MS = 60_000

/** The sweeps a server's background jobs repeat: the recovery of expired holds, then invoice expiry. */
const sweeps = (enabled: boolean): Layer.Layer<Sweeps, never, Spend | Funding> =>
  Layer.effect(
    Sweeps,
    Effect.gen(function*() {
      const spend = yield* Spend
      const funding = yield* Funding
      return Sweeps.of({
        everyMs: SWEEP_EVERY_MS,
        run: enabled ? Effect.asVoid(Effect.andThen(spend.sweep, funding.expireDue)) : Effect.void
      })
    })
  )

export const DEFAULT_START = "2026-01-01T12:00:00.000Z"

const startMillis = (startAt: Date | string | number): number => {
  const ms = startAt instanceof Date ? startAt.getTime() : typeof startAt === "number" ? startAt : Date.parse(startAt)
  if (!Number.isFinite(ms)) throw new Error(`TestGateway: startAt is not a valid instant: ${String(startAt)}`)
  return ms
}

/** The gateway on a TestClock; nothing else to provide. */
export const layer = (options: Options = {}): Layer.Layer<Provided> => {
  const { rails = FakeRails.make(), startAt = DEFAULT_START, background = true, ...rest } = options
  const start = startMillis(startAt)
  const clock = Layer.effectDiscard(TestClock.setTime(start)).pipe(Layer.provideMerge(TestClock.layer()))
  // The server's background fibers are replaced by sweeps run as the clock moves, to completion.
  return Layer.merge(sweeps(background), Layer.succeed(TestRails, rails)).pipe(
    Layer.provideMerge(Spendgate.memory({ ...rest, rails: rails.layer, background: false })),
    Layer.provideMerge(clock)
  )
}

/** A new account; returns its owner agent, authenticated. */
export const signup = (name = "owner"): Effect.Effect<Principal, never, Agents> =>
  Effect.gen(function*() {
    const agents = yield* Agents
    const account = yield* agents.signup({ name })
    return yield* Effect.orDie(agents.authenticate(account.apiKey))
  })

/** A new agent of the owner's account under `policy` (default: no limits); returns it authenticated. */
export const worker = (
  owner: Principal,
  options: { readonly name?: string; readonly policy?: PolicyPatch } = {}
): Effect.Effect<Principal, never, Agents | Policies> =>
  Effect.gen(function*() {
    const agents = yield* Agents
    const created = yield* Effect.orDie(agents.create(owner, { name: options.name ?? "worker" }))
    if (options.policy !== undefined) yield* Effect.orDie((yield* Policies).replace(owner, created.agent.id, options.policy))
    return yield* Effect.orDie(agents.authenticate(created.apiKey))
  })

/**
 * Funds the owner's wallet the way a user does: a card checkout
 * (`Funding.fundCard`, $10 minimum) or a Lightning invoice
 * (`Funding.fundLightning`), paid at once through the test's rails.
 */
export const fund = (
  owner: Principal,
  amount: { readonly usdCents: number } | { readonly sats: number }
): Effect.Effect<{ readonly invoice: InvoiceView; readonly outcome: PaymentOutcome }, InvalidAmount | RailError, Provided> =>
  Effect.gen(function*() {
    const funding = yield* Funding
    const rails = yield* TestRails
    const invoice = "usdCents" in amount
      ? yield* Effect.catchTag(funding.fundCard(owner, amount.usdCents), "Forbidden", Effect.die)
      : yield* Effect.catchTag(funding.fundLightning(owner, amount.sats), "Forbidden", Effect.die)
    const outcome = yield* rails.pay(invoice)
    return { invoice, outcome }
  })

/** A new account whose usd pocket was funded by card with `usdCents` (at least 1000): its owner. */
export const fundedOwner = (usdCents: number, name = "owner"): Effect.Effect<Principal, InvalidAmount | RailError, Provided> =>
  Effect.gen(function*() {
    const owner = yield* signup(name)
    const { outcome } = yield* fund(owner, { usdCents })
    if (outcome !== "credited") return yield* Effect.die(new Error(`Funding ${usdCents} cents was ${outcome}, not credited`))
    return owner
  })
