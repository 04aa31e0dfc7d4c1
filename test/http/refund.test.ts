import { Effect, Result } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Agents } from "../../src/agents/Agents.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { parseBtcUsdRate } from "../../src/domain/Money.ts"
import { Store } from "../../src/ports/Store.ts"
import { Spend } from "../../src/wallet/Spend.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { client, errorCode, type RunningServer, startServer, storeBackends } from "../support/server.ts"

const RATE = Result.getOrThrow(parseBtcUsdRate("50000"))
const TOKEN = "admin-token-for-refund-tests-0123456789"

describe.each(storeBackends)("POST /v1/admin/transactions/{id}/refund over %s", (_name, store) => {
  let server: RunningServer
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    server = await startServer(store(), { rate: RATE, adminToken: TOKEN })
    api = client(server.baseUrl)
  })
  afterAll(() => server?.close())

  const refund = (id: string, body: unknown, headers: Record<string, string> = {}, token = TOKEN) =>
    api.call("POST", `/v1/admin/transactions/${id}/refund`, { body, headers: { authorization: `Bearer ${token}`, ...headers } })

  /** An account with 10 USD and 2000 sats, and one 10-cent call (charged 8 cents) made through the core. */
  const setup = async () => {
    const signup = await api.post("/v1/signup", { name: "ops" })
    const ownerKey: string = signup.body.apiKey
    const accountId: AccountId = signup.body.accountId
    const receipt = await server.run(Effect.gen(function*() {
      const agents = yield* Agents
      const wallets = yield* Wallets
      yield* wallets.credit({ accountId, key: "card-1", pocket: "usd", amount: 10_000_000n, description: "card funding" })
      yield* wallets.credit({ accountId, key: "ln-1", pocket: "sats", amount: 2_000_000n, description: "lightning funding" })
      const owner = yield* agents.authenticate(ownerKey)
      const spent = yield* (yield* Spend).spend(owner, {
        capability: "search",
        provider: "brave",
        quotedMicroUsd: 100_000n,
        description: "search call",
        run: Effect.succeed({ value: null, actualMicroUsd: 80_000n })
      })
      return spent.receipt
    }))
    return { ownerKey, accountId, chargeId: receipt.transactionId }
  }

  it("refunds part, then the rest; the refunds show in the account's transactions and balance", async () => {
    const { ownerKey, accountId, chargeId } = await setup()
    const part = await refund(chargeId, { amountUsdCents: 2.5, reason: "slow answer" })
    expect(part.status).toBe(201)
    expect(part.body).toMatchObject({
      refund: {
        type: "refund",
        amountUsdCents: 2.5,
        pockets: { usdCents: 2.5, sats: 0 },
        refundOf: chargeId,
        accountId,
        reason: "slow answer",
        capability: "search",
        provider: "brave"
      },
      charge: { id: chargeId, amountUsdCents: 8, refundedUsdCents: 2.5, remainingUsdCents: 5.5 },
      wallet: { balanceUsdCents: 994.5, balanceSats: 2000 }
    })
    const rest = await refund(chargeId, { reason: "the rest" })
    expect(rest.status).toBe(201)
    expect(rest.body.charge).toMatchObject({ refundedUsdCents: 8, remainingUsdCents: 0 })
    expect((await api.get("/v1/wallet", ownerKey)).body.balanceUsdCents).toBe(1000)
    const listed = await api.get("/v1/wallet/transactions?type=refund", ownerKey)
    expect(listed.status).toBe(200)
    expect(listed.body.total).toBe(2)
    expect(listed.body.transactions.map((t: { refundOf: string }) => t.refundOf)).toEqual([chargeId, chargeId])
    // The charge itself carries no refundOf.
    const charges = await api.get("/v1/wallet/transactions?type=charge", ownerKey)
    expect(charges.body.transactions[0].refundOf).toBeUndefined()
    // The audit record of a refund, readable by the account.
    const audit = await api.get(`/v1/audit/${rest.body.refund.auditId}`, ownerKey)
    expect(audit.status).toBe(200)
    expect(audit.body).toMatchObject({ kind: "refund", verified: true })
    const admin = await api.call("GET", `/v1/admin/audit-logs?accountId=${accountId}&kind=refund`, { headers: { authorization: `Bearer ${TOKEN}` } })
    expect(admin.body.total).toBe(2)
  })

  it("answers over-refunds, non-charges and unknown ids in the envelope, and changes nothing", async () => {
    const { ownerKey, chargeId } = await setup()
    const over = await refund(chargeId, { amountUsdCents: 9, reason: "too much" })
    expect(over.status).toBe(409)
    expect(errorCode(over)).toBe("REFUND_EXCEEDS_CHARGE")
    expect(over.body.error.details).toEqual({ charged: 8, refunded: 0, remaining: 8, requested: 9 })
    const credits = await api.get("/v1/wallet/transactions?type=credit", ownerKey)
    const notCharge = await refund(credits.body.transactions[0].id, { reason: "not a charge" })
    expect(notCharge.status).toBe(409)
    expect(errorCode(notCharge)).toBe("CONFLICT")
    expect(notCharge.body.error.details).toEqual({ type: "credit" })
    const unknown = await refund("txn_unknown", { reason: "who" })
    expect(unknown.status).toBe(404)
    expect(errorCode(unknown)).toBe("NOT_FOUND")
    const zero = await refund(chargeId, { amountUsdCents: 0, reason: "nothing" })
    expect(zero.status).toBe(400)
    expect(errorCode(zero)).toBe("INVALID_AMOUNT")
    for (const body of [
      {},
      { reason: "" },
      { reason: "   " },
      { reason: "x".repeat(501) },
      { reason: "line\nbreak" },
      { reason: "ok", amountUsdCents: -1 },
      { reason: "ok", amountUsdCents: 0.00001 },
      { reason: "ok", amountUsdCents: "1" },
      { reason: "ok", extra: true }
    ]) {
      const res = await refund(chargeId, body)
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(errorCode(res), JSON.stringify(body)).toBe("VALIDATION_ERROR")
    }
    expect((await api.get("/v1/wallet", ownerKey)).body.balanceUsdCents).toBe(992)
    expect((await api.get("/v1/wallet/transactions?type=refund", ownerKey)).body.total).toBe(0)
  })

  it("a retry with the same Idempotency-Key returns the same refund, not a second one", async () => {
    const { ownerKey, chargeId } = await setup()
    const headers = { "idempotency-key": `refund-${chargeId}` }
    const body = { amountUsdCents: 3, reason: "duplicate delivery" }
    const [first, second] = await Promise.all([refund(chargeId, body, headers), refund(chargeId, body, headers)])
    const third = await refund(chargeId, body, headers)
    for (const res of [first, second, third]) expect(res.status).toBe(201)
    expect(second.body.refund.id).toBe(first.body.refund.id)
    expect(third.body.refund.id).toBe(first.body.refund.id)
    expect(third.headers.get("idempotent-replayed")).toBe("true")
    expect((await api.get("/v1/wallet/transactions?type=refund", ownerKey)).body.total).toBe(1)
    expect((await api.get("/v1/wallet", ownerKey)).body.balanceUsdCents).toBe(995)
    // The same key with another body is a conflict; a new key is a new refund.
    const conflict = await refund(chargeId, { amountUsdCents: 4, reason: "duplicate delivery" }, headers)
    expect(errorCode(conflict)).toBe("IDEMPOTENCY_CONFLICT")
    const another = await refund(chargeId, body, { "idempotency-key": `again-${chargeId}` })
    expect(another.status).toBe(201)
    expect(another.body.refund.id).not.toBe(first.body.refund.id)
    expect(another.body.charge.remainingUsdCents).toBe(2)
  })

  it("admin keys have their own scope: a key a signup from the same address used is free for a refund", async () => {
    const { chargeId } = await setup()
    const key = `shared-${chargeId}`
    const signup = await api.call("POST", "/v1/signup", { body: { name: "same address" }, headers: { "idempotency-key": key } })
    expect(signup.status).toBe(201)
    const res = await refund(chargeId, { amountUsdCents: 1, reason: "own scope" }, { "idempotency-key": key })
    expect(res.status).toBe(201)
    expect(res.body.refund.type).toBe("refund")
  })

  it("is the operator's only: an agent key gets 403, another token 401", async () => {
    const { ownerKey, chargeId } = await setup()
    expect(errorCode(await refund(chargeId, { reason: "mine" }, {}, ownerKey))).toBe("FORBIDDEN")
    expect(errorCode(await refund(chargeId, { reason: "mine" }, {}, "wrong-token"))).toBe("UNAUTHORIZED")
    expect((await api.get("/v1/wallet", ownerKey)).body.balanceUsdCents).toBe(992)
  })

  it("writes one charge.refunded event per refund, with the refund, in the outbox", async () => {
    const { accountId, chargeId } = await setup()
    const outbox = () =>
      server.run(Effect.gen(function*() {
        return yield* (yield* Store).listWebhookEvents(accountId, { limit: 100, offset: 0 })
      })).then((page) => page.items.filter((e) => e.type === "charge.refunded").map((e) => JSON.parse(e.payload)))
    expect(await outbox()).toEqual([])
    const part = await refund(chargeId, { amountUsdCents: 3, reason: "partial" })
    expect(part.status, part.text).toBe(201)
    // A refused refund (more than remains) writes nothing.
    expect(errorCode(await refund(chargeId, { amountUsdCents: 100, reason: "too much" }))).toBe("REFUND_EXCEEDS_CHARGE")
    const rest = await refund(chargeId, { reason: "the rest" })
    expect(rest.status, rest.text).toBe(201)
    const events = await outbox()
    expect(events.map((e) => e.data).sort((a, b) => a.amountUsdCents - b.amountUsdCents)).toEqual([
      { transactionId: chargeId, refundTransactionId: part.body.refund.id, agentId: expect.any(String), amountUsdCents: 3 },
      { transactionId: chargeId, refundTransactionId: rest.body.refund.id, agentId: expect.any(String), amountUsdCents: 5 }
    ])
  })
})
