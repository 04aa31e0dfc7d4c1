import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as WebhookHttp from "../../adapters/net/webhookTransport.ts"
import { storeOverClient } from "../../adapters/sql/Database.ts"
import * as PgliteClient from "../../adapters/sql/PgliteClient.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { Store } from "../../src/ports/Store.ts"
import { client, errorCode, type RunningServer, startServer } from "../support/server.ts"
import { freshPostgresLayer } from "../support/postgres.ts"
import { type Receiver, startReceiver } from "../support/webhookReceiver.ts"

/**
 * The transactional outbox on SQL: an event and the change it describes
 * commit together or not at all. The outbox is broken on purpose (a CHECK
 * that refuses one event type) and the change must then not happen either.
 */

const sqlBackends: ReadonlyArray<readonly [string, () => Layer.Layer<any, unknown>]> = [
  ["PGlite", () => storeOverClient.pipe(Layer.provideMerge(PgliteClient.layer({ dataDir: undefined })))],
  ["PostgreSQL", () => storeOverClient.pipe(Layer.provideMerge(freshPostgresLayer()))]
]

describe.each(sqlBackends)("webhook outbox over %s", (_name, store) => {
  let server: RunningServer
  let receiver: Receiver
  let api: ReturnType<typeof client>
  let owner: string
  let accountId: AccountId

  const exec = (statement: string) =>
    server.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(statement)
    }) as Effect.Effect<void>)
  const eventTypes = () =>
    server.run(Effect.gen(function*() {
      return yield* (yield* Store).listWebhookEvents(accountId, { limit: 100, offset: 0 })
    })).then((page) => page.items.map((e) => e.type))

  beforeAll(async () => {
    receiver = await startReceiver()
    server = await startServer(store(), {
      webhooks: WebhookHttp.layer({ allowHosts: [`127.0.0.1:${receiver.port}`] })
    })
    api = client(server.baseUrl)
    const signup = await api.post("/v1/signup", { name: "owner" })
    owner = signup.body.apiKey
    accountId = signup.body.accountId
    expect((await api.call("POST", "/v1/webhooks", { key: owner, body: { url: receiver.url } })).status).toBe(201)
  }, 60_000)
  afterAll(async () => {
    await server?.close()
    await receiver?.close()
  })

  it("a credit whose invoice.paid cannot be written does not happen; once it can, both commit", async () => {
    const invoice = await api.post("/v1/wallet/fund", { amountSats: 2000 }, owner)
    await exec(`ALTER TABLE webhook_events ADD CONSTRAINT outbox_down CHECK (type <> 'invoice.paid') NOT VALID`)
    const failed = await api.post("/v1/dev/lightning/pay", { paymentRequest: invoice.body.paymentRequest })
    expect(failed.status).toBe(500)
    expect((await api.get("/v1/wallet", owner)).body.balanceSats).toBe(0)
    expect((await api.get("/v1/wallet/transactions?type=credit", owner)).body.total).toBe(0)
    expect((await api.get("/v1/wallet/invoices", owner)).body.invoices[0].status).toBe("pending")
    expect(await eventTypes()).not.toContain("invoice.paid")

    await exec(`ALTER TABLE webhook_events DROP CONSTRAINT outbox_down`)
    expect((await api.post("/v1/dev/lightning/pay", { paymentRequest: invoice.body.paymentRequest })).status).toBe(200)
    expect((await api.get("/v1/wallet", owner)).body.balanceSats).toBe(2000)
    expect((await eventTypes()).filter((t) => t === "invoice.paid")).toHaveLength(1)
    const pending = await server.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return yield* sql<{ n: string | number }>`SELECT count(*) AS n FROM webhook_deliveries WHERE event_type = 'invoice.paid'`
    }) as Effect.Effect<ReadonlyArray<{ n: string | number }>>)
    expect(Number(pending[0]!.n)).toBe(1)
  })

  it("a kill whose agent.killed cannot be written does not happen, and a new agent with no agent.created is not created", async () => {
    const agent = await api.post("/v1/agents", { name: "bot" }, owner)
    await exec(`ALTER TABLE webhook_events ADD CONSTRAINT outbox_down CHECK (type NOT IN ('agent.killed', 'agent.created')) NOT VALID`)
    const kill = await api.patch(`/v1/agents/${agent.body.id}`, { killed: true }, owner)
    expect(kill.status).toBe(500)
    expect(errorCode(kill)).toBe("INTERNAL")
    expect((await api.get(`/v1/agents/${agent.body.id}`, owner)).body.killed).toBe(false)
    expect((await api.post("/v1/agents", { name: "ghost" }, owner)).status).toBe(500)
    const names = (await api.get("/v1/agents", owner)).body.agents.map((a: any) => a.name)
    expect(names).not.toContain("ghost")
    await exec(`ALTER TABLE webhook_events DROP CONSTRAINT outbox_down`)
    expect((await api.patch(`/v1/agents/${agent.body.id}`, { killed: true }, owner)).body.killed).toBe(true)
    expect((await eventTypes()).filter((t) => t === "agent.killed")).toHaveLength(1)
  })

  it("the invoice expiry sweep writes invoice.expired with each expiry", async () => {
    const invoice = await api.post("/v1/wallet/fund", { amountSats: 10 }, owner)
    await exec(`UPDATE invoices SET expires_at = now() - interval '1 minute' WHERE id = '${invoice.body.invoiceId}'`)
    const { Funding } = await import("../../src/funding/Funding.ts")
    const expired = await server.run(Effect.gen(function*() {
      return yield* (yield* Funding).expireDue
    }))
    expect(expired).toBe(1)
    expect((await eventTypes()).filter((t) => t === "invoice.expired")).toHaveLength(1)
    // A second pass finds nothing and writes nothing.
    await server.run(Effect.gen(function*() {
      return yield* (yield* Funding).expireDue
    }))
    expect((await eventTypes()).filter((t) => t === "invoice.expired")).toHaveLength(1)
  })

  it("a payment after expiry writes invoice.late_payment once, and credits nothing", async () => {
    const invoice = await api.post("/v1/wallet/fund", { amountSats: 30 }, owner)
    const before = (await api.get("/v1/wallet", owner)).body.balanceSats
    await exec(`UPDATE invoices SET expires_at = now() - interval '1 minute' WHERE id = '${invoice.body.invoiceId}'`)
    await api.post("/v1/dev/lightning/pay", { paymentRequest: invoice.body.paymentRequest })
    await api.post("/v1/dev/lightning/pay", { paymentRequest: invoice.body.paymentRequest })
    expect((await api.get("/v1/wallet", owner)).body.balanceSats).toBe(before)
    const late = await server.run(Effect.gen(function*() {
      return yield* (yield* Store).listWebhookEvents(accountId, { limit: 100, offset: 0 })
    })).then((page) => page.items.filter((e) => e.type === "invoice.late_payment").map((e) => JSON.parse(e.payload)))
    expect(late).toHaveLength(1)
    expect(late[0].data).toMatchObject({ invoiceId: invoice.body.invoiceId, invoiceType: "lightning", status: "expired", amountSats: 30 })
  })
})

