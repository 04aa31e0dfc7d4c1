import { describe, expect, it } from "vitest"
import { InsufficientBalance } from "../../src/domain/errors.ts"
import { errorEvent, gatewayEvent, metadataEvent } from "../../src/services/sse.ts"
import type { CallReceipt } from "../../src/wallet/receipt.ts"

/** The gateway's own events at the end of a stream, as bytes on the wire. */

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)

const receipt: CallReceipt = {
  chargedUsdCents: 0.0021,
  quotedUsdCents: 0.5,
  balanceAfter: 99.9979,
  auditId: "aud_1",
  provider: "chat",
  latencyMs: 250,
  model: "m-1",
  debited: { usdCents: 0.0021, sats: 0 }
}

describe("the gateway's stream events", () => {
  it("writes the receipt as one `event: spendgate.metadata` with its JSON on one data line", () => {
    expect(text(metadataEvent(receipt))).toBe(`event: spendgate.metadata\ndata: ${JSON.stringify(receipt)}\n\n`)
  })

  it("writes a refusal as `event: spendgate.error` in the API's error envelope, with its code and details", () => {
    const refusal = new InsufficientBalance({ balanceMicroUsd: 10n, quotedMicroUsd: 20n })
    const written = text(errorEvent(refusal))
    expect(written.startsWith("event: spendgate.error\ndata: ")).toBe(true)
    expect(written.endsWith("\n\n")).toBe(true)
    const body = JSON.parse(written.slice("event: spendgate.error\ndata: ".length))
    expect(body).toEqual({ error: { code: refusal.code, message: refusal.message, details: JSON.parse(JSON.stringify(refusal.details)) } })
  })

  it("calls an error without a code a provider error", () => {
    const body = JSON.parse(text(errorEvent(new Error("upstream broke"))).split("data: ")[1]!)
    expect(body).toEqual({ error: { code: "PROVIDER_ERROR", message: "upstream broke" } })
  })

  it("never lets a field break out of its data line", () => {
    const written = text(gatewayEvent({ event: "spendgate.error", data: { error: { code: "X", message: "a\nevent: forged\n\n" } } }))
    expect(written.split("\n").filter((l) => l.startsWith("event:"))).toEqual(["event: spendgate.error"])
  })
})
