import { Effect, Layer, Option } from "effect"
import type { Agent, Policy } from "../../src/domain/Agent.ts"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import { type AgentWithPolicy, type NewAgent, type Page, Store, type StoreShape } from "../../src/ports/Store.ts"

/**
 * In-memory store for embedding and fast tests. Every method runs
 * synchronously inside one `Effect.sync`, so each is atomic with respect to
 * every other fiber, exactly as the SQL store's transactions are. Nothing
 * survives the process.
 */

interface AgentEntry {
  agent: Agent
  policy: Policy
  readonly keyHash: string
}

const byNewest = (a: Agent, b: Agent) =>
  b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)

export const makeMemoryStore = (): StoreShape => {
  const accounts = new Map<AccountId, { readonly createdAt: Date }>()
  const agents = new Map<AgentId, AgentEntry>()
  const agentByKeyHash = new Map<string, AgentId>()

  const insertAgent = (input: NewAgent) => {
    if (agents.has(input.agent.id) || agentByKeyHash.has(input.keyHash)) {
      throw new Error("duplicate agent id or key hash")
    }
    if (!accounts.has(input.agent.accountId)) throw new Error("unknown account")
    agents.set(input.agent.id, { agent: input.agent, policy: input.policy, keyHash: input.keyHash })
    agentByKeyHash.set(input.keyHash, input.agent.id)
  }

  const entryIn = (accountId: AccountId, agentId: AgentId): AgentEntry | undefined => {
    const entry = agents.get(agentId)
    return entry !== undefined && entry.agent.accountId === accountId ? entry : undefined
  }

  return {
    ping: Effect.void,
    createAccount: ({ accountId, createdAt, owner }) =>
      Effect.sync(() => {
        if (accounts.has(accountId)) throw new Error("duplicate account id")
        accounts.set(accountId, { createdAt })
        try {
          insertAgent(owner)
        } catch (error) {
          accounts.delete(accountId)
          throw error
        }
      }),
    createAgent: (input) => Effect.sync(() => insertAgent(input)),
    findAgentByKeyHash: (keyHash) =>
      Effect.sync(() => {
        const id = agentByKeyHash.get(keyHash)
        return Option.fromNullishOr(id === undefined ? undefined : agents.get(id)?.agent)
      }),
    getAgent: (accountId, agentId) =>
      Effect.sync(() => {
        const entry = entryIn(accountId, agentId)
        return entry === undefined
          ? Option.none()
          : Option.some<AgentWithPolicy>({ agent: entry.agent, policy: entry.policy })
      }),
    listAgents: (accountId, page) =>
      Effect.sync((): Page<Agent> => {
        const all = [...agents.values()].map((e) => e.agent).filter((a) => a.accountId === accountId).sort(byNewest)
        return { items: all.slice(page.offset, page.offset + page.limit), total: all.length }
      }),
    updateAgent: (accountId, agentId, changes) =>
      Effect.sync(() => {
        const entry = entryIn(accountId, agentId)
        if (entry === undefined) return { _tag: "NotFound" as const }
        if (changes.killed === true && entry.agent.role === "owner" && !entry.agent.killed) {
          const otherLiveOwner = [...agents.values()].some((e) =>
            e.agent.accountId === accountId && e.agent.id !== agentId && e.agent.role === "owner" && !e.agent.killed
          )
          if (!otherLiveOwner) return { _tag: "LastLiveOwner" as const }
        }
        entry.agent = {
          ...entry.agent,
          ...(changes.name !== undefined ? { name: changes.name } : {}),
          ...(changes.killed !== undefined ? { killed: changes.killed } : {})
        }
        return { _tag: "Updated" as const, agent: entry.agent }
      }),
    touchAgent: (agentId, at, staleBefore) =>
      Effect.sync(() => {
        const entry = agents.get(agentId)
        if (entry === undefined) return
        const last = entry.agent.lastActiveAt
        if (last === null || last.getTime() < staleBefore.getTime()) entry.agent = { ...entry.agent, lastActiveAt: at }
      }),
    updatePolicy: (accountId, agentId, patch) =>
      Effect.sync(() => {
        const entry = entryIn(accountId, agentId)
        if (entry === undefined) return Option.none()
        entry.policy = {
          maxPerCallMicroUsd: patch.maxPerCallMicroUsd !== undefined
            ? patch.maxPerCallMicroUsd
            : entry.policy.maxPerCallMicroUsd,
          maxPerDayMicroUsd: patch.maxPerDayMicroUsd !== undefined
            ? patch.maxPerDayMicroUsd
            : entry.policy.maxPerDayMicroUsd,
          allowedCapabilities: patch.allowedCapabilities ?? entry.policy.allowedCapabilities
        }
        return Option.some(entry.policy)
      })
  }
}

export const layer: Layer.Layer<Store> = Layer.sync(Store, makeMemoryStore)
