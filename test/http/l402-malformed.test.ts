import { Effect, Layer, Option } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Espeak from "../../adapters/providers/speak/espeak.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import type { Transaction, Wallet } from "../../src/domain/Ledger.ts"
import type { BtcUsdRate } from "../../src/domain/Money.ts"
import { L402Store } from "../../src/ports/L402Store.ts"
import { Store } from "../../src/ports/Store.ts"
import { type RunningServer, startServer, storeBackends } from "../support/server.ts"

/**
 * L402 selling (docs/l402.md) against what a caller may send wrong, over
 * HTTP on a real server: a malformed `Authorization: L402 …` header is a 4xx
 * in the error envelope (never a 500), and charges nothing: the sales
 * wallet and its transactions do not move and the token bought beforehand
 * keeps its one call. `Idempotency-Key` (and `X-Spendgate-Quote`) with an
 * L402 token are refused 400 as documented, the same way.
 */

const RATE: BtcUsdRate = { microUsdPerBtc: 100_000_000_000n } // $100,000 per BTC
const SPEAK = { text: "Hello from the open web", voice: "en" }
const PATH = "/v1/capabilities/speak"

interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: any
}

let server: RunningServer

const call = async (headers: Record<string, string> = {}, body: unknown = SPEAK): Promise<Answer> => {
  const response = await fetch(`${server.baseUrl}${PATH}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body)
  })
  const text = await response.text()
  return { status: response.status, headers: response.headers, body: text === "" ? undefined : JSON.parse(text) }
}

/** A token bought as a buyer buys one: the 402's challenge, the dev rail's payment (which answers the preimage). */
const buy = async () => {
  const first = await call()
  expect(first.status).toBe(402)
  const { macaroon, invoice } = first.body.error.details as { macaroon: string; invoice: string }
  const paid = await fetch(`${server.baseUrl}/v1/dev/lightning/pay`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ paymentRequest: invoice })
  })
  expect(paid.status).toBe(200)
  const preimage = ((await paid.json()) as { preimage: string }).preimage
  expect(preimage).toMatch(/^[0-9a-f]{64}$/)
  return { macaroon, preimage }
}

/** The sales account's books: its wallet and every transaction. */
const books = () =>
  server.run(Effect.gen(function*() {
    const store = yield* Store
    const sales = Option.getOrThrow(yield* (yield* L402Store).salesAccount)
    const wallet = yield* store.getWallet(sales.accountId)
    const transactions = yield* store.listTransactions(sales.accountId, {}, { limit: 1000, offset: 0 })
    return { wallet, transactions: transactions.items.map((t) => t.id) }
  }) as Effect.Effect<{ wallet: Wallet; transactions: ReadonlyArray<Transaction["id"]> }, never, Store>)

/** A refusal in the error envelope: a 4xx with `{ error: { code, message, … } }` and nothing else. */
const expectEnvelope = (answer: Answer, status: number, code: string, what: string) => {
  expect(answer.status, what).toBe(status)
  expect(Object.keys(answer.body ?? {}), what).toEqual(["error"])
  expect(answer.body.error.code, what).toBe(code)
  expect(typeof answer.body.error.message, what).toBe("string")
  expect(answer.headers.get("content-type"), what).toMatch(/^application\/json/)
}

const speakProvider = Layer.effect(Providers, Effect.map(
  Espeak.make({ unitPrice: { per: "1k_chars", priceMicroUsd: 15_000n } }),
  (provider) => ({ all: [provider] })
))

beforeAll(async () => {
  server = await startServer(storeBackends[0]![1](), {
    rate: RATE,
    providers: speakProvider,
    l402: { settings: { marginPercent: 10, tokenTtlSeconds: 3600, callsPerToken: 1 }, anonymousPerMinute: 10_000 }
  })
}, 30_000)
afterAll(() => server?.close())

describe("L402 selling: malformed Authorization headers", () => {
  it("are refused 401 L402_TOKEN_INVALID in the envelope, charge nothing, and leave the bought token its call", async () => {
    const { macaroon, preimage } = await buy()
    const before = await books()
    const cases: ReadonlyArray<readonly [string, string]> = [
      ["bad base64: characters outside the alphabet", `L402 !!not*base64!!:${preimage}`],
      ["bad base64: a length base64 cannot have", `L402 AAAAA:${preimage}`],
      ["bad base64: padding in the middle", `L402 AA=A${macaroon}:${preimage}`],
      ["base64 of something that is not a macaroon", `L402 bm90IGEgbWFjYXJvb24=:${preimage}`],
      ["base64 of zero bytes", `L402 AAAA:${preimage}`],
      ["the macaroon cut short", `L402 ${macaroon.slice(0, -12)}:${preimage}`],
      ["no preimage", `L402 ${macaroon}`],
      ["no preimage after the colon", `L402 ${macaroon}:`],
      ["no macaroon", `L402 :${preimage}`],
      ["nothing after the scheme", "L402"],
      ["the older scheme, nothing after it", "LSAT "],
      ["a preimage that is not hex", `L402 ${macaroon}:${"z".repeat(64)}`],
      ["a preimage of 63 hex characters", `L402 ${macaroon}:${preimage.slice(1)}`],
      ["a preimage of 66 hex characters", `L402 ${macaroon}:${preimage}00`],
      ["a preimage of 32 hex characters", `L402 ${macaroon}:${preimage.slice(0, 32)}`],
      ["the preimage twice", `L402 ${macaroon}:${preimage}:${preimage}`],
      ["many colons", `L402 ${macaroon}::::${preimage}`],
      ["only colons", "L402 ::::::::"],
      ["a colon inside the macaroon", `L402 ${macaroon.slice(0, 20)}:${macaroon.slice(20)}:${preimage}`],
      ["a space inside the token", `L402 ${macaroon} :${preimage}`],
      ["the fields swapped", `L402 ${preimage}:${macaroon}`],
      ["a macaroon of 12,000 characters (under the 16 KiB header limit)", `L402 ${"A".repeat(12_000)}:${preimage}`],
      ["a real macaroon behind 10,000 characters", `L402 ${"A".repeat(10_000)}${macaroon}:${preimage}`],
      ["the older scheme, a preimage that is not hex", `LSAT ${macaroon}:${"g".repeat(64)}`]
    ]
    for (const [what, authorization] of cases) {
      const answer = await call({ authorization })
      expectEnvelope(answer, 401, "L402_TOKEN_INVALID", what)
      expect(answer.headers.get("www-authenticate"), what).toBeNull()
    }
    expect(await books()).toEqual(before)
    // The token bought before all that still buys its one call.
    expect((await call({ authorization: `L402 ${macaroon}:${preimage}` })).status).toBe(200)
  }, 60_000)

  it("a header over the 16 KiB limit is 431 in the envelope, and charges nothing", async () => {
    const { macaroon, preimage } = await buy()
    const before = await books()
    const answer = await call({ authorization: `L402 ${"A".repeat(20_000)}${macaroon}:${preimage}` })
    expectEnvelope(answer, 431, "HEADERS_TOO_LARGE", "a 20 KB token")
    expect(await books()).toEqual(before)
    expect((await call({ authorization: `L402 ${macaroon}:${preimage}` })).status).toBe(200)
  }, 30_000)
})

describe("L402 selling: Idempotency-Key and X-Spendgate-Quote", () => {
  it("with a valid token: 400 VALIDATION_ERROR, nothing charged, the token's call not used", async () => {
    const { macaroon, preimage } = await buy()
    const authorization = `L402 ${macaroon}:${preimage}`
    const before = await books()
    for (
      const [what, headers] of [
        ["Idempotency-Key", { authorization, "idempotency-key": "retry-1" }],
        ["X-Spendgate-Quote", { authorization, "x-spendgate-quote": "qt_anything" }],
        ["both", { authorization, "idempotency-key": "retry-1", "x-spendgate-quote": "qt_anything" }],
        ["with the older scheme", { authorization: `LSAT ${macaroon}:${preimage}`, "idempotency-key": "retry-1" }]
      ] as const
    ) {
      const answer = await call(headers)
      expectEnvelope(answer, 400, "VALIDATION_ERROR", what)
      expect(answer.body.error.message, what).toContain("cannot be used with an L402 token")
    }
    expect(await books()).toEqual(before)
    // Without the header the same token buys its call, once.
    const bought = await call({ authorization })
    expect(bought.status).toBe(200)
    expect(bought.headers.get("idempotent-replayed")).toBeNull()
    expectEnvelope(await call({ authorization }), 402, "L402_TOKEN_USED", "spent")
  }, 30_000)

  it("with a malformed or wrong token: the token is refused first (401), whatever the key", async () => {
    const { macaroon, preimage } = await buy()
    const malformed = await call({ authorization: `L402 ${macaroon}:xyz`, "idempotency-key": "k-1" })
    expectEnvelope(malformed, 401, "L402_TOKEN_INVALID", "malformed")
    // A well-formed token is not read before the header check: the key is refused first.
    const wrong = await call({ authorization: `L402 ${macaroon}:${"0".repeat(64)}`, "idempotency-key": "k-1" })
    expectEnvelope(wrong, 400, "VALIDATION_ERROR", "well-formed, wrong preimage")
    expect((await call({ authorization: `L402 ${macaroon}:${preimage}` })).status).toBe(200)
  }, 30_000)

  it("without a token (a request for a challenge) the key is not used: every request gets a fresh challenge", async () => {
    const first = await call({ "idempotency-key": "anon-1" })
    const second = await call({ "idempotency-key": "anon-1" })
    for (const answer of [first, second]) {
      expectEnvelope(answer, 402, "PAYMENT_REQUIRED", "challenge")
      expect(answer.headers.get("idempotent-replayed")).toBeNull()
    }
    expect(second.body.error.details.paymentHash).not.toBe(first.body.error.details.paymentHash)
  }, 30_000)
})
