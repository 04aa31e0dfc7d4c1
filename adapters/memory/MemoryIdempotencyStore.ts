import { Effect, Layer } from "effect"
import { type ClaimResult, IdempotencyStore, type IdempotencyStoreShape } from "../../src/ports/IdempotencyStore.ts"

/**
 * In-memory idempotency keys. Each method is one `Effect.sync`, so it is
 * atomic with respect to every other fiber, like the SQL store's statements.
 */

interface Entry {
  readonly requestHash: string
  expiresAt: number
  response: { readonly status: number; readonly body: string } | undefined
}

export const makeMemoryIdempotencyStore = (): IdempotencyStoreShape => {
  const scopes = new Map<string, Map<string, Entry>>()

  const live = (scope: string, key: string, nowMs: number): Entry | undefined => {
    const entry = scopes.get(scope)?.get(key)
    return entry !== undefined && entry.expiresAt > nowMs ? entry : undefined
  }

  const remove = (scope: string, key: string) => {
    const keys = scopes.get(scope)
    if (keys === undefined) return
    keys.delete(key)
    if (keys.size === 0) scopes.delete(scope)
  }

  return {
    claim: ({ scope, key, requestHash, now, expiresAt }) =>
      Effect.sync((): ClaimResult => {
        const existing = live(scope, key, now.getTime())
        if (existing === undefined) {
          let keys = scopes.get(scope)
          if (keys === undefined) scopes.set(scope, keys = new Map())
          keys.set(key, { requestHash, expiresAt: expiresAt.getTime(), response: undefined })
          return { _tag: "Claimed" }
        }
        if (existing.requestHash !== requestHash) return { _tag: "Mismatch" }
        if (existing.response === undefined) return { _tag: "InProgress" }
        return { _tag: "Replay", status: existing.response.status, body: existing.response.body }
      }),
    complete: ({ scope, key, status, body, expiresAt }) =>
      Effect.sync(() => {
        const entry = scopes.get(scope)?.get(key)
        if (entry === undefined || entry.response !== undefined) return
        entry.response = { status, body }
        entry.expiresAt = expiresAt.getTime()
      }),
    release: ({ scope, key }) =>
      Effect.sync(() => {
        const entry = scopes.get(scope)?.get(key)
        if (entry !== undefined && entry.response === undefined) remove(scope, key)
      }),
    purgeExpired: (now, limit) =>
      Effect.sync(() => {
        let purged = 0
        for (const [scope, keys] of scopes) {
          for (const [key, entry] of keys) {
            if (purged >= limit) return purged
            if (entry.expiresAt <= now.getTime()) {
              remove(scope, key)
              purged++
            }
          }
        }
        return purged
      })
  }
}

export const layer: Layer.Layer<IdempotencyStore> = Layer.sync(IdempotencyStore, makeMemoryIdempotencyStore)
