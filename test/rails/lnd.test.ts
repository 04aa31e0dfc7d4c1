import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Cause, Effect, Exit, Layer, Logger, Option, Redacted, Scope } from "effect"
import { afterEach, assert, describe, it } from "vitest"
import * as Lnd from "../../adapters/rails/Lnd.ts"
import {
  type LightningInvoiceRequest,
  LightningRail,
  type PaymentNotice,
  PaymentSink,
  RailError
} from "../../src/ports/Rails.ts"
import { BAD_MACAROON, type FakeLnd, lndError, MACAROON_HEX, startFakeLnd } from "./fakeLnd.ts"

/**
 * The LND REST rail against a local fake LND (test/rails/fakeLnd.ts) that
 * speaks LND's wire format: AddInvoice, and SubscribeInvoices as a chunked
 * stream of newline-delimited JSON pushed on demand.
 */

// ---------------------------------------------------------------------------
// Harness

const fakes: Array<FakeLnd> = []
const stops: Array<() => Promise<void>> = []

afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop()
  for (const fake of fakes.splice(0)) await fake.close()
})

const fakeLnd = async (options: Parameters<typeof startFakeLnd>[0] = {}) => {
  const fake = await startFakeLnd(options)
  fakes.push(fake)
  return fake
}

const configFor = (fake: FakeLnd, overrides: Partial<Lnd.LndConfig> = {}): Lnd.LndConfig => ({
  restUrl: fake.url,
  macaroonHex: Redacted.make(MACAROON_HEX),
  requestTimeoutMs: 2_000,
  ...overrides
})

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Polls until `condition` holds; fails the test after `timeoutMs`. */
const waitFor = async (what: string, condition: () => boolean, timeoutMs = 5_000) => {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(10)
  }
}

const invoiceRequest = (overrides: Partial<LightningInvoiceRequest> = {}): LightningInvoiceRequest => ({
  invoiceId: "inv_test1",
  amountMsat: 1_500_000n,
  memo: "Spendgate wallet funding inv_test1",
  expirySeconds: 3600,
  createdAt: new Date(),
  ...overrides
})

/** Runs `createInvoice` through the rail's layer; a failure must be a typed RailError, never a defect. */
const createInvoice = async (config: Lnd.LndConfig, request = invoiceRequest()) => {
  const exit = await Effect.runPromiseExit(
    Effect.gen(function*() {
      const rail = yield* LightningRail
      return yield* rail.createInvoice(request)
    }).pipe(
      Effect.provide(Lnd.layer(config))
    )
  )
  if (Exit.isSuccess(exit)) return { ok: exit.value } as const
  const error = Cause.findErrorOption(exit.cause)
  assert.isFalse(Cause.hasDies(exit.cause), `expected a typed failure, got ${Cause.pretty(exit.cause)}`)
  assert.isTrue(Option.isSome(error), `expected a typed failure, got ${Cause.pretty(exit.cause)}`)
  const value = Option.getOrThrow(error)
  assert.instanceOf(value, RailError)
  return { error: value } as const
}

const expectRailError = async (config: Lnd.LndConfig, pattern: RegExp, request = invoiceRequest()) => {
  const result = await createInvoice(config, request)
  assert.isDefined(result.error, "expected a RailError")
  assert.strictEqual(result.error!.rail, "lnd")
  assert.strictEqual(result.error!.code, "PROVIDER_ERROR")
  assert.match(result.error!.message, pattern)
  assert.notInclude(result.error!.message, MACAROON_HEX)
  return result.error!
}

interface TestSink {
  readonly layer: Layer.Layer<PaymentSink>
  readonly records: Array<PaymentNotice>
  /** Every call in order: `record:<hash>` and `save:<value>`. */
  readonly calls: Array<string>
  readonly cursors: Map<string, string>
  loads: number
  /** Makes the next n `record` calls die, as a failing store would. */
  failRecords: number
}

const makeSink = (cursors = new Map<string, string>()): TestSink => {
  const sink: TestSink = {
    layer: Layer.effect(
      PaymentSink,
      Effect.sync(() =>
        PaymentSink.of({
          record: (notice) =>
            Effect.suspend(() => {
              if (sink.failRecords > 0) {
                sink.failRecords--
                sink.calls.push(`fail:${notice.externalId}`)
                return Effect.die(new Error("the store is unavailable"))
              }
              sink.records.push(notice)
              sink.calls.push(`record:${notice.externalId}`)
              return Effect.succeed("credited" as const)
            }),
          recordExpiry: () => Effect.void,
          loadCursor: (rail) =>
            Effect.sync(() => {
              sink.loads++
              return sink.cursors.get(rail) ?? null
            }),
          saveCursor: (rail, value) =>
            Effect.sync(() => {
              sink.calls.push(`save:${value}`)
              sink.cursors.set(rail, value)
            })
        })
      )
    ),
    records: [],
    calls: [],
    cursors,
    loads: 0,
    failRecords: 0
  }
  return sink
}

interface LogLine {
  readonly level: string
  readonly text: string
}

/**
 * Starts the subscriber layer in a scope of its own; `stop` closes that
 * scope (and is also run after each test).
 */
const startSubscriber = async (config: Lnd.LndConfig, sink: TestSink) => {
  const logs: Array<LogLine> = []
  const capture = Logger.make(({ logLevel, message }) => {
    const parts = Array.isArray(message) ? message : [message]
    logs.push({ level: logLevel, text: parts.map(String).join(" ") })
  })
  const scope = await Effect.runPromise(Scope.make())
  await Effect.runPromise(
    Layer.buildWithScope(Lnd.subscriber(config).pipe(Layer.provide(sink.layer)), scope).pipe(
      Effect.provideService(Logger.CurrentLoggers, new Set([capture]))
    )
  )
  let stopped = false
  const stop = async () => {
    if (stopped) return
    stopped = true
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
  stops.push(stop)
  return { logs, stop }
}

const hexOf = (bytes: Buffer) => bytes.toString("hex")

/** A TCP port nothing listens on. */
const closedPort = () =>
  new Promise<number>((resolve) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })

// ---------------------------------------------------------------------------
// AddInvoice

describe("LND rail: createInvoice (AddInvoice)", () => {
  it("posts value_msat, memo and expiry as LND expects and answers the hex payment hash", async () => {
    const fake = await fakeLnd()
    const result = await createInvoice(configFor(fake))
    assert.isDefined(result.ok)

    assert.strictEqual(fake.addInvoiceCalls.length, 1)
    const call = fake.addInvoiceCalls[0]
    assert.strictEqual(call.method, "POST")
    assert.strictEqual(call.path, "/v1/invoices")
    assert.strictEqual(call.macaroon, MACAROON_HEX)
    assert.match(call.contentType ?? "", /^application\/json/)
    // int64 fields travel as strings.
    assert.deepStrictEqual(JSON.parse(call.body), {
      value_msat: "1500000",
      memo: "Spendgate wallet funding inv_test1",
      expiry: "3600"
    })

    const invoice = fake.invoices[0]
    assert.deepStrictEqual(result.ok, {
      paymentRequest: invoice.paymentRequest,
      paymentHash: hexOf(invoice.hash)
    })
    assert.match(result.ok!.paymentHash, /^[0-9a-f]{64}$/)
  })

  it("accepts a macaroon broken into lines, as `xxd -p` prints it", async () => {
    const fake = await fakeLnd()
    const wrapped = MACAROON_HEX.match(/.{1,60}/g)!.join("\n") + "\n"
    const result = await createInvoice(configFor(fake, { macaroonHex: Redacted.make(wrapped) }))
    assert.isDefined(result.ok)
    assert.strictEqual(fake.addInvoiceCalls[0].macaroon, MACAROON_HEX)
  })

  it("keeps a path prefix of restUrl and ignores trailing slashes", async () => {
    const fake = await fakeLnd()
    // The fake serves at the root, so a prefix must show up in the request path (and 404).
    await expectRailError(configFor(fake, { restUrl: `${fake.url}/lnd/` }), /^LND refused the request \(HTTP 404\): Not Found$/)
    const result = await createInvoice(configFor(fake, { restUrl: `${fake.url}//` }))
    assert.isDefined(result.ok)
    assert.deepStrictEqual(fake.requests, ["POST /lnd/v1/invoices", "POST /v1/invoices"])
  })

  it("a wrong macaroon is a RailError carrying LND's message", async () => {
    const fake = await fakeLnd()
    // What LND itself answers (gRPC Unknown through the gateway: HTTP 500).
    await expectRailError(
      configFor(fake, { macaroonHex: Redacted.make("0201" + "cd".repeat(40)) }),
      /^LND refused the request \(HTTP 500\): verification failed: signature mismatch after caveat verification$/
    )
    // And a 401-style answer from a proxy in front of it.
    fake.addInvoiceReply = () => ({ status: 401, body: lndError(16, "permission denied") })
    await expectRailError(configFor(fake), /^LND refused the request \(HTTP 401\): permission denied$/)
  })

  it("a 5xx answer is a RailError, with or without LND's error JSON", async () => {
    const fake = await fakeLnd()
    fake.addInvoiceReply = () => ({ status: 503, body: lndError(14, "server is still in the process of starting") })
    await expectRailError(configFor(fake), /HTTP 503\): server is still in the process of starting/)
    fake.addInvoiceReply = () => ({ status: 500, body: "<html>upstream exploded</html>" })
    await expectRailError(configFor(fake), /^LND answered HTTP 500: <html>upstream exploded<\/html>$/)
    fake.addInvoiceReply = () => ({ status: 502, body: "" })
    await expectRailError(configFor(fake), /^LND answered HTTP 502$/)
  })

  it("an answer that never comes is a RailError after requestTimeoutMs", async () => {
    const fake = await fakeLnd()
    fake.addInvoiceReply = () => "hang"
    const started = Date.now()
    await expectRailError(configFor(fake, { requestTimeoutMs: 300 }), /did not answer AddInvoice within 300 ms/)
    const elapsed = Date.now() - started
    assert.isAtLeast(elapsed, 280)
    assert.isBelow(elapsed, 3_000)
  })

  it("a refused connection or a cut one is a RailError", async () => {
    const port = await closedPort()
    await expectRailError(
      { restUrl: `http://127.0.0.1:${port}`, macaroonHex: Redacted.make(MACAROON_HEX), requestTimeoutMs: 2_000 },
      new RegExp(`^LND is unreachable at http://127\\.0\\.0\\.1:${port}: .*ECONNREFUSED`)
    )
    const fake = await fakeLnd()
    fake.addInvoiceReply = () => "destroy"
    await expectRailError(configFor(fake), /^LND is unreachable at /)
  })

  it("malformed answers are RailErrors: not JSON, missing fields, a hash that is not 32 bytes", async () => {
    const fake = await fakeLnd()
    const ok = (body: unknown) => () => ({ status: 200, body: typeof body === "string" ? body : JSON.stringify(body) })
    const good = { r_hash: Buffer.alloc(32, 7).toString("base64"), payment_request: "lnbcrt1u1pfake", add_index: "1" }

    fake.addInvoiceReply = ok("{not json")
    await expectRailError(configFor(fake), /AddInvoice answer is not JSON/)
    fake.addInvoiceReply = ok("[1,2]")
    await expectRailError(configFor(fake), /not a JSON object/)
    fake.addInvoiceReply = ok({ ...good, payment_request: undefined })
    await expectRailError(configFor(fake), /has no payment_request/)
    fake.addInvoiceReply = ok({ ...good, payment_request: "" })
    await expectRailError(configFor(fake), /has no payment_request/)
    fake.addInvoiceReply = ok({ ...good, r_hash: undefined })
    await expectRailError(configFor(fake), /has no r_hash/)
    fake.addInvoiceReply = ok({ ...good, r_hash: Buffer.alloc(16, 7).toString("base64") })
    await expectRailError(configFor(fake), /r_hash that is not 32 bytes/)
    fake.addInvoiceReply = ok({ ...good, r_hash: "zz!!" + "A".repeat(40) })
    await expectRailError(configFor(fake), /r_hash that is not 32 bytes/)
    fake.addInvoiceReply = ok({ ...good, r_hash: 12 })
    await expectRailError(configFor(fake), /r_hash that is not 32 bytes/)

    // URL-safe base64 is accepted too (the gateway's decoder takes both).
    const hash = Buffer.alloc(32, 0xfb)
    fake.addInvoiceReply = ok({ ...good, r_hash: hash.toString("base64url") })
    const result = await createInvoice(configFor(fake))
    assert.strictEqual(result.ok?.paymentHash, hash.toString("hex"))
  })

  it("an oversized answer is a RailError, not read to the end", async () => {
    const fake = await fakeLnd()
    fake.addInvoiceReply = () => ({ status: 200, body: JSON.stringify({ payment_request: "x".repeat(200_000) }) })
    await expectRailError(configFor(fake), new RegExp(`larger than ${Lnd.MAX_RESPONSE_BYTES} bytes`))
  })

  it("refuses to ask for a zero-amount invoice", async () => {
    const fake = await fakeLnd()
    await expectRailError(configFor(fake), /positive amount/, invoiceRequest({ amountMsat: 0n }))
    assert.strictEqual(fake.addInvoiceCalls.length, 0)
  })

  it("a malformed configuration stops the layer with a message naming the setting", async () => {
    const fake = await fakeLnd()
    const cases: Array<[Partial<Lnd.LndConfig>, RegExp]> = [
      [{ restUrl: "127.0.0.1:8080" }, /restUrl/],
      [{ restUrl: "ftp://127.0.0.1" }, /restUrl must be an http\(s\) URL/],
      [{ macaroonHex: Redacted.make("not hex") }, /macaroon must be hex-encoded/],
      [{ macaroonHex: Redacted.make("") }, /macaroon must be hex-encoded/]
    ]
    for (const [overrides, pattern] of cases) {
      const exit = await Effect.runPromiseExit(
        Effect.provide(Effect.gen(function*() { return yield* LightningRail }), Lnd.layer(configFor(fake, overrides)))
      )
      assert.isTrue(Exit.isFailure(exit))
      assert.match(Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "", pattern)
    }
  })

  describe("over TLS with the node's self-signed certificate", () => {
    let dir: string | undefined
    let tls: { key: string; cert: string } | undefined
    try {
      dir = mkdtempSync(join(tmpdir(), "spendgate-lnd-tls-"))
      execFileSync("openssl", [
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", join(dir, "tls.key"), "-out", join(dir, "tls.cert"), "-days", "1",
        "-subj", "/O=lnd autogenerated cert/CN=fake-lnd", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"
      ], { stdio: "ignore" })
      tls = { key: readFileSync(join(dir, "tls.key"), "utf8"), cert: readFileSync(join(dir, "tls.cert"), "utf8") }
    } catch {
      tls = undefined
    } finally {
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
    }

    it.skipIf(tls === undefined)("trusts tlsCertPem for this connection, and refuses the node without it", async () => {
      const fake = await fakeLnd({ tls: tls! })
      assert.match(fake.url, /^https:/)
      const result = await createInvoice(configFor(fake, { tlsCertPem: tls!.cert }))
      assert.isDefined(result.ok)
      await expectRailError(configFor(fake), /^LND is unreachable at https:.*(self-signed|certificate)/i)
      assert.strictEqual(fake.addInvoiceCalls.length, 1)
    })
  })
})

// ---------------------------------------------------------------------------
// SubscribeInvoices

describe("LND rail: subscriber (SubscribeInvoices)", () => {
  it("a settled invoice is recorded once with its hash, amount and time, then the cursor is saved", async () => {
    const fake = await fakeLnd()
    const sink = makeSink()
    await startSubscriber(configFor(fake), sink)
    await waitFor("the subscription", () => fake.openStreams() === 1)
    assert.strictEqual(fake.subscriptions[0].settleIndex, "0")
    assert.strictEqual(fake.subscriptions[0].macaroon, MACAROON_HEX)

    const invoice = fake.addInvoice(2_000_000n, "funding")
    fake.settle(invoice, { amtPaidMsat: 2_000_123n, settleDate: 1_767_225_600 })
    await waitFor("the record", () => sink.calls.length === 2)
    await sleep(100)

    assert.deepStrictEqual(sink.calls, [`record:${hexOf(invoice.hash)}`, "save:1"])
    assert.deepStrictEqual(sink.records, [{
      type: "lightning",
      externalId: hexOf(invoice.hash),
      amountPaid: 2_000_123n,
      paidAt: new Date(1_767_225_600 * 1000),
      source: "lnd"
    }])
    assert.strictEqual(sink.cursors.get("lnd"), "1")
    assert.strictEqual(fake.subscriptions.length, 1)
  })

  it("OPEN, ACCEPTED and CANCELED updates produce nothing", async () => {
    const fake = await fakeLnd()
    const sink = makeSink()
    await startSubscriber(configFor(fake), sink)
    await waitFor("the subscription", () => fake.openStreams() === 1)

    const a = fake.addInvoice(1_000n)
    const b = fake.addInvoice(2_000n)
    fake.setState(a, "ACCEPTED")
    fake.setState(b, "CANCELED")
    // A settlement afterwards shows the earlier lines have been read.
    const c = fake.addInvoice(3_000n)
    fake.settle(c)
    await waitFor("the settlement", () => sink.records.length === 1)
    assert.deepStrictEqual(sink.calls, [`record:${hexOf(c.hash)}`, "save:1"])
  })

  it("a malformed line is logged and skipped; later lines are still processed", async () => {
    const fake = await fakeLnd()
    const sink = makeSink()
    const { logs } = await startSubscriber(configFor(fake), sink)
    await waitFor("the subscription", () => fake.openStreams() === 1)

    const first = fake.addInvoice(1_000n)
    fake.settle(first)
    fake.sendRaw("{\"result\": {\"state\": \"SETTLED\", \"r_hash\n")
    fake.sendRaw("this is not json\n")
    fake.sendRaw("\n[1,2,3]\n")
    fake.sendRaw(JSON.stringify({ result: { state: "SETTLED", r_hash: "AAAA", settle_index: "9" } }) + "\n")
    fake.sendRaw(JSON.stringify({ result: { state: "SETTLED", r_hash: Buffer.alloc(32).toString("base64"), amt_paid_msat: "-5", settle_index: "9" } }) + "\n")
    fake.sendRaw(Buffer.from([0xff, 0xfe, 0x0a]))
    // A line over the length limit, sent in pieces, is dropped without being kept whole.
    const piece = "x".repeat(256 * 1024)
    for (let i = 0; i < 5; i++) fake.sendRaw(piece)
    fake.sendRaw("\n")
    const second = fake.addInvoice(2_000n)
    fake.settle(second)

    await waitFor("the second settlement", () => sink.records.length === 2)
    assert.deepStrictEqual(sink.calls, [`record:${hexOf(first.hash)}`, "save:1", `record:${hexOf(second.hash)}`, "save:2"])
    const warnings = logs.filter((line) => line.level === "Warn").map((line) => line.text)
    assert.isTrue(warnings.some((text) => text.includes("not JSON")), warnings.join("\n"))
    assert.isTrue(warnings.some((text) => text.includes("not a JSON object")), warnings.join("\n"))
    assert.isTrue(warnings.some((text) => text.includes("r_hash is not 32 bytes")), warnings.join("\n"))
    assert.isTrue(warnings.some((text) => text.includes("malformed amt_paid_msat")), warnings.join("\n"))
    assert.isTrue(warnings.some((text) => text.includes("not UTF-8")), warnings.join("\n"))
    assert.isTrue(warnings.some((text) => /a line of 1310720 bytes/.test(text)), warnings.join("\n"))
    // The same connection all along.
    assert.strictEqual(fake.subscriptions.length, 1)
  })

  it("reconnects after a dropped connection from the last saved settle_index and goes on", async () => {
    const fake = await fakeLnd()
    const sink = makeSink()
    const { logs } = await startSubscriber(configFor(fake), sink)
    await waitFor("the subscription", () => fake.openStreams() === 1)

    const a = fake.addInvoice(1_000n)
    const b = fake.addInvoice(2_000n)
    fake.settle(a)
    fake.settle(b)
    await waitFor("two records", () => sink.calls.length === 4)
    // Cut mid-line, as a dying connection would.
    fake.sendRaw("{\"result\": {\"state\": \"SETT")
    await sleep(50)
    fake.dropStreams()

    await waitFor("the second subscription", () => fake.subscriptions.length === 2 && fake.openStreams() === 1)
    assert.strictEqual(fake.subscriptions[1].settleIndex, "2")
    const c = fake.addInvoice(3_000n)
    fake.settle(c)
    await waitFor("the third record", () => sink.records.length === 3)
    assert.deepStrictEqual(sink.calls, [
      `record:${hexOf(a.hash)}`, "save:1",
      `record:${hexOf(b.hash)}`, "save:2",
      `record:${hexOf(c.hash)}`, "save:3"
    ])
    assert.isTrue(logs.some((line) => line.level === "Warn" && /reconnecting in \d+ ms/.test(line.text)))
  })

  it("reconnects when LND ends the stream, cleanly or with an error message", async () => {
    const fake = await fakeLnd()
    const sink = makeSink()
    const { logs } = await startSubscriber(configFor(fake), sink)
    await waitFor("the subscription", () => fake.openStreams() === 1)
    const a = fake.addInvoice(1_000n)
    fake.settle(a)
    await waitFor("the record", () => sink.calls.length === 2)

    fake.endStreams()
    await waitFor("the second subscription", () => fake.openStreams() === 1 && fake.subscriptions.length === 2)
    assert.strictEqual(fake.subscriptions[1].settleIndex, "1")

    fake.sendRaw(JSON.stringify({ error: { code: 14, message: "invoice registry shutting down", details: [] } }) + "\n")
    await waitFor("the third subscription", () => fake.openStreams() === 1 && fake.subscriptions.length === 3)
    assert.strictEqual(fake.subscriptions[2].settleIndex, "1")
    assert.isTrue(logs.some((line) => line.text.includes("LND closed the invoice stream")))
    assert.isTrue(logs.some((line) => line.text.includes("invoice registry shutting down")))

    const b = fake.addInvoice(2_000n)
    fake.settle(b)
    await waitFor("the second record", () => sink.records.length === 2)
    assert.strictEqual(sink.cursors.get("lnd"), "2")
  })

  it("a restarted subscriber resumes from the saved cursor and gets what was settled meanwhile", async () => {
    const fake = await fakeLnd()
    const sink = makeSink()
    const first = await startSubscriber(configFor(fake), sink)
    await waitFor("the subscription", () => fake.openStreams() === 1)
    const invoices = [1, 2, 3, 4, 5].map((n) => fake.addInvoice(BigInt(n) * 1_000n))
    fake.settle(invoices[0])
    fake.settle(invoices[1])
    await waitFor("two records", () => sink.records.length === 2)
    await first.stop()
    await waitFor("the stream to close", () => fake.openStreams() === 0)

    // Settled while nobody listens.
    fake.settle(invoices[2])
    fake.settle(invoices[3])

    await startSubscriber(configFor(fake), sink)
    await waitFor("the replay", () => sink.records.length === 4)
    assert.strictEqual(fake.subscriptions.length, 2)
    // Only the first start, with no cursor yet, listed the node's invoices.
    assert.strictEqual(fake.requests.filter((line) => line.startsWith("GET /v1/invoices?")).length, 1)
    assert.strictEqual(fake.subscriptions[1].settleIndex, "2")
    fake.settle(invoices[4])
    await waitFor("the live settlement", () => sink.records.length === 5)
    assert.deepStrictEqual(sink.records.map((notice) => notice.externalId), invoices.map((invoice) => hexOf(invoice.hash)))
    assert.deepStrictEqual(sink.calls.filter((call) => call.startsWith("save:")), ["save:1", "save:2", "save:3", "save:4", "save:5"])
    assert.strictEqual(sink.cursors.get("lnd"), "5")
  })

  it("with no cursor saved it first lists the node's invoices in pages, records what settled before it started, saves the highest settle_index once and subscribes from it", async () => {
    const fake = await fakeLnd()
    const sink = makeSink()
    const invoices = Array.from({ length: 250 }, (_, n) => fake.addInvoice(BigInt(n + 1) * 1_000n))
    // Settled out of add order, across the three pages; one more is cancelled.
    fake.settle(invoices[229])
    fake.settle(invoices[4])
    fake.settle(invoices[119])
    fake.setState(invoices[7], "CANCELED")

    await startSubscriber(configFor(fake), sink)
    await waitFor("the subscription", () => fake.openStreams() === 1)
    assert.deepStrictEqual(fake.requests.filter((line) => line.startsWith("GET /v1/invoices?")), [
      "GET /v1/invoices?index_offset=0&num_max_invoices=100&reversed=false",
      "GET /v1/invoices?index_offset=100&num_max_invoices=100&reversed=false",
      "GET /v1/invoices?index_offset=200&num_max_invoices=100&reversed=false"
    ])
    assert.deepStrictEqual(sink.calls, [
      `record:${hexOf(invoices[4].hash)}`,
      `record:${hexOf(invoices[119].hash)}`,
      `record:${hexOf(invoices[229].hash)}`,
      "save:3"
    ])
    assert.strictEqual(fake.subscriptions[0].settleIndex, "3")
    assert.strictEqual(sink.records[0].amountPaid, 5_000n)

    fake.settle(invoices[249])
    await waitFor("the live settlement", () => sink.records.length === 4)
    assert.deepStrictEqual(sink.calls.slice(4), [`record:${hexOf(invoices[249].hash)}`, "save:4"])
  })

  it("a catch-up that fails part-way saves no cursor and is done again from the start", async () => {
    const fake = await fakeLnd()
    const sink = makeSink()
    const a = fake.addInvoice(1_000n)
    const b = fake.addInvoice(2_000n)
    fake.settle(a)
    fake.settle(b)
    let refusals = 1
    fake.listReply = (path) => path.includes("index_offset=0") && refusals-- > 0
      ? { status: 503, body: lndError(14, "waiting to start, RPC services not available") }
      : undefined
    sink.failRecords = 0
    const { logs } = await startSubscriber(configFor(fake), sink)
    await waitFor("the subscription", () => fake.openStreams() === 1)
    assert.isTrue(logs.some((line) => line.level === "Warn" && line.text.includes("RPC services not available")))
    assert.deepStrictEqual(sink.calls, [`record:${hexOf(a.hash)}`, `record:${hexOf(b.hash)}`, "save:2"])

    // A record that fails during the catch-up: nothing saved, the whole listing again.
    const fresh = makeSink()
    fresh.failRecords = 1
    await startSubscriber(configFor(fake), fresh)
    await waitFor("the second subscriber", () => fake.openStreams() === 2)
    assert.deepStrictEqual(fresh.calls, [
      `fail:${hexOf(a.hash)}`,
      `record:${hexOf(a.hash)}`, `record:${hexOf(b.hash)}`, "save:2"
    ])
  })

  it("a malformed ListInvoices answer is reported and retried; a node with no settled invoice subscribes from 0", async () => {
    const fake = await fakeLnd()
    const sink = makeSink()
    fake.addInvoice(1_000n)
    let bad = 1
    fake.listReply = () => bad-- > 0 ? { status: 200, body: JSON.stringify({ invoices: "nope" }) } : undefined
    const { logs } = await startSubscriber(configFor(fake), sink)
    await waitFor("the subscription", () => fake.openStreams() === 1)
    assert.isTrue(logs.some((line) => line.text.includes("invoices that are not a list")))
    assert.strictEqual(fake.subscriptions[0].settleIndex, "0")
    assert.deepStrictEqual(sink.calls, [])
  })

  it("a settlement the sink fails to record does not move the cursor and is delivered again", async () => {
    const fake = await fakeLnd()
    const sink = makeSink()
    await startSubscriber(configFor(fake), sink)
    await waitFor("the subscription", () => fake.openStreams() === 1)
    const a = fake.addInvoice(1_000n)
    const b = fake.addInvoice(2_000n)
    fake.settle(a)
    await waitFor("the first record", () => sink.records.length === 1)

    sink.failRecords = 1
    fake.settle(b)
    await waitFor("the replayed record", () => sink.records.length === 2)
    assert.deepStrictEqual(sink.calls, [
      `record:${hexOf(a.hash)}`, "save:1",
      `fail:${hexOf(b.hash)}`,
      `record:${hexOf(b.hash)}`, "save:2"
    ])
    assert.strictEqual(fake.subscriptions[1].settleIndex, "1")
  })

  it("keeps retrying with growing delays while LND refuses, and picks up once it accepts", async () => {
    const fake = await fakeLnd()
    const sink = makeSink(new Map([["lnd", "7"]]))
    fake.subscribeReply = () => BAD_MACAROON
    const { logs } = await startSubscriber(configFor(fake), sink)
    await sleep(1_700)
    // 100 + 200 + 400 + 800 ms of backoff: at most five attempts in that time.
    const attempts = fake.subscriptions.length
    assert.isAtLeast(attempts, 3)
    assert.isAtMost(attempts, 6)
    assert.isTrue(fake.subscriptions.every((subscription) => subscription.settleIndex === "7"))
    assert.isTrue(
      logs.some((line) => line.level === "Warn" && line.text.includes("verification failed: signature mismatch")),
      logs.map((line) => line.text).join("\n")
    )
    assert.isTrue(logs.every((line) => !line.text.includes(MACAROON_HEX)))

    fake.subscribeReply = undefined
    await waitFor("an open subscription", () => fake.openStreams() === 1, 8_000)
    const invoice = fake.addInvoice(1_000n)
    fake.settle(invoice)
    await waitFor("the record", () => sink.records.length === 1)
    // LND numbers settlements from 1 here; the saved cursor never goes backwards.
    assert.strictEqual(sink.cursors.get("lnd"), "7")
  })

  it("starts the backoff afresh after a subscription that worked", async () => {
    const fake = await fakeLnd()
    const sink = makeSink()
    let refusals = 5
    fake.subscribeReply = () => refusals-- > 0 ? { status: 503, body: lndError(14, "unavailable") } : "stream"
    await startSubscriber(configFor(fake), sink)
    // Five refusals: the delays reach 100 + 200 + 400 + 800 + 1600 ms.
    await waitFor("the accepted subscription", () => fake.openStreams() === 1, 8_000)
    const invoice = fake.addInvoice(1_000n)
    fake.settle(invoice)
    await waitFor("the record", () => sink.records.length === 1)

    const dropped = Date.now()
    fake.dropStreams()
    await waitFor("the next subscription", () => fake.openStreams() === 1)
    // The first delay again (100 ms), not the 3.2 s that would come next.
    assert.isBelow(Date.now() - dropped, 1_000)
    assert.strictEqual(fake.subscriptions.at(-1)?.settleIndex, "1")
  })

  it("closing the layer's scope ends the subscription and stops reconnecting", async () => {
    const fake = await fakeLnd()
    const sink = makeSink()
    const running = await startSubscriber(configFor(fake), sink)
    await waitFor("the subscription", () => fake.openStreams() === 1)
    await running.stop()
    await waitFor("the stream to close", () => fake.openStreams() === 0 && fake.subscriptions[0].closed)
    await sleep(500)
    assert.strictEqual(fake.subscriptions.length, 1)

    // And while it is between attempts.
    fake.subscribeReply = () => ({ status: 503, body: lndError(14, "unavailable") })
    const retrying = await startSubscriber(configFor(fake), sink)
    await waitFor("two refused attempts", () => fake.subscriptions.length >= 3)
    await retrying.stop()
    const seen = fake.subscriptions.length
    await sleep(1_000)
    assert.strictEqual(fake.subscriptions.length, seen)
  })

  it("an unreadable saved cursor is reported and retried, not replaced by 0", async () => {
    const fake = await fakeLnd()
    const sink = makeSink(new Map([["lnd", "twelve"]]))
    const { logs } = await startSubscriber(configFor(fake), sink)
    await waitFor("a retry", () => sink.loads >= 2)
    assert.strictEqual(fake.subscriptions.length, 0)
    assert.isTrue(logs.some((line) => line.text.includes("the saved LND cursor is not a settle index")))
    sink.cursors.set("lnd", "3")
    await waitFor("the subscription", () => fake.openStreams() === 1, 8_000)
    assert.strictEqual(fake.subscriptions[0].settleIndex, "3")
  })
})
