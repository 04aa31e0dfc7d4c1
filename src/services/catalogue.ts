import { Effect } from "effect"
import { NotFound } from "../domain/errors.ts"
import type { RegistryStore } from "../ports/RegistryStore.ts"
import { serviceFromSubmission } from "./registry.ts"
import type { Service, Submission } from "./Service.ts"

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
  const operatorSlugs = new Set(operatorServices.map((s) => s.slug))

  // Built once per list of approved submissions: a store that serves the
  // same list again (the SQL store's cache) gets the same catalogue back.
  let built: {
    readonly approved: ReadonlyArray<Submission>
    readonly all: ReadonlyArray<Service>
    readonly bySlug: ReadonlyMap<string, Service>
  } | undefined
  const build = (approved: ReadonlyArray<Submission>) => {
    if (built !== undefined && built.approved === approved) return built
    const all = [
      ...operatorServices,
      ...approved.map(serviceFromSubmission).filter((s) => !operatorSlugs.has(s.slug))
    ]
    const bySlug = new Map<string, Service>()
    // The first of a slug wins, as a search from the front would find it.
    for (const service of all) if (!bySlug.has(service.slug)) bySlug.set(service.slug, service)
    built = { approved, all, bySlug }
    return built
  }

  const list = Effect.map(registry.approved, (approved) => build(approved).all)

  const get = (slug: string) =>
    Effect.flatMap(registry.approved, (approved) => {
      const found = build(approved).bySlug.get(slug)
      return found === undefined ? Effect.fail(new NotFound({ resource: `Service ${slug.slice(0, 64)}` })) : Effect.succeed(found)
    })

  return { list, get }
}
