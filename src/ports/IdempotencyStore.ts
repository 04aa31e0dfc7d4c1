import { Context, type Effect } from "effect"

/**
 * The storage port of idempotency keys. Implementations: SQL (PostgreSQL and
 * embedded PGlite, adapters/sql) and in-memory (adapters/memory); both pass
 * test/ports/idempotency.contract.ts.
 *
 * A row is identified by (scope, key). It is either in progress (claimed, no
 * response yet) or completed (holding the response to replay). A row whose
 * `expiresAt` is at or before the caller's `now` counts as absent.
 *
 * As with the Store port, storage failures are defects and every method is
 * atomic on its own: of any number of concurrent claims of one free key,
 * exactly one is `Claimed`.
 */

export interface IdempotencyClaim {
  readonly scope: string
  readonly key: string
  /** Lower-case hex SHA-256 of the request (method, target, body bytes). */
  readonly requestHash: string
  readonly now: Date
  /** When an unfinished claim lapses; `complete` sets the row's final expiry. */
  readonly expiresAt: Date
}

export type ClaimResult =
  /** The key was free (or expired): the caller owns it and must complete or release it. */
  | { readonly _tag: "Claimed" }
  /** The same request completed before: its stored response. */
  | { readonly _tag: "Replay"; readonly status: number; readonly body: string }
  /** The same request is still being executed by someone else. */
  | { readonly _tag: "InProgress" }
  /** The key is held (in progress or completed) by a different request. */
  | { readonly _tag: "Mismatch" }

export interface IdempotencyStoreShape {
  /** Takes the key, or reports what holds it. An expired row is replaced. */
  readonly claim: (input: IdempotencyClaim) => Effect.Effect<ClaimResult>
  /**
   * Stores the response of an in-progress claim and sets its final expiry.
   * Does nothing when the row is gone or already completed.
   */
  readonly complete: (input: {
    readonly scope: string
    readonly key: string
    readonly status: number
    readonly body: string
    readonly expiresAt: Date
  }) => Effect.Effect<void>
  /** Frees an in-progress claim. A completed row is never removed by this. */
  readonly release: (input: { readonly scope: string; readonly key: string }) => Effect.Effect<void>
  /** Deletes at most `limit` rows expired at `now`; returns how many it deleted. */
  readonly purgeExpired: (now: Date, limit: number) => Effect.Effect<number>
}

export class IdempotencyStore
  extends Context.Service<IdempotencyStore, IdempotencyStoreShape>()("spendgate/IdempotencyStore")
{}
