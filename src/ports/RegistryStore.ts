import { Context, type Effect, type Option } from "effect"
import type { AccountId } from "../domain/ids.ts"
import type { Submission, SubmissionStatus } from "../services/Service.ts"
import type { Page, PageRequest } from "./Store.ts"

/** Storage of registry submissions. Slugs are unique among pending and approved submissions. */
export class RegistryStore extends Context.Service<RegistryStore, {
  /** "SlugTaken" when a pending or approved submission has the slug already. */
  readonly insert: (submission: Submission) => Effect.Effect<"Inserted" | "SlugTaken">
  readonly get: (id: string) => Effect.Effect<Option.Option<Submission>>
  /** Newest first; `accountId` limits to one account. */
  readonly list: (
    filter: { readonly accountId?: AccountId | undefined; readonly status?: SubmissionStatus | undefined },
    page: PageRequest
  ) => Effect.Effect<Page<Submission>>
  /** Moves a pending submission to approved or rejected; None when it is not pending. */
  readonly review: (
    id: string,
    decision: { readonly status: "approved" | "rejected"; readonly note: string | null; readonly at: Date }
  ) => Effect.Effect<Option.Option<Submission>>
  readonly approved: Effect.Effect<ReadonlyArray<Submission>>
}>()("spendgate/RegistryStore") {}
