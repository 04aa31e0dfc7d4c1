import { createHash } from "node:crypto"
import { Effect, ManagedRuntime, Redacted } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import * as DevLightning from "../../adapters/rails/DevLightning.ts"
import * as Lnd from "../../adapters/rails/Lnd.ts"
import { type LightningPaymentStatus, LightningRail } from "../../src/ports/Rails.ts"
import { type FakeLnd, MACAROON_HEX, startFakeLnd } from "./fakeLnd.ts"

/**
 * Paying on the Lightning rails: LND's router (SendPaymentV2, TrackPaymentV2)
 * against the fake LND, and the dev node paying its own invoices.
 */

const fakes: Array<FakeLnd> = []
const runtimes: Array<ManagedRuntime.ManagedRuntime<LightningRail, never>> = []
afterEach(async () => {
  for (const runtime of runtimes.splice(0)) await runtime.dispose()
  for (const fake of fakes.splice(0)) await fake.close()
})

const lndRail = async () => {
  const fake = await startFakeLnd()
  fakes.push(fake)
  const runtime = ManagedRuntime.make(
    Lnd.layer({ restUrl: fake.url, macaroonHex: Redacted.make(MACAROON_HEX), requestTimeoutMs: 2_000 })
  )
  runtimes.push(runtime)
  const rail = await runtime.runPromise(Effect.service(LightningRail))
  return { fake, rail, payer: rail.payer! }
}

const sha256Hex = (hex: string) => createHash("sha256").update(Buffer.from(hex, "hex")).digest("hex")

const requestFor = (paymentRequest: string, paymentHash: string, amountMsat: bigint, timeoutSeconds = 5) => ({
  paymentRequest,
  paymentHash,
  amountMsat,
  feeLimitMsat: 5_000n,
  timeoutSeconds
})

describe("the LND rail pays through its router", () => {
  it("pays an invoice: SendPaymentV2 with the fee limit and timeout, answering the preimage and the routing fee", async () => {
    const { fake, payer } = await lndRail()
    const invoice = fake.addInvoice(21_000n, "paywall")
    const decoded = payer.decode(invoice.paymentRequest)
    if ("invalid" in decoded) throw new Error(decoded.invalid)
    expect(decoded.payeeNodeKey).toBe(fake.publicKeyHex)
    expect(decoded.amountMsat).toBe(21_000n)
    const status = await Effect.runPromise(payer.payInvoice(requestFor(invoice.paymentRequest, decoded.paymentHash, 21_000n)))
    expect(status).toEqual({ _tag: "Succeeded", preimage: invoice.preimage.toString("hex"), amountMsat: 21_000n, feeMsat: 1000n })
    if (status._tag === "Succeeded") expect(sha256Hex(status.preimage)).toBe(decoded.paymentHash)
    expect(fake.sendCalls).toEqual([{
      payment_request: invoice.paymentRequest,
      fee_limit_msat: "5000",
      timeout_seconds: 5,
      no_inflight_updates: false
    }])
    expect(fake.requests.at(-1)).toBe("POST /v2/router/send")
    // Tracking by hash gives the same answer; paying again sends nothing new and answers the same.
    expect(await Effect.runPromise(payer.trackPayment(decoded.paymentHash))).toEqual(status)
    expect(await Effect.runPromise(payer.payInvoice(requestFor(invoice.paymentRequest, decoded.paymentHash, 21_000n)))).toEqual(status)
    expect(fake.payments).toHaveLength(1)
    const trackPath = `/v2/router/track/${Buffer.from(decoded.paymentHash, "hex").toString("base64url")}`
    expect(fake.requests.filter((r) => r.startsWith(`GET ${trackPath}`))).toHaveLength(2)
  })

  it("reports a failed payment (no route, or a fee above the limit)", async () => {
    const { fake, payer } = await lndRail()
    const invoice = fake.addInvoice(1_000n)
    const hash = invoice.hash.toString("hex")
    fake.payBehaviour = () => "fail"
    expect(await Effect.runPromise(payer.payInvoice(requestFor(invoice.paymentRequest, hash, 1_000n))))
      .toEqual({ _tag: "Failed", reason: "FAILURE_REASON_NO_ROUTE" })
    fake.payBehaviour = undefined
    fake.routingFeeMsat = 9_000n
    expect((await Effect.runPromise(payer.payInvoice(requestFor(invoice.paymentRequest, hash, 1_000n))))._tag).toBe("Failed")
    expect(invoice.state).toBe("OPEN")
  })

  it("answers InFlight when the outcome is not known by the timeout, and tracks it to its end", async () => {
    const { fake, payer } = await lndRail()
    const invoice = fake.addInvoice(2_000n)
    const hash = invoice.hash.toString("hex")
    fake.payBehaviour = () => "hang"
    const started = Date.now()
    // The rail waits the payment's timeout plus a margin; a 1 s payment timeout keeps this short.
    const status = await Effect.runPromise(payer.payInvoice(requestFor(invoice.paymentRequest, hash, 2_000n, 1)))
    expect(status).toEqual({ _tag: "InFlight" })
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000)
    expect(await Effect.runPromise(payer.trackPayment(hash))).toEqual({ _tag: "InFlight" })
    fake.completePayment(hash, "succeed")
    const tracked: LightningPaymentStatus = await Effect.runPromise(payer.trackPayment(hash))
    expect(tracked).toMatchObject({ _tag: "Succeeded", preimage: invoice.preimage.toString("hex") })
  }, 20_000)

  it("an error answer that is not LND's own (a proxy's 502) is not a failure: the outcome is unknown", async () => {
    const { fake, payer } = await lndRail()
    const invoice = fake.addInvoice(3_000n)
    const hash = invoice.hash.toString("hex")
    fake.payBehaviour = () => ({ status: 502, body: "<html>Bad Gateway</html>" })
    const sent = await Effect.runPromise(Effect.result(payer.payInvoice(requestFor(invoice.paymentRequest, hash, 3_000n))))
    expect(sent._tag).toBe("Failure")
    if (sent._tag === "Failure") expect(sent.failure).toMatchObject({ _tag: "RailError" })
    // LND's own refusal (a gRPC code) still is a failure.
    fake.payBehaviour = () => ({ status: 500, body: JSON.stringify({ error: { code: 2, message: "invoice expired" } }) })
    expect(await Effect.runPromise(payer.payInvoice(requestFor(invoice.paymentRequest, hash, 3_000n))))
      .toMatchObject({ _tag: "Failed" })
  })

  it("a hash the node never paid is NotFound", async () => {
    const { payer } = await lndRail()
    expect(await Effect.runPromise(payer.trackPayment("ab".repeat(32)))).toEqual({ _tag: "NotFound" })
  })
})

describe("the dev rail pays its own node's invoices", () => {
  it("answers the preimage of an invoice it issued, and refuses other nodes' invoices", async () => {
    const node = await Effect.runPromise(DevLightning.make({ dataDir: undefined }))
    const payer = node.rail.payer!
    const issued = await Effect.runPromise(node.issue({
      invoiceId: "inv_1",
      amountMsat: 5_000n,
      memo: "l402",
      expirySeconds: 600,
      createdAt: new Date()
    }))
    const decoded = payer.decode(issued.paymentRequest)
    if ("invalid" in decoded) throw new Error(decoded.invalid)
    expect(decoded.payeeNodeKey).toBe(node.publicKeyHex)
    const status = await Effect.runPromise(payer.payInvoice(requestFor(issued.paymentRequest, issued.paymentHash, 5_000n)))
    expect(status).toEqual({ _tag: "Succeeded", preimage: issued.preimage, amountMsat: 5_000n, feeMsat: 0n })
    expect(await Effect.runPromise(payer.trackPayment(issued.paymentHash))).toEqual(status)

    const other = await Effect.runPromise(DevLightning.make({ dataDir: undefined }))
    const foreign = await Effect.runPromise(other.issue({
      invoiceId: "inv_2",
      amountMsat: 5_000n,
      memo: "elsewhere",
      expirySeconds: 600,
      createdAt: new Date()
    }))
    expect((await Effect.runPromise(payer.payInvoice(requestFor(foreign.paymentRequest, foreign.paymentHash, 5_000n))))._tag)
      .toBe("Failed")
    expect(await Effect.runPromise(payer.trackPayment(foreign.paymentHash))).toEqual({ _tag: "NotFound" })
  })
})
