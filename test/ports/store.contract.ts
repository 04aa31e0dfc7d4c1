import { assert, layer } from "@effect/vitest"
import { Effect, type Layer, Option, Result } from "effect"
import { Statement } from "effect/sql"
import type { Agent, Role } from "../../src/domain/Agent.ts"
import { unlimitedPolicy } from "../../src/domain/Agent.ts"
import { type AccountId, hashApiKey, newAccountId, newAgentId, newApiKey } from "../../src/domain/ids.ts"
import { newAuditId, newReservationId, newTransactionId, type Transaction } from "../../src/domain/Ledger.ts"
import { InsufficientBalance } from "../../src/domain/errors.ts"
import { MicroUsd, Msat } from "../../src/domain/Money.ts"
import { type Page, type QuoteClaim, type ReserveInput, Store } from "../../src/ports/Store.ts"
import { checkQuoteUse, newQuoteId, type StoredQuote } from "../../src/quotes/Quote.ts"
import { planHold } from "../../src/wallet/decide.ts"

/**
 * The one contract every Store implementation passes: memory, PGlite and
 * PostgreSQL run exactly these tests.
 */

const at = (iso: string) => new Date(iso)
const NOW = at("2026-06-01T12:00:00Z")

const makeAgent = (accountId: AccountId, name: string, role: Role, createdAt: Date) =>
  Effect.gen(function*() {
    const apiKey = newApiKey()
    const agent: Agent = { id: newAgentId(), accountId, name, role, killed: false, killReason: null, createdAt, lastActiveAt: null, deletedAt: null }
    return { apiKey, keyHash: yield* hashApiKey(apiKey), agent, policy: unlimitedPolicy }
  })

const newAccount = (createdAt = at("2026-01-01T00:00:00Z")) =>
  Effect.gen(function*() {
    const store = yield* Store
    const accountId = newAccountId()
    const owner = yield* makeAgent(accountId, "owner", "owner", createdAt)
    yield* store.createAccount({ accountId, createdAt, owner })
    return { accountId, owner }
  })

export const storeContract = (name: string, storeLayer: Layer.Layer<Store, unknown>) =>
  layer(storeLayer, { timeout: 60_000 })(`Store contract: ${name}`, (it) => {
    it.effect("creates an account with its owner and finds the owner by key hash only", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const { accountId, owner } = yield* newAccount()
        const found = yield* store.findAgentByKeyHash(owner.keyHash, NOW)
        assert.isTrue(Option.isSome(found))
        const agent = Option.getOrThrow(found)
        assert.strictEqual(agent.id, owner.agent.id)
        assert.strictEqual(agent.accountId, accountId)
        assert.strictEqual(agent.role, "owner")
        assert.strictEqual(agent.killed, false)
        assert.strictEqual(agent.createdAt.toISOString(), "2026-01-01T00:00:00.000Z")
        assert.isNull(agent.lastActiveAt)
        assert.isTrue(Option.isNone(yield* store.findAgentByKeyHash(yield* hashApiKey(owner.apiKey + "x"), NOW)))
      }))

    it.effect("never returns another account's agent", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const a = yield* newAccount()
        const b = yield* newAccount()
        assert.isTrue(Option.isSome(yield* store.getAgent(a.accountId, a.owner.agent.id)))
        assert.isTrue(Option.isNone(yield* store.getAgent(b.accountId, a.owner.agent.id)))
        const update = yield* store.updateAgent(b.accountId, a.owner.agent.id, { name: "stolen" })
        assert.strictEqual(update._tag, "NotFound")
        assert.isTrue(Option.isNone(yield* store.updatePolicy(b.accountId, a.owner.agent.id, { maxPerCallMicroUsd: 5n })))
        const listed = yield* store.listAgents(b.accountId, { limit: 100, offset: 0 })
        assert.deepStrictEqual(listed.items.map((x) => x.id), [b.owner.agent.id])
      }))

    it.effect("lists newest first with limit, offset and the full total", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const { accountId, owner } = yield* newAccount(at("2026-01-01T00:00:00Z"))
        const created = [owner.agent.id]
        for (let i = 1; i <= 4; i++) {
          const extra = yield* makeAgent(accountId, `a${i}`, "agent", at(`2026-01-0${i + 1}T00:00:00Z`))
          yield* store.createAgent(extra)
          created.push(extra.agent.id)
        }
        const page1 = yield* store.listAgents(accountId, { limit: 2, offset: 0 })
        const page2 = yield* store.listAgents(accountId, { limit: 2, offset: 2 })
        const page3 = yield* store.listAgents(accountId, { limit: 2, offset: 4 })
        assert.strictEqual(page1.total, 5)
        assert.strictEqual(page3.total, 5)
        assert.deepStrictEqual(
          [...page1.items, ...page2.items, ...page3.items].map((x) => x.id),
          [...created].reverse()
        )
        assert.strictEqual((yield* store.listAgents(accountId, { limit: 2, offset: 10 })).items.length, 0)
      }))

    it.effect("breaks createdAt ties by id, descending", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const when = at("2026-03-03T00:00:00Z")
        const { accountId, owner } = yield* newAccount(when)
        const twin = yield* makeAgent(accountId, "twin", "agent", when)
        yield* store.createAgent(twin)
        const listed = yield* store.listAgents(accountId, { limit: 10, offset: 0 })
        const expected = [owner.agent.id, twin.agent.id].sort().reverse()
        assert.deepStrictEqual(listed.items.map((x) => x.id), expected)
      }))

    it.effect("renames and kills, and refuses to kill the last live owner", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const { accountId, owner } = yield* newAccount()
        const refused = yield* store.updateAgent(accountId, owner.agent.id, { killed: true })
        assert.strictEqual(refused._tag, "LastLiveOwner")
        const still = Option.getOrThrow(yield* store.getAgent(accountId, owner.agent.id))
        assert.strictEqual(still.agent.killed, false)

        const renamed = yield* store.updateAgent(accountId, owner.agent.id, { name: "renamed" })
        assert.strictEqual(renamed._tag === "Updated" && renamed.agent.name, "renamed")

        const worker = yield* makeAgent(accountId, "worker", "agent", at("2026-01-02T00:00:00Z"))
        yield* store.createAgent(worker)
        const killed = yield* store.updateAgent(accountId, worker.agent.id, { killed: true })
        assert.strictEqual(killed._tag === "Updated" && killed.agent.killed, true)
        const found = Option.getOrThrow(yield* store.findAgentByKeyHash(worker.keyHash, NOW))
        assert.strictEqual(found.killed, true)
        const revived = yield* store.updateAgent(accountId, worker.agent.id, { killed: false })
        assert.strictEqual(revived._tag === "Updated" && revived.agent.killed, false)
      }))

    it.effect("two owners killing each other concurrently: exactly one kill wins", () =>
      Effect.gen(function*() {
        const store = yield* Store
        for (let round = 0; round < 5; round++) {
          const { accountId, owner } = yield* newAccount()
          const second = yield* makeAgent(accountId, "second", "owner", at("2026-01-02T00:00:00Z"))
          yield* store.createAgent(second)
          const results = yield* Effect.all([
            store.updateAgent(accountId, owner.agent.id, { killed: true }),
            store.updateAgent(accountId, second.agent.id, { killed: true })
          ], { concurrency: "unbounded" })
          assert.deepStrictEqual(results.map((r) => r._tag).sort(), ["LastLiveOwner", "Updated"])
          const listed = yield* store.listAgents(accountId, { limit: 10, offset: 0 })
          assert.strictEqual(listed.items.filter((a) => !a.killed).length, 1)
        }
      }))

    it.effect("rotates a key: the old one works until its grace ends, a second rotation revokes the older key", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const { accountId } = yield* newAccount()
        const worker = yield* makeAgent(accountId, "worker", "agent", at("2026-01-02T00:00:00Z"))
        yield* store.createAgent(worker)
        const second = yield* hashApiKey(newApiKey())
        const graceEnd = at("2026-06-01T12:05:00Z")
        const rotated = yield* store.rotateKey(accountId, worker.agent.id, { keyHash: second, previousExpiresAt: graceEnd })
        assert.strictEqual(Option.getOrThrow(rotated).id, worker.agent.id)
        const found = (hash: string, now: Date) =>
          Effect.map(store.findAgentByKeyHash(hash, now), (o) => Option.getOrNull(Option.map(o, (a) => a.id)))
        assert.strictEqual(yield* found(second, NOW), worker.agent.id)
        assert.strictEqual(yield* found(worker.keyHash, NOW), worker.agent.id)
        assert.strictEqual(yield* found(worker.keyHash, at("2026-06-01T12:04:59.999Z")), worker.agent.id)
        assert.isNull(yield* found(worker.keyHash, graceEnd))

        // Rotating again during the grace: the first key is revoked at once, the second keeps a grace.
        const third = yield* hashApiKey(newApiKey())
        yield* store.rotateKey(accountId, worker.agent.id, { keyHash: third, previousExpiresAt: graceEnd })
        assert.isNull(yield* found(worker.keyHash, NOW))
        assert.strictEqual(yield* found(second, NOW), worker.agent.id)
        assert.strictEqual(yield* found(third, NOW), worker.agent.id)

        // No grace: the current key is revoked at once, and so is one still in its grace.
        const fourth = yield* hashApiKey(newApiKey())
        yield* store.rotateKey(accountId, worker.agent.id, { keyHash: fourth, previousExpiresAt: null })
        assert.isNull(yield* found(second, NOW))
        assert.isNull(yield* found(third, NOW))
        assert.strictEqual(yield* found(fourth, NOW), worker.agent.id)

        // Another account cannot rotate it.
        const other = yield* newAccount()
        const stolen = yield* store.rotateKey(other.accountId, worker.agent.id, {
          keyHash: yield* hashApiKey(newApiKey()),
          previousExpiresAt: null
        })
        assert.isTrue(Option.isNone(stolen))
        assert.strictEqual(yield* found(fourth, NOW), worker.agent.id)
      }))

    it.effect("deletes an agent: keys stop working, hidden from the list, still readable, never changed again", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const { accountId, owner } = yield* newAccount()
        const worker = yield* makeAgent(accountId, "worker", "agent", at("2026-01-02T00:00:00Z"))
        yield* store.createAgent(worker)
        const newer = yield* hashApiKey(newApiKey())
        yield* store.rotateKey(accountId, worker.agent.id, { keyHash: newer, previousExpiresAt: at("2026-06-02T00:00:00Z") })
        const deletedAt = at("2026-06-01T12:00:00Z")
        const deleted = yield* store.updateAgent(accountId, worker.agent.id, { deletedAt })
        assert.strictEqual(deleted._tag === "Updated" && deleted.agent.deletedAt?.toISOString(), deletedAt.toISOString())
        assert.isTrue(Option.isNone(yield* store.findAgentByKeyHash(newer, NOW)))
        assert.isTrue(Option.isNone(yield* store.findAgentByKeyHash(worker.keyHash, NOW)))
        const listed = yield* store.listAgents(accountId, { limit: 10, offset: 0 })
        assert.deepStrictEqual(listed.items.map((a) => a.id), [owner.agent.id])
        assert.strictEqual(listed.total, 1)
        const read = Option.getOrThrow(yield* store.getAgent(accountId, worker.agent.id))
        assert.strictEqual(read.agent.deletedAt?.toISOString(), deletedAt.toISOString())
        assert.strictEqual(read.agent.name, "worker")
        assert.strictEqual((yield* store.updateAgent(accountId, worker.agent.id, { name: "back" }))._tag, "NotFound")
        assert.strictEqual((yield* store.updateAgent(accountId, worker.agent.id, { deletedAt: NOW }))._tag, "NotFound")
        assert.isTrue(Option.isNone(yield* store.updatePolicy(accountId, worker.agent.id, { maxPerCallMicroUsd: 5n })))
        assert.isTrue(Option.isNone(yield* store.rotateKey(accountId, worker.agent.id, { keyHash: yield* hashApiKey(newApiKey()), previousExpiresAt: null })))
      }))

    it.effect("deleting follows the last-live-owner rule, and a deleted owner is not a live one", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const { accountId, owner } = yield* newAccount()
        assert.strictEqual((yield* store.updateAgent(accountId, owner.agent.id, { deletedAt: NOW }))._tag, "LastLiveOwner")
        const second = yield* makeAgent(accountId, "second", "owner", at("2026-01-02T00:00:00Z"))
        yield* store.createAgent(second)
        assert.strictEqual((yield* store.updateAgent(accountId, second.agent.id, { deletedAt: NOW }))._tag, "Updated")
        // The deleted owner does not count: the first owner is the last live one again.
        assert.strictEqual((yield* store.updateAgent(accountId, owner.agent.id, { killed: true }))._tag, "LastLiveOwner")
        assert.strictEqual((yield* store.updateAgent(accountId, owner.agent.id, { deletedAt: NOW }))._tag, "LastLiveOwner")
      }))

    it.effect("touches lastActiveAt only when it is stale", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const { accountId, owner } = yield* newAccount()
        const t1 = at("2026-05-01T10:00:00Z")
        yield* store.touchAgent(owner.agent.id, t1, at("2026-05-01T09:59:00Z"))
        const t2 = at("2026-05-01T10:00:30Z")
        yield* store.touchAgent(owner.agent.id, t2, at("2026-05-01T09:59:30Z"))
        const after = Option.getOrThrow(yield* store.getAgent(accountId, owner.agent.id))
        assert.strictEqual(after.agent.lastActiveAt?.toISOString(), t1.toISOString())
        const t3 = at("2026-05-01T10:01:00Z")
        yield* store.touchAgent(owner.agent.id, t3, at("2026-05-01T10:00:00.001Z"))
        const later = Option.getOrThrow(yield* store.getAgent(accountId, owner.agent.id))
        assert.strictEqual(later.agent.lastActiveAt?.toISOString(), t3.toISOString())
      }))

    it.effect("updates only the given policy fields and keeps big amounts exact", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const { accountId, owner } = yield* newAccount()
        const big = 999_999_999_999_999n
        const p1 = Option.getOrThrow(
          yield* store.updatePolicy(accountId, owner.agent.id, { maxPerCallMicroUsd: 375n, maxPerDayMicroUsd: big })
        )
        assert.deepStrictEqual(p1, {
          maxPerCallMicroUsd: 375n,
          maxPerDayMicroUsd: big,
          maxPerMonthMicroUsd: null,
          maxPerHourMicroUsd: null,
          maxCallsPerMinute: null,
          autoKill: false,
          allowedCapabilities: []
        })
        const p2 = Option.getOrThrow(
          yield* store.updatePolicy(accountId, owner.agent.id, { allowedCapabilities: ["reason", "search"] })
        )
        assert.deepStrictEqual(p2, {
          maxPerCallMicroUsd: 375n,
          maxPerDayMicroUsd: big,
          maxPerMonthMicroUsd: null,
          maxPerHourMicroUsd: null,
          maxCallsPerMinute: null,
          autoKill: false,
          allowedCapabilities: ["reason", "search"]
        })
        const monthly = Option.getOrThrow(yield* store.updatePolicy(accountId, owner.agent.id, { maxPerMonthMicroUsd: big }))
        assert.strictEqual(monthly.maxPerMonthMicroUsd, big)
        assert.strictEqual(monthly.maxPerDayMicroUsd, big)
        const noMonthly = Option.getOrThrow(yield* store.updatePolicy(accountId, owner.agent.id, { maxPerMonthMicroUsd: null }))
        assert.strictEqual(noMonthly.maxPerMonthMicroUsd, null)
        const p3 = Option.getOrThrow(yield* store.updatePolicy(accountId, owner.agent.id, { maxPerCallMicroUsd: null }))
        assert.strictEqual(p3.maxPerCallMicroUsd, null)
        assert.strictEqual(p3.maxPerDayMicroUsd, big)
        const unchanged = Option.getOrThrow(yield* store.updatePolicy(accountId, owner.agent.id, {}))
        assert.deepStrictEqual(unchanged, p3)
        const read = Option.getOrThrow(yield* store.getAgent(accountId, owner.agent.id))
        assert.deepStrictEqual(read.policy, p3)
      }))

    it.effect("refuses a second agent with the same key hash", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const { accountId, owner } = yield* newAccount()
        const clash = yield* makeAgent(accountId, "clash", "agent", at("2026-01-02T00:00:00Z"))
        const exit = yield* Effect.exit(store.createAgent({ ...clash, keyHash: owner.keyHash }))
        assert.isTrue(exit._tag === "Failure")
        assert.isTrue(Option.isNone(yield* store.getAgent(accountId, clash.agent.id)))
      }))

    it.effect("holds with a quote under velocity limits are decided on the exact last hour and minute, whatever the day counters bound", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const { accountId } = yield* newAccount()
        yield* store.credit({
          accountId,
          agentId: null,
          creditKey: "seed",
          pocket: "usd",
          amount: 100_000_000n,
          valueMicroUsd: 100_000_000n,
          rateMicroUsdPerBtc: null,
          description: "seed",
          transactionId: newTransactionId(),
          auditId: newAuditId(),
          now: NOW
        })
        const agent = yield* makeAgent(accountId, "worker", "agent", NOW)
        yield* store.createAgent(agent)
        const agentId = agent.agent.id
        // What the SQL stores run (the memory store runs none): which of the last hour's reads a hold made.
        const statements: Array<string> = []
        const recorded = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
          effect.pipe(Effect.provideService(Statement.CurrentTransformer, (statement) => {
            statements.push(statement.compile(true)[0])
            return Effect.succeed(statement)
          }))
        const reads = () => {
          const seen = statements.splice(0)
          return {
            bound: seen.some((text) => text.includes("hours_micro_usd[")),
            hour: seen.some((text) => text.includes("FILTER (WHERE created_at >")),
            minute: seen.some((text) => text.includes("COUNT(*) AS calls"))
          }
        }
        const sqlStore = name !== "memory"
        const hold = (amount: bigint, iso: string) =>
          Effect.gen(function*() {
            const now = at(iso)
            const quote: StoredQuote = {
              id: newQuoteId(),
              accountId,
              agentId,
              capability: "search",
              provider: "p",
              model: null,
              requestHash: "b".repeat(64),
              quotedMicroUsd: MicroUsd.make(amount),
              createdAt: now,
              expiresAt: new Date(now.getTime() + 60_000),
              usedAt: null,
              reservationId: null
            }
            yield* store.createQuote(quote)
            return yield* recorded(store.reserve({
              reservationId: newReservationId(),
              auditId: newAuditId(),
              accountId,
              agentId,
              capability: "search",
              provider: "p",
              quotedMicroUsd: quote.quotedMicroUsd,
              rate: null,
              day: iso.slice(0, 10),
              now,
              expiresAt: new Date(now.getTime() + 900_000),
              decide: (snapshot) => planHold(snapshot, "search", quote.quotedMicroUsd, null),
              standardRules: true,
              quote: {
                quoteId: quote.id,
                check: (found, at) =>
                  checkQuoteUse(found, { quoteId: quote.id, agentId, capability: "search", requestHash: quote.requestHash, now: at })
              }
            }))
          })
        const held = (result: Result.Result<unknown, { readonly _tag: string }>) => Result.isSuccess(result)

        // Under a $1 hourly limit. 14:10: $0.60 held, counted in hour 14 of the day's counter.
        assert.isDefined(yield* store.updatePolicy(accountId, agentId, { maxPerHourMicroUsd: 1_000_000n }))
        assert.isTrue(held(yield* hold(600_000n, "2026-06-01T14:10:00Z")))
        reads()
        // 15:30: the counters bound the hour at $0.60 (hour 14 on), with no room for $0.50; the
        // hour itself (from 14:30) holds nothing: read, and held.
        assert.isTrue(held(yield* hold(500_000n, "2026-06-01T15:30:00Z")))
        if (sqlStore) assert.deepStrictEqual(reads(), { bound: true, hour: true, minute: false })
        // 15:31: $0.50 in the hour, $0.50 more reaches the limit exactly: read, and held.
        assert.isTrue(held(yield* hold(500_000n, "2026-06-01T15:31:00Z")))
        if (sqlStore) assert.deepStrictEqual(reads(), { bound: true, hour: true, minute: false })
        // 15:32: $1.00 in the hour; $0.20 more does not fit: refused on the exact figure (the
        // counters' bound is $1.60).
        const refused = yield* hold(200_000n, "2026-06-01T15:32:00Z")
        assert.isTrue(Result.isFailure(refused) && refused.failure._tag === "VelocityExceeded")
        if (Result.isFailure(refused) && refused.failure._tag === "VelocityExceeded") {
          assert.strictEqual(refused.failure.spentLastHourMicroUsd, 1_000_000n)
        }
        if (sqlStore) assert.deepStrictEqual(reads(), { bound: true, hour: true, minute: false })
        // 17:00: the counters from hour 16 on hold nothing: bounded, the hour not read, held.
        assert.isTrue(held(yield* hold(900_000n, "2026-06-01T17:00:00Z")))
        if (sqlStore) assert.deepStrictEqual(reads(), { bound: true, hour: false, minute: false })
        // 17:05: $0.90 counted from hour 16 on, $0.20 more does not fit: read, refused.
        const again = yield* hold(200_000n, "2026-06-01T17:05:00Z")
        assert.isTrue(Result.isFailure(again) && again.failure._tag === "VelocityExceeded")
        if (sqlStore) assert.deepStrictEqual(reads(), { bound: true, hour: true, minute: false })

        // With two calls a minute as well: the hour bounded, the minute read, and counted exactly.
        assert.isDefined(yield* store.updatePolicy(accountId, agentId, { maxPerHourMicroUsd: 100_000_000n, maxCallsPerMinute: 2 }))
        assert.isTrue(held(yield* hold(1_000n, "2026-06-01T18:00:00Z")))
        if (sqlStore) assert.deepStrictEqual(reads(), { bound: true, hour: false, minute: true })
        assert.isTrue(held(yield* hold(1_000n, "2026-06-01T18:00:20Z")))
        const third = yield* hold(1_000n, "2026-06-01T18:00:40Z")
        assert.isTrue(Result.isFailure(third) && third.failure._tag === "CallRateExceeded")
        if (Result.isFailure(third) && third.failure._tag === "CallRateExceeded") {
          assert.strictEqual(third.failure.resetAt.toISOString(), "2026-06-01T18:01:00.000Z")
        }
        // A minute limit alone: only the minute is read.
        assert.isDefined(yield* store.updatePolicy(accountId, agentId, { maxPerHourMicroUsd: null, maxCallsPerMinute: 1 }))
        reads()
        assert.isTrue(held(yield* hold(1_000n, "2026-06-01T19:00:00Z")))
        if (sqlStore) assert.deepStrictEqual(reads(), { bound: false, hour: false, minute: true })
        const fourth = yield* hold(1_000n, "2026-06-01T19:00:30Z")
        assert.isTrue(Result.isFailure(fourth) && fourth.failure._tag === "CallRateExceeded")

        // Across midnight: the hour from 23:20 holds yesterday's 23:50 call, on yesterday's counter.
        assert.isDefined(yield* store.updatePolicy(accountId, agentId, { maxPerHourMicroUsd: 1_000_000n, maxCallsPerMinute: null }))
        assert.isTrue(held(yield* hold(600_000n, "2026-06-02T23:50:00Z")))
        reads()
        const midnight = yield* hold(500_000n, "2026-06-03T00:20:00Z")
        assert.isTrue(Result.isFailure(midnight) && midnight.failure._tag === "VelocityExceeded")
        if (Result.isFailure(midnight) && midnight.failure._tag === "VelocityExceeded") {
          assert.strictEqual(midnight.failure.spentLastHourMicroUsd, 600_000n)
        }
        if (sqlStore) assert.deepStrictEqual(reads(), { bound: true, hour: true, minute: false })
      }))

    it.effect("a quote is used up by exactly one hold, atomically; a refused hold leaves it unused", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const { accountId, owner } = yield* newAccount()
        const other = yield* newAccount()
        yield* store.credit({
          accountId,
          agentId: null,
          creditKey: "seed",
          pocket: "usd",
          amount: 1_000_000n,
          valueMicroUsd: 1_000_000n,
          rateMicroUsdPerBtc: null,
          description: "seed",
          transactionId: newTransactionId(),
          auditId: newAuditId(),
          now: NOW
        })
        const quote: StoredQuote = {
          id: newQuoteId(),
          accountId,
          agentId: owner.agent.id,
          capability: "search",
          provider: "p",
          model: null,
          requestHash: "a".repeat(64),
          quotedMicroUsd: MicroUsd.make(50_000n),
          createdAt: NOW,
          expiresAt: new Date(NOW.getTime() + 60_000),
          usedAt: null,
          reservationId: null
        }
        yield* store.createQuote(quote)
        assert.deepStrictEqual(Option.getOrThrow(yield* store.findQuote(accountId, quote.id)), quote)
        assert.isTrue(Option.isNone(yield* store.findQuote(other.accountId, quote.id)))

        const claim: QuoteClaim = {
          quoteId: quote.id,
          check: (found, now) =>
            checkQuoteUse(found, { quoteId: quote.id, agentId: owner.agent.id, capability: "search", requestHash: quote.requestHash, now })
        }
        const hold = (allow: boolean, now = NOW): ReserveInput => ({
          reservationId: newReservationId(),
          auditId: newAuditId(),
          accountId,
          agentId: owner.agent.id,
          capability: "search",
          provider: "p",
          quotedMicroUsd: quote.quotedMicroUsd,
          rate: null,
          day: "2026-06-01",
          now,
          expiresAt: new Date(now.getTime() + 900_000),
          decide: () =>
            allow
              ? Result.succeed({ fromUsdMicroUsd: quote.quotedMicroUsd, fromSatsMsat: Msat.make(0n) })
              : Result.fail(new InsufficientBalance({ balanceMicroUsd: 0n, quotedMicroUsd: quote.quotedMicroUsd })),
          quote: claim
        })

        // Refused by the spend rules: nothing held, the quote unused.
        const refused = yield* store.reserve(hold(false))
        assert.isTrue(Result.isFailure(refused) && refused.failure._tag === "InsufficientBalance")
        assert.isNull(Option.getOrThrow(yield* store.findQuote(accountId, quote.id)).usedAt)
        // Another account's hold never sees the quote.
        const foreign = yield* store.reserve({ ...hold(true), accountId: other.accountId, agentId: other.owner.agent.id })
        assert.isTrue(Result.isFailure(foreign) && foreign.failure._tag === "NotFound")
        // Past its expiry: refused, unused.
        const late = yield* store.reserve(hold(true, new Date(NOW.getTime() + 60_000)))
        assert.isTrue(Result.isFailure(late) && late.failure._tag === "QuoteExpired")

        // Ten holds race for it: exactly one is made, and the quote names it.
        const raced = yield* Effect.all(Array.from({ length: 10 }, () => store.reserve(hold(true))), { concurrency: "unbounded" })
        const made = raced.filter(Result.isSuccess)
        assert.strictEqual(made.length, 1)
        for (const r of raced.filter(Result.isFailure)) assert.strictEqual(r.failure._tag, "QuoteUsed")
        const used = Option.getOrThrow(yield* store.findQuote(accountId, quote.id))
        assert.strictEqual(used.usedAt?.toISOString(), NOW.toISOString())
        assert.strictEqual(used.reservationId, made[0]!.success.id)
        const wallet = yield* store.getWallet(accountId)
        assert.strictEqual(wallet.usdMicroUsd, 950_000n)
        const held = yield* store.listReservations(accountId, { limit: 100, offset: 0 })
        assert.strictEqual(held.total, 1)

        // Expired quotes are deleted in bounded batches; a live one is kept.
        const live = { ...quote, id: newQuoteId(), expiresAt: new Date(NOW.getTime() + 3_600_000), usedAt: null, reservationId: null }
        yield* store.createQuote(live)
        assert.strictEqual(yield* store.deleteExpiredQuotes(new Date(NOW.getTime() + 120_000), 100), 1)
        assert.isTrue(Option.isNone(yield* store.findQuote(accountId, quote.id)))
        assert.isTrue(Option.isSome(yield* store.findQuote(accountId, live.id)))
      }))

    it.effect("walks transactions by keyset (before), ties on createdAt broken by id, and reads one by id in its account only", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const { accountId, owner } = yield* newAccount()
        const other = yield* newAccount()
        // Seven credits, three of them in the same millisecond.
        const times = ["01", "02", "03", "03", "03", "04", "05"].map((m) => at(`2026-06-01T10:${m}:00Z`))
        for (const [i, now] of times.entries()) {
          yield* store.credit({
            accountId,
            agentId: owner.agent.id,
            creditKey: `k${i}`,
            pocket: "usd",
            amount: 10_000n,
            valueMicroUsd: 10_000n,
            rateMicroUsdPerBtc: null,
            description: `credit ${i}`,
            transactionId: newTransactionId(),
            auditId: newAuditId(),
            now
          })
        }
        const all = (yield* store.listTransactions(accountId, {}, { limit: 100, offset: 0 })).items
        assert.strictEqual(all.length, 7)
        const walked: Array<string> = []
        let before: { createdAt: Date; id: string } | undefined = undefined
        for (let step = 0; step < 10; step++) {
          const page: Page<Transaction> = yield* store.listTransactions(accountId, { before }, { limit: 2, offset: 0 })
          if (page.items.length === 0) break
          walked.push(...page.items.map((t) => t.id))
          const last: Transaction = page.items[page.items.length - 1]!
          before = { createdAt: last.createdAt, id: last.id }
        }
        assert.deepStrictEqual(walked, all.map((t) => t.id))
        const found = yield* store.getTransaction(accountId, all[3]!.id)
        assert.deepStrictEqual(Option.getOrThrow(found), all[3])
        assert.isTrue(Option.isNone(yield* store.getTransaction(other.accountId, all[3]!.id)))
        assert.isTrue(Option.isNone(yield* store.getTransaction(accountId, "txn_nothing")))
        // Credits are not spend.
        const groups = yield* store.spendGroups(accountId, { from: at("2026-06-01T00:00:00Z"), until: at("2026-06-02T00:00:00Z") })
        assert.deepStrictEqual(groups, { byDay: [], byAgent: [], byCapability: [], byProvider: [] })
      }))

    it.effect("answers ping", () => Effect.gen(function*() {
      yield* (yield* Store).ping
    }))
  })
