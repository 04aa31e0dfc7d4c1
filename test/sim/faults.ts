import { Cause, Context, Effect, Layer } from "effect"
import type { AdminStore } from "../../src/ports/AdminStore.ts"
import type { IdempotencyStore } from "../../src/ports/IdempotencyStore.ts"
import type { RegistryStore } from "../../src/ports/RegistryStore.ts"
import { Store, type StoreShape } from "../../src/ports/Store.ts"
import type { Prng } from "../support/prng.ts"

/**
 * A Store that fails on purpose. While `plan.on`, each call of any method
 * dies (the port's failure mode: storage failures are defects) with
 * probability `plan.probability`, either before it reaches storage (nothing
 * happened) or after (it happened, and the answer was lost), chosen by the
 * simulation's seeded generator.
 */
export class InjectedFault extends Error {
  readonly _tag = "InjectedFault"
  readonly method: string
  readonly when: "before" | "after"
  constructor(method: string, when: "before" | "after") {
    super(`injected fault ${when} Store.${method}`)
    this.method = method
    this.when = when
  }
}

export interface FaultPlan {
  on: boolean
  probability: number
  readonly rng: Prng
  injected: number
}

const inject = <A, E, R>(plan: FaultPlan, method: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.suspend(() => {
    if (plan.on && plan.rng.chance(plan.probability)) {
      plan.injected++
      return Effect.die(new InjectedFault(method, "before"))
    }
    return Effect.flatMap(effect, (value) => {
      if (plan.on && plan.rng.chance(plan.probability)) {
        plan.injected++
        return Effect.die(new InjectedFault(method, "after"))
      }
      return Effect.succeed(value)
    })
  })

export const faultyStoreShape = (inner: StoreShape, plan: FaultPlan): StoreShape => {
  const out: Record<string, unknown> = {}
  for (const [name, member] of Object.entries(inner)) {
    if (typeof member === "function") {
      out[name] = (...args: Array<unknown>) => inject(plan, name, (member as (...a: Array<unknown>) => Effect.Effect<unknown>)(...args))
    } else if (Effect.isEffect(member)) {
      out[name] = inject(plan, name, member)
    } else {
      out[name] = member
    }
  }
  return out as unknown as StoreShape
}

type Storage = Store | AdminStore | IdempotencyStore | RegistryStore

/** The given storage, with its Store replaced by the faulty one (the other ports are left alone). */
export const withFaults = <E>(base: Layer.Layer<Storage, E>, plan: FaultPlan): Layer.Layer<Storage, E> =>
  Layer.effectContext(
    Effect.gen(function*() {
      const context = yield* Layer.build(base)
      return Context.add(context, Store, faultyStoreShape(Context.get(context, Store), plan))
    })
  )

/** Whether a failure is only what the plan injected (or what the scripted providers crash with on purpose). */
export const onlyExpectedDefects = (cause: Cause.Cause<unknown>, expected: (defect: unknown) => boolean): boolean =>
  cause.reasons.every((reason) => !Cause.isDieReason(reason) || expected(reason.defect))
