import { Context, Effect, Option } from "effect"
import type { Agent, Policy } from "../../src/domain/Agent.ts"
import type { Submission } from "../../src/services/Service.ts"

/**
 * What the SQL store serves from memory instead of reading it on every
 * request: agents by key hash and by id (authentication, the access check,
 * policy reads) and the approved registry submissions (the service
 * catalogue). Money never depends on it: the reserve reads the agent, its
 * killed flag and its policy again under the wallet lock, whatever this
 * cache says (adapters/sql/SqlLedger.ts).
 *
 * Invalidation (docs/performance.md, "Caches"):
 * - a write made through this process's store drops the entries it changes
 *   once it has committed, before the store call returns, so the next
 *   request on this process reads them again;
 * - on PostgreSQL, a trigger sends a notification with every change of an
 *   agent or a registry submission (migration 0013), delivered at commit to
 *   every process listening (adapters/sql/cacheFeed.ts);
 * - while this process is not listening (starting, connection lost), the
 *   cache serves nothing and keeps nothing: every read goes to the database.
 *
 * A load that started before an invalidation never fills the cache after
 * it: every invalidation moves a generation counter, and a load stores its
 * result only if the counter has not moved since it started.
 */

/** An agent as stored, with the key hashes that find it. */
export interface CachedAgent {
  readonly agent: Agent
  readonly policy: Policy
  readonly keyHash: string
  readonly prevKeyHash: string | null
  readonly prevKeyExpiresAt: Date | null
}

/** The most agents kept; the oldest entry goes first beyond it. */
export const MAX_CACHED_AGENTS = 10_000

export interface ReadCacheStats {
  readonly serving: boolean
  readonly agents: number
  readonly hits: number
  readonly misses: number
  readonly invalidations: number
}

export interface ReadCacheShape {
  /** The agent one of whose keys has this hash (as stored: deleted or not, the previous key expired or not). */
  readonly agentByKey: (
    keyHash: string,
    load: Effect.Effect<Option.Option<CachedAgent>>
  ) => Effect.Effect<Option.Option<CachedAgent>>
  readonly agentById: (
    agentId: string,
    load: Effect.Effect<Option.Option<CachedAgent>>
  ) => Effect.Effect<Option.Option<CachedAgent>>
  readonly approved: (load: Effect.Effect<ReadonlyArray<Submission>>) => Effect.Effect<ReadonlyArray<Submission>>
  /** Drops the agent's entry (and its keys). Call it once the change has committed. */
  readonly invalidateAgent: (agentId: string) => void
  readonly invalidateRegistry: () => void
  /** Records a lastActiveAt write in place (it changes nothing that authentication or spending decides on). */
  readonly touched: (agentId: string, at: Date, staleBefore: Date) => void
  /** Drops everything; `serving` false: nothing is served or kept until it is set true again. */
  readonly reset: (serving: boolean) => void
  readonly stats: () => ReadCacheStats
}

export class ReadCache extends Context.Service<ReadCache, ReadCacheShape>()("spendgate/sql/ReadCache") {}

export const makeReadCache = (maxAgents: number = MAX_CACHED_AGENTS): ReadCacheShape => {
  let serving = false
  let generation = 0
  let hits = 0
  let misses = 0
  let invalidations = 0
  const agents = new Map<string, CachedAgent>()
  const byKey = new Map<string, string>()
  let approved: ReadonlyArray<Submission> | undefined

  const dropAgent = (agentId: string) => {
    const entry = agents.get(agentId)
    if (entry === undefined) return
    agents.delete(agentId)
    if (byKey.get(entry.keyHash) === agentId) byKey.delete(entry.keyHash)
    if (entry.prevKeyHash !== null && byKey.get(entry.prevKeyHash) === agentId) byKey.delete(entry.prevKeyHash)
  }

  const putAgent = (startedAt: number, entry: CachedAgent) => {
    if (!serving || startedAt !== generation) return
    const id = entry.agent.id
    dropAgent(id)
    while (agents.size >= maxAgents) {
      const oldest = agents.keys().next()
      if (oldest.done === true) break
      dropAgent(oldest.value)
    }
    agents.set(id, entry)
    byKey.set(entry.keyHash, id)
    if (entry.prevKeyHash !== null) byKey.set(entry.prevKeyHash, id)
  }

  const loadAgent = (startedAt: number, load: Effect.Effect<Option.Option<CachedAgent>>) => {
    misses++
    return Effect.map(load, (found) => {
      if (Option.isSome(found)) putAgent(startedAt, found.value)
      return found
    })
  }

  const bump = () => {
    generation++
    invalidations++
  }

  return {
    agentByKey: (keyHash, load) =>
      Effect.suspend(() => {
        if (serving) {
          const id = byKey.get(keyHash)
          const entry = id === undefined ? undefined : agents.get(id)
          if (entry !== undefined && (entry.keyHash === keyHash || entry.prevKeyHash === keyHash)) {
            hits++
            return Effect.succeed(Option.some(entry))
          }
        }
        return loadAgent(generation, load)
      }),
    agentById: (agentId, load) =>
      Effect.suspend(() => {
        const entry = serving ? agents.get(agentId) : undefined
        if (entry !== undefined) {
          hits++
          return Effect.succeed(Option.some(entry))
        }
        return loadAgent(generation, load)
      }),
    approved: (load) =>
      Effect.suspend(() => {
        if (serving && approved !== undefined) {
          hits++
          return Effect.succeed(approved)
        }
        misses++
        const startedAt = generation
        return Effect.map(load, (list) => {
          if (serving && startedAt === generation) approved = list
          return list
        })
      }),
    invalidateAgent: (agentId) => {
      bump()
      dropAgent(agentId)
    },
    invalidateRegistry: () => {
      bump()
      approved = undefined
    },
    touched: (agentId, at, staleBefore) => {
      const entry = agents.get(agentId)
      if (entry === undefined) return
      const last = entry.agent.lastActiveAt
      if (last !== null && last.getTime() >= staleBefore.getTime()) return
      agents.set(agentId, { ...entry, agent: { ...entry.agent, lastActiveAt: at } })
    },
    reset: (next) => {
      bump()
      serving = next
      agents.clear()
      byKey.clear()
      approved = undefined
    },
    stats: () => ({ serving, agents: agents.size, hits, misses, invalidations })
  }
}
