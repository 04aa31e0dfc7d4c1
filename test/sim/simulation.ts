import { Cause, Effect, Exit, Layer, Option, References, Result } from "effect"
import { TestClock } from "effect/testing"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import * as DevCard from "../../adapters/rails/DevCard.ts"
import * as DevLightning from "../../adapters/rails/DevLightning.ts"
import { registryOnly } from "../../adapters/services/transport.ts"
import * as Admin from "../../src/admin/Admin.ts"
import { Agents } from "../../src/agents/Agents.ts"
import { Policies } from "../../src/agents/Policies.ts"
import { Capabilities, Providers } from "../../src/capabilities/Capabilities.ts"
import { type Provider, ProviderFailure } from "../../src/capabilities/Provider.ts"
import type { Policy, Principal } from "../../src/domain/Agent.ts"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import { parseBtcUsdRate } from "../../src/domain/Money.ts"
import { Funding } from "../../src/funding/Funding.ts"
import { agentScope, Idempotency } from "../../src/idempotency/Idempotency.ts"
import * as Gateway from "../../src/Gateway.ts"
import type { AdminStore } from "../../src/ports/AdminStore.ts"
import type { IdempotencyStore } from "../../src/ports/IdempotencyStore.ts"
import { PaymentSink } from "../../src/ports/Rails.ts"
import { RateSource } from "../../src/ports/RateSource.ts"
import type { RegistryStore } from "../../src/ports/RegistryStore.ts"
import { Store } from "../../src/ports/Store.ts"
import { Spend } from "../../src/wallet/Spend.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { checkAccount } from "../support/ledger-check.ts"
import { prng } from "../support/prng.ts"
import { type FaultPlan, InjectedFault, onlyExpectedDefects, withFaults } from "./faults.ts"

/**
 * A seeded simulation of the core, after TigerBeetle's VOPR: one seed
 * drives a random workload (signups, agents, policies, kills, fundings,
 * payments with duplicates and late ones, capability calls against
 * scripted providers that fail, take long, crash or report any usage,
 * sweeps, credits retried with the same key, refunds of charges, whole or
 * partial, some racing each other) over the real services,
 * with the clock (Effect's TestClock) moved by random amounts across
 * midnights, hold lifetimes and invoice expiries, and with a Store that
 * fails at random (faults.ts). After every step, with faults off, the
 * invariants are read back from storage. The same seed replays the same
 * run.
 */

type Storage = Store | AdminStore | IdempotencyStore | RegistryStore

export interface SimOptions {
  readonly seed: number
  readonly steps: number
  readonly storage: () => Layer.Layer<Storage, unknown>
  /** Probability that a store call fails (before or after it takes effect). */
  readonly faultProbability: number
}

/**
 * Known defects: a step that dies with exactly one of these is logged and
 * counted (`knownDefects`) instead of failing the run; the invariants are
 * still checked after it. Each entry gets an `it.fails` reproducer in
 * sim.test.ts and comes out when its fix lands. Empty: the last one (a call
 * that outlived its swept hold died unpaid) is fixed and is now a plain test.
 */
export const KNOWN_SIM_DEFECTS: ReadonlyArray<{ readonly name: string; readonly matches: (cause: string) => boolean }> = []

export interface SimResult {
  readonly seed: number
  readonly steps: number
  readonly faultsInjected: number
  readonly charges: number
  readonly credits: number
  readonly refunds: number
  readonly problems: ReadonlyArray<string>
  /** Steps that died of a known defect (KNOWN_SIM_DEFECTS), by name. */
  readonly knownDefects: Readonly<Record<string, number>>
  readonly log: ReadonlyArray<string>
}

/** A crash of a scripted provider (a defect on purpose, not a bug). */
class ProviderCrash extends Error {
  readonly _tag = "ProviderCrash"
}

type Script =
  | { readonly outcome: "ok"; readonly actualMicroUsd: bigint; readonly takesMs: number; readonly sweepMidCall: boolean }
  | { readonly outcome: "fail"; readonly reason: "timeout" | "rate_limited" | "unavailable" | "malformed"; readonly takesMs: number }
  | { readonly outcome: "crash"; readonly takesMs: number }

interface Scripts {
  next: (provider: string) => Script
  midCall: Effect.Effect<void>
}

const searchProvider = (name: string, priceMicroUsd: bigint, scripts: Scripts): Provider<"search"> => ({
  name,
  capability: "search",
  unitPrice: { per: "query", priceMicroUsd },
  quote: (input) => Result.succeed({ microUsd: priceMicroUsd * BigInt(input.numResults ?? 1) }),
  run: (input) =>
    Effect.gen(function*() {
      const script = scripts.next(name)
      // Time passes during the call: a hold may outlive its lifetime, a call may cross midnight.
      if (script.takesMs > 0) yield* TestClock.adjust(script.takesMs)
      switch (script.outcome) {
        case "ok":
          if (script.sweepMidCall) yield* scripts.midCall
          return { output: { results: [], query: input.query, totalResults: 0 }, actualMicroUsd: script.actualMicroUsd }
        case "fail":
          return yield* new ProviderFailure({ provider: name, reason: script.reason, message: "scripted failure" })
        case "crash":
          return yield* Effect.die(new ProviderCrash("scripted crash"))
      }
    })
})

interface SimAgent {
  readonly id: AgentId
  readonly apiKey: string
  /** As authenticated when created: used even after a kill, the way a request in flight holds it. */
  readonly principal: Principal
  /** [atMs, policy] as read back from storage after each change. */
  readonly policies: Array<readonly [number, Policy]>
  /** [atMs, killed] as read back from storage after each kill or revival. */
  readonly killed: Array<readonly [number, boolean]>
}

interface SimAccount {
  readonly accountId: AccountId
  readonly owner: SimAgent
  readonly agents: Array<SimAgent>
  readonly invoices: Array<{ readonly type: "lightning" | "card"; readonly externalId: string }>
  readonly creditKeys: Array<string>
}

const START = Date.parse("2026-03-01T22:40:00Z")
const RATE = Result.getOrThrow(parseBtcUsdRate("60000"))

const at = <A>(history: ReadonlyArray<readonly [number, A]>, ms: number): A | undefined => {
  let found: A | undefined
  for (const [t, value] of history) if (t <= ms) found = value
  return found
}

export const simulate = (options: SimOptions): Promise<SimResult> => {
  const rng = prng(options.seed)
  const plan: FaultPlan = { on: false, probability: options.faultProbability, rng: rng.fork(), injected: 0 }
  const scriptRng = rng.fork()
  const scripts: Scripts = {
    next: () =>
      scriptRng.weighted<Script>([
        [6, {
          outcome: "ok",
          // Any usage: nothing, less than the quote, more than the quote (the pipeline charges at most the quote).
          actualMicroUsd: scriptRng.pick([0n, scriptRng.bigint(0n, 30_000n), scriptRng.bigint(0n, 300_000n), 10n ** 15n]),
          takesMs: scriptRng.pick([0, 50, 5_000, 16 * 60_000, 3 * 3_600_000]),
          sweepMidCall: scriptRng.chance(0.15)
        }],
        [2, { outcome: "fail", reason: scriptRng.pick(["timeout", "rate_limited", "unavailable", "malformed"] as const), takesMs: scriptRng.pick([0, 30_000]) }],
        [1, { outcome: "crash", takesMs: scriptRng.pick([0, 1_000]) }]
      ]),
    midCall: Effect.void
  }
  const providers = Providers.make([
    searchProvider("alpha", 2_000n, scripts),
    searchProvider("beta", 9_000n, scripts)
  ])
  const layer = Gateway.layer.pipe(
    Layer.provideMerge(Layer.mergeAll(
      withFaults(options.storage(), plan),
      RateSource.fixed(RATE),
      DevLightning.layer({ dataDir: undefined }),
      DevCard.layer({ publicUrl: "http://spendgate.test" }),
      providers,
      registryOnly
    ))
  )

  const program = Effect.gen(function*() {
    const agents = yield* Agents
    const policies = yield* Policies
    const capabilities = yield* Capabilities
    const funding = yield* Funding
    const sink = yield* PaymentSink
    const wallets = yield* Wallets
    const spend = yield* Spend
    const store = yield* Store
    const idempotency = yield* Idempotency
    const admin = yield* Admin.make
    scripts.midCall = Effect.asVoid(spend.sweep)
    yield* TestClock.setTime(START)

    const accounts: Array<SimAccount> = []
    const log: Array<string> = []
    const problems: Array<string> = []
    const knownDefects: Record<string, number> = {}
    const executedKeys = new Map<string, number>()
    let charges = 0
    let credits = 0
    let refunds = 0
    const nowMs = Effect.map(Effect.clockWith((clock) => clock.currentTimeMillis), Number)

    /** What storage says now about an agent's policy and kill switch, recorded at this instant. */
    const readBack = (account: SimAccount, agent: SimAgent) =>
      Effect.gen(function*() {
        const found = yield* store.getAgent(account.accountId, agent.id)
        if (Option.isNone(found)) return
        const t = yield* nowMs
        agent.policies.push([t, found.value.policy])
        agent.killed.push([t, found.value.agent.killed])
      })

    const newAgent = (apiKey: string, principal: Principal): SimAgent => ({
      id: principal.agent.id,
      apiKey,
      principal,
      policies: [],
      killed: []
    })

    const someAccount = () => accounts.length === 0 ? undefined : rng.pick(accounts)
    const someAgent = (account: SimAccount) => rng.pick([account.owner, ...account.agents])

    const actions: Record<string, Effect.Effect<string, unknown>> = {
      signup: Effect.gen(function*() {
        if (accounts.length >= 3) return "skip"
        const result = yield* agents.signup({ name: `acct${accounts.length}` })
        const principal = yield* agents.authenticate(result.apiKey)
        const owner = newAgent(result.apiKey, principal)
        const account: SimAccount = { accountId: result.accountId, owner, agents: [], invoices: [], creditKeys: [] }
        accounts.push(account)
        return `signup ${result.accountId}`
      }),
      createAgent: Effect.gen(function*() {
        const account = someAccount()
        if (account === undefined || account.agents.length >= 3) return "skip"
        const created = yield* agents.create(account.owner.principal, { name: "worker", role: rng.chance(0.2) ? "owner" : "agent" })
        const principal = yield* agents.authenticate(created.apiKey)
        account.agents.push(newAgent(created.apiKey, principal))
        return `agent ${created.agent.id}`
      }),
      policy: Effect.gen(function*() {
        const account = someAccount()
        if (account === undefined) return "skip"
        const agent = someAgent(account)
        const cap = () => rng.pick([undefined, null, null, 0n, rng.bigint(1n, 20_000n), rng.bigint(1n, 200_000n)])
        const patch = {
          maxPerCallMicroUsd: cap(),
          maxPerDayMicroUsd: cap(),
          allowedCapabilities: rng.pick([undefined, undefined, [], ["search" as const], ["reason" as const]])
        }
        const how = rng.chance(0.5) ? "patch" : "replace"
        yield* (how === "patch" ? policies.patch : policies.replace)(account.owner.principal, agent.id, patch)
        return `${how} policy ${agent.id} ${JSON.stringify(patch, (_k, v) => typeof v === "bigint" ? v.toString() : v)}`
      }),
      kill: Effect.gen(function*() {
        const account = someAccount()
        if (account === undefined) return "skip"
        const agent = someAgent(account)
        const killed = rng.chance(0.4)
        yield* agents.update(account.owner.principal, agent.id, { killed })
        return `${killed ? "kill" : "revive"} ${agent.id}`
      }),
      fund: Effect.gen(function*() {
        const account = someAccount()
        if (account === undefined) return "skip"
        const invoice = rng.chance(0.6)
          ? yield* funding.fundLightning(account.owner.principal, rng.int(1, 200_000))
          : yield* funding.fundCard(account.owner.principal, rng.int(10, 300) * 100)
        account.invoices.push({ type: invoice.type, externalId: invoice.externalId })
        return `fund ${invoice.type} ${invoice.id}`
      }),
      pay: Effect.gen(function*() {
        const account = someAccount()
        if (account === undefined || account.invoices.length === 0) return "skip"
        // Any invoice: unpaid, already paid (a duplicate), or past its expiry (late).
        const invoice = rng.pick(account.invoices)
        const outcome = yield* sink.record({ type: invoice.type, externalId: invoice.externalId, paidAt: new Date(yield* nowMs), source: "sim" })
        if (outcome === "credited") credits++
        return `pay ${invoice.type} ${invoice.externalId.slice(0, 12)}: ${outcome}`
      }),
      credit: Effect.gen(function*() {
        const account = someAccount()
        if (account === undefined) return "skip"
        // A retried credit reuses its key and must credit once.
        const key = account.creditKeys.length > 0 && rng.chance(0.4) ? rng.pick(account.creditKeys) : `key${rng.int(0, 1e9)}`
        account.creditKeys.push(key)
        const pocket = rng.chance(0.5) ? "usd" as const : "sats" as const
        const outcome = yield* wallets.credit({ accountId: account.accountId, key, pocket, amount: rng.bigint(1n, 5_000_000n), description: "sim" })
        if (outcome._tag === "Credited") credits++
        return `credit ${key} ${pocket}: ${outcome._tag}`
      }),
      call: Effect.gen(function*() {
        const account = someAccount()
        if (account === undefined) return "skip"
        const agent = someAgent(account)
        const numResults = rng.pick([undefined, 1, 3, 50])
        const pinned = rng.pick([undefined, undefined, "alpha", "beta"])
        const exit = yield* Effect.exit(capabilities.execute(agent.principal, "search", {
          query: "q",
          ...(numResults === undefined ? {} : { numResults }),
          ...(pinned === undefined ? {} : { provider: pinned })
        }))
        if (Exit.isSuccess(exit)) {
          charges++
          return `call ${agent.id}: charged ${exit.value.receipt.chargedMicroUsd} of ${exit.value.receipt.quotedMicroUsd}`
        }
        const error = Cause.findErrorOption(exit.cause)
        if (Option.isSome(error)) return `call ${agent.id}: ${(error.value as { _tag?: string })._tag}`
        return yield* Effect.failCause(exit.cause)
      }),
      retriedCall: Effect.gen(function*() {
        // A call sent with an Idempotency-Key, and sometimes sent again with the same key: at most one charge per key.
        const account = someAccount()
        if (account === undefined) return "skip"
        const agent = someAgent(account)
        const key = rng.chance(0.6) ? `call-${rng.int(0, 3)}` : `call-${rng.int(4, 1e9)}`
        const request = {
          scope: agentScope(agent.id),
          key,
          method: "POST",
          target: "/v1/capabilities/search",
          body: new TextEncoder().encode(`{"query":"q","agent":"${agent.id}"}`)
        }
        // The key's lifetime runs from its first use: the start of the call (a call may take hours here).
        const startedMs = yield* nowMs
        const result = yield* idempotency.run(
          request,
          capabilities.execute(agent.principal, "search", { query: "q" }),
          (r) => Option.some({ status: 200, body: JSON.stringify({ auditId: r.receipt.auditId }) })
        )
        if (result._tag === "Executed") {
          charges++
          const id = `${account.accountId}/${key}/${agent.id}`
          const t = startedMs
          const previous = executedKeys.get(id)
          // Keys live 24 h from their first use: within that, a second execution is a double charge.
          if (previous !== undefined && t - previous < 24 * 3_600_000) {
            problems.push(`key ${key} executed twice within its lifetime (${previous} and ${t})`)
          }
          executedKeys.set(id, t)
          return `retried call ${key}: executed, charged ${result.value.receipt.chargedMicroUsd}`
        }
        return `retried call ${key}: replayed`
      }),
      refund: Effect.gen(function*() {
        // The operator refunds a charge: all that remains or a part (sometimes more than remains), at times
        // several refunds of one charge at once.
        const account = someAccount()
        if (account === undefined) return "skip"
        const charges = (yield* store.listTransactions(account.accountId, { type: "charge" }, { limit: 20, offset: 0 })).items
        if (charges.length === 0) return "skip"
        const charge = rng.pick(charges)
        const amounts = Array.from({ length: rng.pick([1, 1, 1, 3]) }, () =>
          rng.chance(0.4) ? undefined : rng.bigint(0n, charge.amountMicroUsd + charge.amountMicroUsd / 4n + 1n))
        const exits = yield* Effect.all(
          amounts.map((amountMicroUsd) => Effect.exit(admin.refund(charge.id, { amountMicroUsd, reason: "sim" }))),
          { concurrency: "unbounded" }
        )
        const outcomes: Array<string> = []
        for (const exit of exits) {
          if (Exit.isSuccess(exit)) {
            refunds++
            outcomes.push(`refunded ${exit.value.refund.amountMicroUsd}`)
            continue
          }
          const error = Cause.findErrorOption(exit.cause)
          if (Option.isNone(error)) return yield* Effect.failCause(exit.cause)
          outcomes.push((error.value as { _tag?: string })._tag ?? "error")
        }
        return `refund ${charge.id} (${charge.amountMicroUsd}): ${outcomes.join(", ")}`
      }),
      sweep: Effect.map(spend.sweep, (n) => `sweep: ${n}`),
      expire: Effect.map(funding.expireDue, (n) => `expire: ${n}`),
      tick: Effect.gen(function*() {
        const ms = rng.pick([1_000, 59_000, 15 * 60_000 + 1, 50 * 60_000, 5 * 3_600_000, rng.int(0, 86_400_000)])
        yield* TestClock.adjust(ms)
        return `tick ${ms} ms`
      })
    }
    type Action = keyof typeof actions & string
    const weights: ReadonlyArray<readonly [number, Action]> = [
      [1, "signup"],
      [2, "createAgent"],
      [3, "policy"],
      [2, "kill"],
      [4, "fund"],
      [5, "pay"],
      [2, "credit"],
      [11, "call"],
      [4, "retriedCall"],
      [3, "refund"],
      [2, "sweep"],
      [1, "expire"],
      [3, "tick"]
    ]

    const isExpectedDefect = (defect: unknown) => defect instanceof InjectedFault || defect instanceof ProviderCrash

    const checkInvariants = Effect.gen(function*() {
      const out: Array<string> = []
      for (const account of accounts) {
        const { snapshot, problems: found } = yield* checkAccount(account.accountId)
        out.push(...found.map((p) => `${account.accountId}: ${p}`))
        for (const agent of [account.owner, ...account.agents]) {
          const mine = snapshot.reservations
            .filter((r) => r.agentId === agent.id)
            .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime())
          const spentByDay = new Map<string, bigint>()
          for (const r of mine) {
            const t = r.createdAt.getTime()
            if (at(agent.killed, t) === true) out.push(`${agent.id} was held for ${r.id} at ${r.createdAt.toISOString()} while killed`)
            const policy = at(agent.policies, t)
            if (policy === undefined) continue
            if (policy.allowedCapabilities.length > 0 && !policy.allowedCapabilities.includes(r.capability)) {
              out.push(`${r.id}: ${r.capability} held while not allowed`)
            }
            if (policy.maxPerCallMicroUsd !== null && r.quotedMicroUsd > policy.maxPerCallMicroUsd) {
              out.push(`${r.id}: quote ${r.quotedMicroUsd} over the per-call cap ${policy.maxPerCallMicroUsd}`)
            }
            if (r.status !== "settled") continue
            const day = (spentByDay.get(r.day) ?? 0n) + (r.settledMicroUsd ?? 0n)
            spentByDay.set(r.day, day)
            if (policy.maxPerDayMicroUsd !== null && day > policy.maxPerDayMicroUsd) {
              out.push(`${agent.id}: settled ${day} on ${r.day}, over the daily cap ${policy.maxPerDayMicroUsd} (at ${r.id})`)
            }
          }
          for (const t of snapshot.transactions) {
            if (t.type === "charge" && t.agentId === agent.id) {
              const reservation = snapshot.audit.find((a) => a.transactionId === t.id)?.reservationId
              const r = mine.find((x) => x.id === reservation)
              if (r !== undefined && at(agent.killed, r.createdAt.getTime()) === true) out.push(`${t.id} charged ${agent.id} while killed`)
            }
          }
        }
      }
      return out
    })

    // Every run opens on the money path (an account, money in it, a call), so
    // that even a short run exercises charges; the rest is drawn by weight.
    const prologue: ReadonlyArray<Action> = ["signup", "credit", "call", "fund", "pay", "call", "refund"]
    for (let step = 0; step < options.steps; step++) {
      const action = step < prologue.length ? prologue[step]! : rng.weighted(weights)
      plan.on = true
      const exit = yield* Effect.exit(actions[action]!)
      plan.on = false
      if (Exit.isSuccess(exit)) {
        log.push(`${step} ${exit.value}`)
      } else if (onlyExpectedDefects(exit.cause, isExpectedDefect)) {
        const error = Cause.findErrorOption(exit.cause)
        log.push(`${step} ${action}: ${Option.isSome(error) ? (error.value as { _tag?: string })._tag ?? "error" : "injected fault"}`)
      } else {
        const pretty = Cause.pretty(exit.cause)
        const known = KNOWN_SIM_DEFECTS.find((d) => d.matches(pretty))
        if (known !== undefined) {
          knownDefects[known.name] = (knownDefects[known.name] ?? 0) + 1
          log.push(`${step} ${action}: known defect: ${known.name}`)
        } else {
          problems.push(`step ${step} (${action}) died: ${pretty.slice(0, 600)}`)
        }
      }
      // Every step takes a millisecond, so that what happened before a step is strictly before it.
      yield* TestClock.adjust(1)
      // Policies and kill switches change only in these steps: read them back (whatever the step's outcome).
      if (action === "signup" || action === "createAgent" || action === "policy" || action === "kill") {
        for (const account of accounts) for (const agent of [account.owner, ...account.agents]) yield* readBack(account, agent)
      }
      problems.push(...(yield* checkInvariants).map((p) => `after step ${step} (${action}): ${p}`))
      if (problems.length > 0) break
    }
    return { seed: options.seed, steps: options.steps, faultsInjected: plan.injected, charges, credits, refunds, problems, knownDefects, log }
  })

  return Effect.runPromise(
    program.pipe(
      // Late payments and sweeps are logged as warnings by design; only errors are worth seeing here.
      Effect.provideService(References.MinimumLogLevel, "Error"),
      Effect.provide(layer),
      Effect.provide(TestClock.layer()),
      Effect.scoped
    ) as Effect.Effect<SimResult, unknown, never>
  )
}

/**
 * A funded agent calls a
 * provider that takes longer than a hold lives; the recovery sweep runs
 * during the call and returns the money; then the provider answers.
 * Returns how the call ended.
 */
export const sweptHoldCall = () => {
  const scripts: Scripts = {
    next: () => ({ outcome: "ok", actualMicroUsd: 1_000n, takesMs: 16 * 60_000, sweepMidCall: true }),
    midCall: Effect.void
  }
  const layer = Gateway.layer.pipe(
    Layer.provideMerge(Layer.mergeAll(
      MemoryStore.layer,
      RateSource.fixed(RATE),
      DevLightning.layer({ dataDir: undefined }),
      DevCard.layer({ publicUrl: "http://spendgate.test" }),
      Providers.make([searchProvider("slow", 2_000n, scripts)]),
      registryOnly
    ))
  )
  return Effect.runPromise(
    Effect.gen(function*() {
      yield* TestClock.setTime(START)
      const agents = yield* Agents
      const wallets = yield* Wallets
      const spend = yield* Spend
      scripts.midCall = Effect.asVoid(spend.sweep)
      const signup = yield* agents.signup({ name: "swept" })
      yield* wallets.credit({ accountId: signup.accountId, key: "seed", pocket: "usd", amount: 1_000_000n, description: "seed" })
      const principal = yield* agents.authenticate(signup.apiKey)
      const capabilities = yield* Capabilities
      return yield* Effect.exit(capabilities.execute(principal, "search", { query: "q" }))
    }).pipe(Effect.provide(layer), Effect.provide(TestClock.layer()), Effect.scoped)
  )
}
