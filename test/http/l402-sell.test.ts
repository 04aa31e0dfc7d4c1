import { createHash } from "node:crypto"
import { Effect, Layer, Option } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Espeak from "../../adapters/providers/speak/espeak.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import type { BtcUsdRate } from "../../src/domain/Money.ts"
import type { Transaction, Wallet } from "../../src/domain/Ledger.ts"
import { L402Store } from "../../src/ports/L402Store.ts"
import { Store } from "../../src/ports/Store.ts"
import { type RunningServer, startServer, storeBackends } from "../support/server.ts"

/**
 * Selling a capability over L402 to a caller with no account, against a
 * real server on a loopback port, the built-in `speak` provider (eSpeak NG,
 * run for real) and the dev Lightning rail.
 *
 * The buyer below is written from the L402 protocol alone: plain fetch, its
 * own parsing of `WWW-Authenticate`, the dev rail's payer route to pay the
 * invoice (which answers the preimage, as a wallet learns it when its
 * payment settles), and `Authorization: L402 <macaroon>:<preimage>`.
 */

const RATE: BtcUsdRate = { microUsdPerBtc: 100_000_000_000n } // $100,000 per BTC
const SPEAK = { text: "Hello from the open web", voice: "en" }

// ---- the buyer, from the protocol text ------------------------------------------

interface Challenge {
  readonly macaroon: string
  readonly invoice: string
}

/** `L402 macaroon="…", invoice="…"` (also `LSAT`, and `token=` for the macaroon). */
const parseChallenge = (header: string | null): Challenge | undefined => {
  if (header === null) return undefined
  const scheme = /^\s*(L402|LSAT)\s+(.*)$/i.exec(header)
  if (scheme === null) return undefined
  const params = new Map<string, string>()
  for (const match of scheme[2]!.matchAll(/([A-Za-z]+)\s*=\s*"([^"]*)"/g)) params.set(match[1]!.toLowerCase(), match[2]!)
  const macaroon = params.get("macaroon") ?? params.get("token")
  const invoice = params.get("invoice")
  return macaroon === undefined || invoice === undefined ? undefined : { macaroon, invoice }
}

interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: any
}

const call = async (baseUrl: string, path: string, body: unknown, authorization?: string): Promise<Answer> => {
  const response = await fetch(`${baseUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(authorization === undefined ? {} : { authorization }) },
    body: JSON.stringify(body)
  })
  const text = await response.text()
  return { status: response.status, headers: response.headers, body: text === "" ? undefined : JSON.parse(text) }
}

/** Pays a dev-rail invoice; a payment's proof is its preimage. */
const pay = async (baseUrl: string, invoice: string): Promise<string> => {
  const paid = await call(baseUrl, "/v1/dev/lightning/pay", { paymentRequest: invoice })
  expect(paid.status).toBe(200)
  expect(paid.body.preimage).toMatch(/^[0-9a-f]{64}$/)
  return paid.body.preimage
}

/** One call bought: the challenge, the payment, the token. */
const buy = async (baseUrl: string, capability: string, body: unknown) => {
  const first = await call(baseUrl, `/v1/capabilities/${capability}`, body)
  expect(first.status).toBe(402)
  expect(first.body.error.code).toBe("PAYMENT_REQUIRED")
  const challenge = parseChallenge(first.headers.get("www-authenticate"))
  if (challenge === undefined) throw new Error(`no L402 challenge: ${first.headers.get("www-authenticate")}`)
  expect(challenge.invoice).toMatch(/^lnbcrt[0-9]+[munp]?1/)
  const preimage = await pay(baseUrl, challenge.invoice)
  return { challenge, preimage, authorization: `L402 ${challenge.macaroon}:${preimage}`, offer: first.body.error.details }
}

// ---- the tests --------------------------------------------------------------------

const speakProvider = Layer.effect(Providers, Effect.map(
  Espeak.make({ unitPrice: { per: "1k_chars", priceMicroUsd: 15_000n } }),
  (provider) => ({ all: [provider] })
))

const sell = (tokenTtlSeconds = 3600) => ({
  settings: { marginPercent: 10, tokenTtlSeconds, callsPerToken: 1 },
  anonymousPerMinute: 1000
})

describe("L402_SELL unset", () => {
  let server: RunningServer
  beforeAll(async () => {
    server = await startServer(storeBackends[0]![1](), { rate: RATE, providers: speakProvider })
  })
  afterAll(() => server.close())

  it("answers an unauthenticated capability call 401 as usual, with no challenge", async () => {
    const answer = await call(server.baseUrl, "/v1/capabilities/speak", SPEAK)
    expect(answer.status).toBe(401)
    expect(answer.body.error.code).toBe("UNAUTHORIZED")
    expect(answer.headers.get("www-authenticate")).toBeNull()
  })
})

for (const [backend, store] of storeBackends) {
  describe(`L402_SELL=on (${backend})`, () => {
    let server: RunningServer
    beforeAll(async () => {
      server = await startServer(store(), { rate: RATE, providers: speakProvider, l402: sell() })
    })
    afterAll(() => server.close())

    it("sells one speak call: 402 challenge, dev-rail payment, audio back, and the token is spent", { timeout: 30_000 }, async () => {
      const { authorization, offer } = await buy(server.baseUrl, "speak", SPEAK)
      // Priced at the quote plus the 10% margin, converted at the rate.
      expect(offer.capability).toBe("speak")
      expect(offer.priceUsdCents).toBeGreaterThan(offer.quotedCost)
      expect(offer.amountSats).toBeGreaterThanOrEqual(1)

      const bought = await call(server.baseUrl, "/v1/capabilities/speak", SPEAK, authorization)
      expect(bought.status).toBe(200)
      expect(bought.body.data.mimeType).toBe("audio/wav")
      const audio = Buffer.from(bought.body.data.audio, "base64")
      expect(audio.subarray(0, 4).toString("latin1")).toBe("RIFF")
      expect(bought.body.metadata.chargedUsdCents).toBeLessThanOrEqual(offer.quotedCost)

      const again = await call(server.baseUrl, "/v1/capabilities/speak", SPEAK, authorization)
      expect(again.status).toBe(402)
      expect(again.body.error.code).toBe("L402_TOKEN_USED")
    })

    it("keeps the books: the payment credits the sales wallet, the call is charged to it", { timeout: 30_000 }, async () => {
      const books = () =>
        server.run(Effect.gen(function*() {
          const store = yield* Store
          const l402 = yield* L402Store
          const sales = Option.getOrThrow(yield* l402.salesAccount)
          const wallet = yield* store.getWallet(sales.accountId)
          const transactions = yield* store.listTransactions(sales.accountId, {}, { limit: 100, offset: 0 })
          return { wallet, transactions: transactions.items }
        }) as Effect.Effect<{ wallet: Wallet; transactions: ReadonlyArray<Transaction> }, never, Store>)
      const before = await books()
      const { authorization, offer } = await buy(server.baseUrl, "speak", SPEAK)
      const bought = await call(server.baseUrl, "/v1/capabilities/speak", SPEAK, authorization)
      expect(bought.status).toBe(200)
      const after = await books()
      const fresh = after.transactions.filter((t) => !before.transactions.some((b) => b.id === t.id))
      const credits = fresh.filter((t) => t.type === "credit")
      const charges = fresh.filter((t) => t.type === "charge")
      expect(credits).toHaveLength(1)
      expect(credits[0]!.satsMsat).toBe(BigInt(offer.amountSats) * 1000n)
      expect(charges).toHaveLength(1)
      expect(charges[0]!.capability).toBe("speak")
      expect(charges[0]!.auditId).toBe(bought.body.metadata.auditId)
      expect(Number(charges[0]!.satsMsat) / 1000).toBe(bought.body.metadata.debited.sats)
      // Every msat accounted for: what came in, less what the call cost, is in the wallet.
      expect(after.wallet.satsMsat - before.wallet.satsMsat).toBe(credits[0]!.satsMsat - charges[0]!.satsMsat)
      expect(after.wallet.usdMicroUsd).toBe(before.wallet.usdMicroUsd)
      expect(charges[0]!.satsMsat).toBeLessThan(credits[0]!.satsMsat)
    })

    it("lets two concurrent retries of a single-use token run exactly one call", { timeout: 30_000 }, async () => {
      const { authorization } = await buy(server.baseUrl, "speak", SPEAK)
      const answers = await Promise.all([
        call(server.baseUrl, "/v1/capabilities/speak", SPEAK, authorization),
        call(server.baseUrl, "/v1/capabilities/speak", SPEAK, authorization),
        call(server.baseUrl, "/v1/capabilities/speak", SPEAK, authorization)
      ])
      expect(answers.map((a) => a.status).sort()).toEqual([200, 402, 402])
      expect(answers.filter((a) => a.status === 402).every((a) => a.body.error.code === "L402_TOKEN_USED")).toBe(true)
    })

    it("will not let a token for speak buy reason", async () => {
      const { authorization } = await buy(server.baseUrl, "speak", SPEAK)
      const answer = await call(server.baseUrl, "/v1/capabilities/reason", { prompt: "hi", maxTokens: 10 }, authorization)
      expect(answer.status).toBe(403)
      expect(answer.body.error.code).toBe("L402_WRONG_CAPABILITY")
      // Still good for what it was bought for.
      expect((await call(server.baseUrl, "/v1/capabilities/speak", SPEAK, authorization)).status).toBe(200)
    }, 30_000)

    it("refuses a wrong preimage, and a macaroon whose caveats were changed", async () => {
      const { challenge, preimage } = await buy(server.baseUrl, "speak", SPEAK)
      const wrong = createHash("sha256").update(preimage).digest("hex")
      const refused = await call(server.baseUrl, "/v1/capabilities/speak", SPEAK, `L402 ${challenge.macaroon}:${wrong}`)
      expect(refused.status).toBe(401)
      expect(refused.body.error.code).toBe("L402_TOKEN_INVALID")
      // calls=1 -> calls=9 in the serialised caveat, signature kept.
      const raw = Buffer.from(challenge.macaroon, "base64")
      const at = raw.indexOf(Buffer.from("calls=1"))
      expect(at).toBeGreaterThan(0)
      raw[at + 6] = "9".charCodeAt(0)
      const tampered = await call(server.baseUrl, "/v1/capabilities/speak", SPEAK, `L402 ${raw.toString("base64")}:${preimage}`)
      expect(tampered.status).toBe(401)
      expect(tampered.body.error.code).toBe("L402_TOKEN_INVALID")
      const garbage = await call(server.baseUrl, "/v1/capabilities/speak", SPEAK, `L402 bm90IGEgbWFjYXJvb24=:${preimage}`)
      expect(garbage.status).toBe(401)
      expect(garbage.body.error.code).toBe("L402_TOKEN_INVALID")
    }, 30_000)

    it("refuses a token for a request that costs more than its maximum price", async () => {
      const { authorization } = await buy(server.baseUrl, "speak", { text: "hi" })
      const answer = await call(server.baseUrl, "/v1/capabilities/speak", { text: "x".repeat(2000) }, authorization)
      expect(answer.status).toBe(402)
      expect(answer.body.error.code).toBe("L402_PRICE_EXCEEDED")
    }, 30_000)

    it("answers a bad body 400 before any invoice is made, and leaves other routes to the API key", async () => {
      const bad = await call(server.baseUrl, "/v1/capabilities/speak", { text: "" })
      expect(bad.status).toBe(400)
      expect(bad.body.error.code).toBe("VALIDATION_ERROR")
      expect(bad.headers.get("www-authenticate")).toBeNull()
      const wallet = await fetch(`${server.baseUrl}/v1/wallet`)
      expect(wallet.status).toBe(401)
      const estimate = await call(server.baseUrl, "/v1/capabilities/speak/estimate", SPEAK)
      expect(estimate.status).toBe(401)
    })

    it("leaves callers with an API key to the usual pipeline, and accepts the older LSAT scheme", async () => {
      const signup = await call(server.baseUrl, "/v1/signup", { name: "keyed" })
      expect(signup.status).toBe(201)
      const keyed = await call(server.baseUrl, "/v1/capabilities/speak", SPEAK, `Bearer ${signup.body.apiKey}`)
      expect(keyed.status).toBe(402)
      expect(keyed.body.error.code).toBe("INSUFFICIENT_BALANCE")
      expect(keyed.headers.get("www-authenticate")).toBeNull()
      const badKey = await call(server.baseUrl, "/v1/capabilities/speak", SPEAK, "Bearer sk_agt_nope")
      expect(badKey.status).toBe(401)
      expect(badKey.body.error.code).toBe("UNAUTHORIZED")

      const { challenge, preimage } = await buy(server.baseUrl, "speak", SPEAK)
      const lsat = await call(server.baseUrl, "/v1/capabilities/speak", SPEAK, `LSAT ${challenge.macaroon}:${preimage}`)
      expect(lsat.status).toBe(200)
    }, 30_000)
  })
}

describe("L402_SELL=on, an expired token", () => {
  let server: RunningServer
  beforeAll(async () => {
    server = await startServer(storeBackends[0]![1](), { rate: RATE, providers: speakProvider, l402: sell(1) })
  })
  afterAll(() => server.close())

  it("is refused once its valid_until caveat has passed", async () => {
    const { authorization } = await buy(server.baseUrl, "speak", SPEAK)
    await new Promise((resolve) => setTimeout(resolve, 1100))
    const answer = await call(server.baseUrl, "/v1/capabilities/speak", SPEAK, authorization)
    expect(answer.status).toBe(401)
    expect(answer.body.error.code).toBe("L402_TOKEN_EXPIRED")
  }, 30_000)
})

describe("L402_SELL=on, anonymous callers", () => {
  let server: RunningServer
  beforeAll(async () => {
    server = await startServer(storeBackends[0]![1](), {
      rate: RATE,
      providers: speakProvider,
      l402: { ...sell(), anonymousPerMinute: 2 }
    })
  })
  afterAll(() => server.close())

  it("obey a per-address rate limit", async () => {
    const statuses = []
    for (let i = 0; i < 3; i++) statuses.push((await call(server.baseUrl, "/v1/capabilities/speak", SPEAK)).status)
    expect(statuses).toEqual([402, 402, 429])
  })
})

describe("L402_SELL=on, the operator's hold on sales", () => {
  let server: RunningServer
  let sales: { readonly accountId: string; readonly agentId: string; readonly apiKey: string } | undefined
  beforeAll(async () => {
    server = await startServer(storeBackends[0]![1](), {
      rate: RATE,
      providers: speakProvider,
      l402: {
        ...sell(),
        settings: {
          ...sell().settings,
          onSalesAccountCreated: (created) => Effect.sync(() => {
            sales = created
          })
        }
      }
    })
  })
  afterAll(() => server.close())

  it("hands over the sales agent's key once; with it the sales wallet is read and sales are capped by its policy", async () => {
    if (sales === undefined) throw new Error("the sales account was not announced")
    const key = `Bearer ${sales.apiKey}`
    const { authorization } = await buy(server.baseUrl, "speak", SPEAK)
    expect((await call(server.baseUrl, "/v1/capabilities/speak", SPEAK, authorization)).status).toBe(200)
    const wallet = await fetch(`${server.baseUrl}/v1/wallet`, { headers: { authorization: key } })
    expect(wallet.status).toBe(200)
    expect(((await wallet.json()) as { balanceSats: number }).balanceSats).toBeGreaterThan(0)

    // Only search may be sold now: a speak challenge is refused before any invoice.
    const patched = await fetch(`${server.baseUrl}/v1/agents/${sales.agentId}/policy`, {
      method: "PATCH",
      headers: { authorization: key, "content-type": "application/json" },
      body: JSON.stringify({ allowedCapabilities: ["search"] })
    })
    expect(patched.status).toBe(200)
    const refused = await call(server.baseUrl, "/v1/capabilities/speak", SPEAK)
    expect(refused.status).toBe(403)
    expect(refused.body.error.code).toBe("CAPABILITY_NOT_ALLOWED")
    expect(refused.headers.get("www-authenticate")).toBeNull()
  }, 30_000)
})
