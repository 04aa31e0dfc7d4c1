import { ConfigProvider, Effect, Exit, Option, Redacted } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { loadPaymentConfig, railRoutes } from "../../adapters/payments.ts"

/** loadPaymentConfig over the given environment, on loopback. */
const load = (env: Record<string, string>) =>
  Effect.runPromiseExit(
    loadPaymentConfig({ host: "127.0.0.1", port: 8080, fixedRate: Option.none() }).pipe(
      Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env })))
    )
  )

const lnd = { LIGHTNING_RAIL: "lnd", LND_REST_URL: "https://127.0.0.1:8080" }

describe("payment rail configuration", () => {
  it("reads the LND macaroon from LND_MACAROON_PATH as hex", async () => {
    const dir = mkdtempSync(join(tmpdir(), "spendgate-lnd-"))
    const path = join(dir, "invoice.macaroon")
    writeFileSync(path, Buffer.from([0x02, 0x01, 0xab]))
    const exit = await load({ ...lnd, LND_MACAROON_PATH: path }).finally(() => rmSync(dir, { recursive: true, force: true }))
    expect(Exit.isSuccess(exit)).toBe(true)
    const lightning = Exit.isSuccess(exit) ? exit.value.lightning : undefined
    expect(lightning?.kind).toBe("lnd")
    if (lightning?.kind === "lnd") expect(Redacted.value(lightning.lnd.macaroonHex)).toBe("0201ab")
  })

  it("answers one configuration error naming LND_MACAROON_PATH when the file cannot be read (not a crash)", async () => {
    const missing = join(tmpdir(), "spendgate-no-such-dir", "invoice.macaroon")
    const exit = await load({ ...lnd, LND_MACAROON_PATH: missing })
    expect(Exit.isFailure(exit)).toBe(true)
    if (Exit.isFailure(exit)) {
      const error = exit.cause.reasons[0]
      expect(error?._tag).toBe("Fail")
      expect(error?._tag === "Fail" ? String((error.error as { message: string }).message) : "").toBe(
        `Invalid configuration: LND_MACAROON_PATH: cannot read ${missing}`
      )
    }
  })

  it("gives each configured rail its routes: the dev payers, or Stripe's webhook", () => {
    const paths = (config: Parameters<typeof railRoutes>[0]) => railRoutes(config).map((r) => `${r.method} ${r.path}`)
    expect(paths({ lightning: { kind: "dev" }, card: { kind: "dev", publicUrl: "http://127.0.0.1:8080" } })).toEqual([
      "POST /v1/dev/lightning/pay",
      "GET /dev/checkout/:sessionId",
      "POST /dev/checkout/:sessionId/pay"
    ])
    expect(paths({
      lightning: { kind: "lnd", lnd: { restUrl: "https://127.0.0.1:8080", macaroonHex: Redacted.make("0201ab") } },
      card: {
        kind: "stripe",
        stripe: {
          secretKey: Redacted.make("sk_test_123"),
          webhookSecret: Redacted.make("whsec_123"),
          successUrl: "https://example.com/ok",
          cancelUrl: "https://example.com/no"
        }
      }
    })).toEqual(["POST /v1/webhooks/stripe"])
  })
})
