import { Effect } from "effect"
import { NotFound } from "../domain/errors.ts"
import type { RegistryStore } from "../ports/RegistryStore.ts"
import { serviceFromSubmission } from "./registry.ts"
import type { Service } from "./Service.ts"

/**
 * The service catalogue: the operator's services, then the approved registry
 * services (an operator slug is never shadowed by a registry one).
 */
export interface Catalogue {
  readonly list: Effect.Effect<ReadonlyArray<Service>>
  readonly get: (slug: string) => Effect.Effect<Service, NotFound>
}

export const makeCatalogue = (deps: {
  readonly operatorServices: ReadonlyArray<Service>
  readonly registry: RegistryStore["Service"]
}): Catalogue => {
  const { operatorServices, registry } = deps
  const list = Effect.map(registry.approved, (approved) => [
    ...operatorServices,
    ...approved.map(serviceFromSubmission).filter((s) => !operatorServices.some((o) => o.slug === s.slug))
  ])

  const get = (slug: string) =>
    Effect.flatMap(list, (all) => {
      const found = all.find((s) => s.slug === slug)
      return found === undefined ? Effect.fail(new NotFound({ resource: `Service ${slug.slice(0, 64)}` })) : Effect.succeed(found)
    })

  return { list, get }
}
