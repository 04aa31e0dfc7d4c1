import { Cause, Effect, Exit, type Layer, ManagedRuntime, Result, Schema } from "effect"
import { Agents, type CreatedAgent } from "../../src/agents/Agents.ts"
import { Policies, type PolicyView } from "../../src/agents/Policies.ts"
import { Capabilities, type ExecutionResult } from "../../src/capabilities/Capabilities.ts"
import { type BuiltCapability, type CapabilityIO, inputSchemas } from "../../src/capabilities/schemas.ts"
import type { Agent, Principal, Role } from "../../src/domain/Agent.ts"
import { isCapability } from "../../src/domain/Capability.ts"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import type { Transaction } from "../../src/domain/Ledger.ts"
import { type Page, Store } from "../../src/ports/Store.ts"
import { Spend, type SpendReceipt } from "../../src/wallet/Spend.ts"
import { Wallets, type WalletView } from "../../src/wallet/Wallets.ts"
import * as Spendgate from "./Spendgate.ts"

/**
 * The gateway for callers that do not use Effect: `createGateway(options)`
 * opens storage and resolves with an object of async methods; every refusal
 * is thrown as a {@link SpendgateError} carrying the API's `code`
 * (docs/errors.md), e.g. `PER_CALL_LIMIT_EXCEEDED`. Amounts are integers in
 * micro-dollars (µUSD), given as `bigint` or as a safe integer `number`.
 *
 * ```js
 * const gateway = await createGateway({ storage: "memory" })
 * const { accountId, apiKey: ownerKey } = await gateway.signup("operator")
 * const worker = await gateway.createAgent(ownerKey, { name: "bot" })
 * await gateway.credit({ accountId, amountMicroUsd: 1_000_000n, key: "funding-1" })
 * const { value, receipt } = await gateway.spend(worker.apiKey, {
 *   capability: "search", provider: "mine", quotedMicroUsd: 30_000n,
 *   run: async () => ({ value: await mySearch(), actualMicroUsd: 12_500n })
 * })
 * await gateway.close()
 * ```
 */

/** Where the gateway keeps its data. */
export type GatewayStorage =
  /** Everything in memory, gone with the process. */
  | "memory"
  /** Embedded PostgreSQL (PGlite) in `dir`, locked against a second process (`undefined`: in memory). */
  | { readonly pglite: string | undefined }
  /** A PostgreSQL server (`postgres://…`). */
  | { readonly postgres: string }

export interface GatewayOptions extends Spendgate.Options {
  /** Default `"memory"`. */
  readonly storage?: GatewayStorage
}

/** An amount in micro-dollars: a bigint, or a number that is a safe integer. */
export type MicroUsd = bigint | number

/** A refusal of the gateway, with the API's error `code` (e.g. `BUDGET_EXCEEDED`). */
export class SpendgateError extends Error {
  override readonly name = "SpendgateError"
  readonly code: string
  /** The error's details where the API gives some (e.g. `BUDGET_EXCEEDED`'s remaining budget). */
  readonly details: unknown
  constructor(code: string, message: string, details?: unknown, options?: ErrorOptions) {
    super(message, options)
    this.code = code
    this.details = details
  }
}

export interface PolicyInput {
  /** Per-call cap; `null` (or omitted) for none. */
  readonly maxPerCallMicroUsd?: MicroUsd | null | undefined
  /** Daily cap (UTC day); `null` (or omitted) for none. */
  readonly maxPerDayMicroUsd?: MicroUsd | null | undefined
  /** Capabilities the agent may pay for; empty (or omitted) for all. */
  readonly allowedCapabilities?: ReadonlyArray<string> | undefined
}

export interface SpendInput<A> {
  /** The capability the call counts against (e.g. `"search"`, `"reason"`): policies allow or refuse it. */
  readonly capability: string
  /** Who serves the call (shown on the receipt). */
  readonly provider: string
  /** Upper bound of the cost: held before `run`, and the most that is charged. */
  readonly quotedMicroUsd: MicroUsd
  readonly description?: string | undefined
  /**
   * The paid call, run with the quote held. Its `actualMicroUsd` is charged
   * (at most the quote); if it throws, the hold is released, nothing is
   * charged and `spend` rethrows its error.
   */
  readonly run: () => Promise<{ readonly value: A; readonly actualMicroUsd: MicroUsd }>
}

export interface TransactionsInput {
  readonly limit?: number | undefined
  readonly offset?: number | undefined
  readonly type?: Transaction["type"] | undefined
  readonly agentId?: string | undefined
  /** UTC calendar days (YYYY-MM-DD), both inclusive. */
  readonly startDate?: string | undefined
  readonly endDate?: string | undefined
}

export interface CreditInput {
  readonly accountId: string
  /** Exactly one credit per key, however many times it is called. */
  readonly key: string
  /** Micro-dollars into the USD pocket. */
  readonly amountMicroUsd: MicroUsd
  readonly description?: string | undefined
}

export interface Gateway {
  /** A new account with its owner agent; the owner's key is returned once. */
  readonly signup: (name: string) => Promise<{ readonly accountId: string; readonly agentId: string; readonly apiKey: string }>
  /** A new agent of the owner's account (owner key only); its key is returned once. */
  readonly createAgent: (
    ownerKey: string,
    input: { readonly name: string; readonly role?: Role | undefined }
  ) => Promise<{ readonly agentId: string; readonly apiKey: string; readonly agent: Agent }>
  /** Replaces an agent's policy (owner key only); omitted fields are reset. */
  readonly setPolicy: (ownerKey: string, agentId: string, policy: PolicyInput) => Promise<PolicyView>
  /** The kill switch: the agent's key is refused (`AGENT_KILLED`) from the next call on. */
  readonly kill: (ownerKey: string, agentId: string) => Promise<Agent>
  readonly revive: (ownerKey: string, agentId: string) => Promise<Agent>
  /** The embedder's own funding of an account's USD pocket, once per `key`. */
  readonly credit: (input: CreditInput) => Promise<{ readonly duplicate: boolean; readonly transaction: Transaction }>
  /** The wallet of the key's account. */
  readonly balance: (apiKey: string) => Promise<WalletView>
  /** One metered call: policy checked, quote held, `run` called, actual cost charged, receipt written. */
  readonly spend: <A>(apiKey: string, input: SpendInput<A>) => Promise<{ readonly value: A; readonly receipt: SpendReceipt }>
  /** A catalogue capability through the configured providers (`options.providers`). */
  readonly execute: <C extends BuiltCapability>(
    apiKey: string,
    capability: C,
    input: CapabilityIO[C]["input"]
  ) => Promise<ExecutionResult<CapabilityIO[C]["output"]>>
  /** Newest first; an agent-role key sees only its own. */
  readonly transactions: (apiKey: string, query?: TransactionsInput) => Promise<Page<Transaction>>
  /** Stops the background jobs and closes storage. */
  readonly close: () => Promise<void>
}

const invalid = (message: string) => new SpendgateError("VALIDATION_ERROR", message)

const microUsd = (field: string, value: unknown, { positive }: { readonly positive: boolean }): bigint => {
  const amount = typeof value === "bigint"
    ? value
    : typeof value === "number" && Number.isSafeInteger(value)
    ? BigInt(value)
    : undefined
  if (amount === undefined) throw invalid(`${field} must be an integer number of micro-dollars (a bigint or a safe integer)`)
  if (positive ? amount <= 0n : amount < 0n) throw invalid(`${field} must be ${positive ? "above zero" : "zero or more"}`)
  return amount
}

const optionalMicroUsd = (field: string, value: MicroUsd | null | undefined): bigint | null =>
  value === null || value === undefined ? null : microUsd(field, value, { positive: false })

/** The user's `run` failed: `spend` rethrows what it threw, once the hold is released. */
class RunFailed {
  readonly _tag = "RunFailed"
  readonly error: unknown
  constructor(error: unknown) {
    this.error = error
  }
}

/** A refusal of the core (any error with a string `code`) as a SpendgateError; anything else as it is. */
const toThrown = (cause: Cause.Cause<unknown>): unknown => {
  const error = Cause.squash(cause)
  if (error instanceof RunFailed) return error.error
  if (error instanceof SpendgateError) return error
  if (typeof error === "object" && error !== null && typeof (error as { code?: unknown }).code === "string") {
    const { code, message, details } = error as { code: string; message?: unknown; details?: unknown }
    return new SpendgateError(code, typeof message === "string" && message !== "" ? message : code, details, { cause: error })
  }
  return error
}

const layerOf = (options: GatewayOptions): Layer.Layer<Spendgate.Provided, unknown> => {
  const storage = options.storage ?? "memory"
  if (storage === "memory") return Spendgate.memory(options)
  if (typeof storage === "object" && storage !== null && "pglite" in storage) return Spendgate.pglite(storage.pglite, options)
  if (typeof storage === "object" && storage !== null && "postgres" in storage && typeof storage.postgres === "string") {
    return Spendgate.postgres(storage.postgres, options)
  }
  throw invalid(`storage must be "memory", { pglite: dir } or { postgres: url }`)
}

/** Opens storage (migrating it) and starts the gateway; rejects if storage cannot be opened. */
export const createGateway = async (options: GatewayOptions = {}): Promise<Gateway> => {
  const runtime = ManagedRuntime.make(layerOf(options))
  let closed = false
  const run = async <A>(effect: Effect.Effect<A, unknown, Spendgate.Provided>): Promise<A> => {
    if (closed) throw new SpendgateError("CLOSED", "the gateway is closed")
    const exit = await runtime.runPromiseExit(effect)
    if (Exit.isSuccess(exit)) return exit.value
    throw toThrown(exit.cause)
  }
  try {
    await runtime.context()
  } catch (error) {
    await runtime.dispose()
    throw error
  }

  const principal = (apiKey: string): Effect.Effect<Principal, unknown, Agents> =>
    typeof apiKey === "string"
      ? Effect.gen(function*() {
        return yield* (yield* Agents).authenticate(apiKey)
      })
      : Effect.fail(new SpendgateError("UNAUTHORIZED", "the API key must be a string"))
  const setKilled = (ownerKey: string, agentId: string, killed: boolean) => {
    return run(Effect.gen(function*() {
      const owner = yield* principal(ownerKey)
      return yield* (yield* Agents).update(owner, agentId as AgentId, { killed })
    }))
  }

  return {
    signup: (name) => {
      if (typeof name !== "string" || name.trim() === "") return Promise.reject(invalid("name must be a non-empty string"))
      return run(Effect.gen(function*() {
        const result = yield* (yield* Agents).signup({ name })
        const owner = yield* (yield* Agents).authenticate(result.apiKey)
        return { accountId: result.accountId, agentId: owner.agent.id, apiKey: result.apiKey }
      }))
    },
    createAgent: (ownerKey, input) => {
      if (typeof input?.name !== "string" || input.name.trim() === "") {
        return Promise.reject(invalid("name must be a non-empty string"))
      }
      return run(Effect.gen(function*() {
        const owner = yield* principal(ownerKey)
        const created: CreatedAgent = yield* (yield* Agents).create(owner, input)
        return { agentId: created.agent.id, apiKey: created.apiKey, agent: created.agent }
      }))
    },
    setPolicy: async (ownerKey, agentId, policy) => {
      const allowed = policy.allowedCapabilities ?? []
      const unknown = allowed.filter((name) => !isCapability(name))
      if (unknown.length > 0) throw invalid(`unknown capabilities: ${unknown.join(", ")}`)
      const patch = {
        maxPerCallMicroUsd: optionalMicroUsd("maxPerCallMicroUsd", policy.maxPerCallMicroUsd),
        maxPerDayMicroUsd: optionalMicroUsd("maxPerDayMicroUsd", policy.maxPerDayMicroUsd),
        allowedCapabilities: allowed.filter(isCapability)
      }
      return run(Effect.gen(function*() {
        const owner = yield* principal(ownerKey)
        return yield* (yield* Policies).replace(owner, agentId as AgentId, patch)
      }))
    },
    kill: (ownerKey, agentId) => setKilled(ownerKey, agentId, true),
    revive: (ownerKey, agentId) => setKilled(ownerKey, agentId, false),
    credit: async (input) => {
      const amount = microUsd("amountMicroUsd", input.amountMicroUsd, { positive: true })
      if (typeof input.key !== "string" || input.key === "") throw invalid("key must be a non-empty string")
      if (typeof input.accountId !== "string") throw invalid("accountId must be a string")
      const outcome = await run(Effect.gen(function*() {
        // Every account has its owner agent: none means no such account.
        const agents = yield* (yield* Store).listAgents(input.accountId as AccountId, { limit: 1, offset: 0 })
        if (agents.items.length === 0) return yield* Effect.fail(new SpendgateError("NOT_FOUND", "no such account"))
        return yield* (yield* Wallets).credit({
          accountId: input.accountId as AccountId,
          key: input.key,
          pocket: "usd",
          amount,
          description: input.description ?? "credit"
        })
      }))
      switch (outcome._tag) {
        case "Credited":
          return { duplicate: false, transaction: outcome.transaction }
        case "Duplicate":
          return { duplicate: true, transaction: outcome.transaction }
        case "Refused":
          throw new SpendgateError("INVALID_AMOUNT", `the USD pocket would go above ${outcome.maximum} µUSD`, {
            maximum: String(outcome.maximum)
          })
      }
    },
    balance: (apiKey) => {
      return run(Effect.gen(function*() {
        return yield* (yield* Wallets).get(yield* principal(apiKey))
      }))
    },
    spend: async (apiKey, input) => {
      if (typeof input?.capability !== "string" || !isCapability(input.capability)) {
        throw invalid(`unknown capability ${JSON.stringify(input?.capability)}`)
      }
      if (typeof input.provider !== "string" || input.provider === "") throw invalid("provider must be a non-empty string")
      if (typeof input.run !== "function") throw invalid("run must be an async function")
      const capability = input.capability
      const quotedMicroUsd = microUsd("quotedMicroUsd", input.quotedMicroUsd, { positive: false })
      const call = input.run
      return run(Effect.gen(function*() {
        const agent = yield* principal(apiKey)
        return yield* (yield* Spend).spend(agent, {
          capability,
          provider: input.provider,
          quotedMicroUsd,
          description: input.description ?? `${capability} via ${input.provider}`,
          run: Effect.tryPromise({ try: () => call(), catch: (error) => new RunFailed(error) }).pipe(
            Effect.flatMap((result) =>
              Effect.try({
                try: () => ({ value: result.value, actualMicroUsd: microUsd("actualMicroUsd", result.actualMicroUsd, { positive: false }) }),
                catch: (error) => new RunFailed(error)
              })
            )
          )
        })
      }))
    },
    execute: async (apiKey, capability, input) => {
      if (typeof capability !== "string" || !Object.hasOwn(inputSchemas, capability)) {
        throw invalid(`unknown capability ${JSON.stringify(capability)}`)
      }
      // Callers without TypeScript may pass anything: the input is checked as the API checks a request body.
      const schema = inputSchemas[capability] as unknown as Schema.Codec<CapabilityIO[typeof capability]["input"]>
      const decoded = Schema.decodeUnknownResult(schema)(input, { errors: "first" })
      if (Result.isFailure(decoded)) throw invalid(`input of ${capability}: ${decoded.failure.message}`)
      return run(Effect.gen(function*() {
        const agent = yield* principal(apiKey)
        return yield* (yield* Capabilities).execute(agent, capability, decoded.success)
      }))
    },
    transactions: (apiKey, query = {}) => {
      const limit = query.limit ?? 50
      const offset = query.offset ?? 0
      if (!Number.isSafeInteger(limit) || limit < 1 || limit > 500) {
        return Promise.reject(invalid("limit must be an integer from 1 to 500"))
      }
      if (!Number.isSafeInteger(offset) || offset < 0) return Promise.reject(invalid("offset must be an integer, zero or more"))
      return run(Effect.gen(function*() {
        const agent = yield* principal(apiKey)
        return yield* (yield* Wallets).transactions(agent, {
          type: query.type,
          agentId: query.agentId as AgentId | undefined,
          startDate: query.startDate,
          endDate: query.endDate
        }, { limit, offset })
      }))
    },
    close: async () => {
      if (closed) return
      closed = true
      await runtime.dispose()
    }
  }
}
