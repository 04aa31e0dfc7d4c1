import { Effect, Layer, Option } from "effect"
import { RegistryStore } from "../../src/ports/RegistryStore.ts"
import type { Submission } from "../../src/services/Service.ts"

/** In-memory registry submissions; each method is one synchronous, atomic step. */
export const makeMemoryRegistryStore = (): RegistryStore["Service"] => {
  const submissions = new Map<string, Submission>()
  const newestFirst = (a: Submission, b: Submission) =>
    b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)
  return {
    insert: (submission) =>
      Effect.sync(() => {
        const taken = [...submissions.values()].some((s) => s.slug === submission.slug && s.status !== "rejected")
        if (taken) return "SlugTaken" as const
        submissions.set(submission.id, submission)
        return "Inserted" as const
      }),
    get: (id) => Effect.sync(() => Option.fromNullishOr(submissions.get(id))),
    list: (filter, page) =>
      Effect.sync(() => {
        const all = [...submissions.values()]
          .filter((s) =>
            (filter.accountId === undefined || s.accountId === filter.accountId) &&
            (filter.status === undefined || s.status === filter.status)
          )
          .sort(newestFirst)
        return { items: all.slice(page.offset, page.offset + page.limit), total: all.length }
      }),
    review: (id, decision) =>
      Effect.sync(() => {
        const current = submissions.get(id)
        if (current === undefined || current.status !== "pending") return Option.none()
        const reviewed: Submission = { ...current, status: decision.status, reviewNote: decision.note, reviewedAt: decision.at }
        submissions.set(id, reviewed)
        return Option.some(reviewed)
      }),
    approved: Effect.sync(() => [...submissions.values()].filter((s) => s.status === "approved").sort(newestFirst))
  }
}

export const layer: Layer.Layer<RegistryStore> = Layer.sync(RegistryStore, makeMemoryRegistryStore)
