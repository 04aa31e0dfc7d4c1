import { upstreamLayers } from "../support/upstreamLayers.ts"
import { assert, describe, it, layer } from "@effect/vitest"
import { Cause, Effect, Exit, Logger, Redacted, References, Result } from "effect"
import * as fc from "fast-check"
import { countSegments } from "../../adapters/providers/sms/segments.ts"
import * as Twilio from "../../adapters/providers/sms/twilio.ts"
import { type Provider, ProviderFailure, type UnitPrice } from "../../src/capabilities/Provider.ts"
import type { SmsInput } from "../../src/capabilities/schemas.ts"
import { type FakeUpstream, json, type Recorded, refusedUrl, startFake, text } from "./fakeUpstream.ts"

// ---------------------------------------------------------------------------
// Segment counting

const GSM_BASIC = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
const GSM_EXTENSION = "\f^{}\\[~]|€"
const a = (n: number) => "a".repeat(n)

describe("countSegments", () => {
  const table: ReadonlyArray<readonly [string, string, "GSM-7" | "UCS-2", number, number]> = [
    ["one character", "a", "GSM-7", 1, 1],
    ["an empty body is one empty segment", "", "GSM-7", 1, 0],
    ["160 GSM characters", a(160), "GSM-7", 1, 160],
    ["161 GSM characters", a(161), "GSM-7", 2, 161],
    ["153 × 2 GSM characters", a(306), "GSM-7", 2, 306],
    ["306 + 1 GSM characters", a(307), "GSM-7", 3, 307],
    ["153 × 3 GSM characters", a(459), "GSM-7", 3, 459],
    ["€ counts double", "€", "GSM-7", 1, 2],
    ["[ counts double", "[", "GSM-7", 1, 2],
    ["80 × € is 160 septets: one segment", "€".repeat(80), "GSM-7", 1, 160],
    ["159 + € is 161 septets: two segments", `${a(159)}€`, "GSM-7", 2, 161],
    ["every extension character counts double", GSM_EXTENSION, "GSM-7", 1, 2 * GSM_EXTENSION.length],
    ["the whole basic alphabet", GSM_BASIC, "GSM-7", 1, GSM_BASIC.length],
    // Without the move the 306 septets would fill two segments exactly.
    ["an escape pair at position 153 moves to the next segment", `${a(152)}€${a(152)}`, "GSM-7", 3, 306],
    ["an escape pair that fits at the end of a segment stays", `${a(151)}€${a(153)}`, "GSM-7", 2, 306],
    ["70 UCS-2 units", "й".repeat(70), "UCS-2", 1, 70],
    ["71 UCS-2 units", "й".repeat(71), "UCS-2", 2, 71],
    ["67 × 2 UCS-2 units", "й".repeat(134), "UCS-2", 2, 134],
    ["67 × 2 + 1 UCS-2 units", "й".repeat(135), "UCS-2", 3, 135],
    ["an emoji is two units", "😀", "UCS-2", 1, 2],
    ["35 emoji are 70 units: one segment", "😀".repeat(35), "UCS-2", 1, 70],
    ["36 emoji are 72 units: two segments", "😀".repeat(36), "UCS-2", 2, 72],
    // Without the move the 134 units would fill two segments exactly.
    ["an emoji across a segment boundary is not split", `${"й".repeat(66)}😀${"й".repeat(66)}`, "UCS-2", 3, 134],
    ["one non-GSM character switches the whole body to UCS-2", `${a(100)}й`, "UCS-2", 2, 101],
    ["a backtick is not GSM", "`", "UCS-2", 1, 1],
    ["a lower-case ç is not in the default alphabet", "ç", "UCS-2", 1, 1],
    ["curly quotes are not GSM", "“hi”", "UCS-2", 1, 4],
    ["€ counts once in UCS-2", `€й`, "UCS-2", 1, 2]
  ]
  for (const [name, body, encoding, segments, units] of table) {
    it(name, () => {
      assert.deepStrictEqual(countSegments(body), { encoding, segments, units })
    })
  }

  const gsmChar = fc.constantFrom(...GSM_BASIC, ...GSM_EXTENSION)
  const anyChar = fc.oneof(
    gsmChar,
    fc.constantFrom("й", "中", "😀", "👍🏽", "`", "ç", "\u00a0", "\ud800"),
    fc.string({ unit: "binary", minLength: 1, maxLength: 1 })
  )
  const body = (char: fc.Arbitrary<string>, maxLength: number) =>
    fc.array(char, { maxLength }).map((chars) => chars.join(""))

  it("segments never decrease when a character is appended", () => {
    fc.assert(
      fc.property(body(anyChar, 400), anyChar, (text, extra) => {
        assert.isAtLeast(countSegments(text + extra).segments, countSegments(text).segments)
      }),
      { numRuns: 500 }
    )
    // And for GSM bodies around the segment sizes.
    fc.assert(
      fc.property(body(gsmChar, 480), gsmChar, (text, extra) => {
        assert.isAtLeast(countSegments(text + extra).segments, countSegments(text).segments)
      }),
      { numRuns: 500 }
    )
  })

  it("GSM bodies of at most 160 basic characters are one segment; longer ones need ⌈septets / 153⌉", () => {
    const basic = fc.constantFrom(...GSM_BASIC)
    fc.assert(
      fc.property(body(basic, 160), (text) => {
        assert.deepStrictEqual(countSegments(text), { encoding: "GSM-7", segments: 1, units: text.length })
      }),
      { numRuns: 300 }
    )
    fc.assert(
      fc.property(fc.integer({ min: 161, max: 1600 }), (length) => {
        assert.strictEqual(countSegments(a(length)).segments, Math.ceil(length / 153))
      })
    )
  })

  it("every segment holds at most its share, and no more segments are used than needed", () => {
    fc.assert(
      fc.property(body(anyChar, 400), (text) => {
        const { encoding, segments, units } = countSegments(text)
        const [single, per] = encoding === "GSM-7" ? [160, 153] : [70, 67]
        if (units <= single) assert.strictEqual(segments, 1)
        else {
          assert.isAtLeast(segments, Math.ceil(units / per))
          // A moved character wastes at most one unit per boundary.
          assert.isAtMost(segments, Math.ceil(units / (per - 1)))
        }
      }),
      { numRuns: 500 }
    )
  })
})

// ---------------------------------------------------------------------------
// Twilio over HTTP

const ACCOUNT_SID = "AC0123456789abcdef0123456789abcdef"
const AUTH_TOKEN = "f00dfeedcafe0123456789abcdef0123"
const SERVICE_SID = "MG9876543210fedcba9876543210fedcba"
const FROM = "+15005550006"
const PRICE: UnitPrice = { per: "segment", priceMicroUsd: 7_900n }
const MESSAGES_PATH = `/2010-04-01/Accounts/${ACCOUNT_SID}/Messages.json`

/** The Message resource as Twilio answers a create (201). */
const messageResource = (form: URLSearchParams, overrides: Record<string, unknown> = {}) => {
  const sid = "SM1f0e8ae6ade43cb3c0ce4525424e404f"
  return {
    account_sid: ACCOUNT_SID,
    api_version: "2010-04-01",
    body: form.get("Body"),
    date_created: "Fri, 20 Nov 2026 09:14:31 +0000",
    date_sent: null,
    date_updated: "Fri, 20 Nov 2026 09:14:31 +0000",
    direction: "outbound-api",
    error_code: null,
    error_message: null,
    from: form.get("From"),
    messaging_service_sid: form.get("MessagingServiceSid"),
    num_media: "0",
    num_segments: "1",
    price: null,
    price_unit: "USD",
    sid,
    status: "queued",
    subresource_uris: { media: `/2010-04-01/Accounts/${ACCOUNT_SID}/Messages/${sid}/Media.json` },
    to: form.get("To"),
    uri: `/2010-04-01/Accounts/${ACCOUNT_SID}/Messages/${sid}.json`,
    ...overrides
  }
}

const twilioError = (status: number, code: number, message: string) =>
  json({ code, message, more_info: `https://www.twilio.com/docs/errors/${code}`, status }, status)

const formOf = (request: Recorded) => new URLSearchParams(request.body)

const created = (overrides: Record<string, unknown> = {}) => (request: Recorded) =>
  json(messageResource(formOf(request), overrides), 201)

const twilioProvider = (
  fake: FakeUpstream,
  extra: Partial<Twilio.TwilioOptions> = {}
) =>
  Twilio.make({
    accountSid: ACCOUNT_SID,
    authToken: Redacted.make(AUTH_TOKEN),
    baseUrl: fake.url,
    unitPrice: PRICE,
    ...(extra.messagingServiceSid === undefined ? { from: FROM } : {}),
    ...extra
  })

const quoteOf = (provider: Provider<"sms">, input: SmsInput) => {
  const quote = provider.quote(input)
  if (Result.isFailure(quote)) return assert.fail("the quote failed")
  return quote.success
}

/** Runs a call at its own quote, with a hard bound on the wait. */
const runCall = (provider: Provider<"sms">, input: SmsInput) =>
  provider.run(input, quoteOf(provider, input)).pipe(
    Effect.timeoutOrElse({ duration: "10 seconds", orElse: () => Effect.die(new Error("the call did not finish within 10 s")) })
  )

const failureOf = (provider: Provider<"sms">, input: SmsInput) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(runCall(provider, input))
    if (Exit.isSuccess(exit)) return assert.fail(`expected a failure, got ${JSON.stringify(exit.value.output)}`)
    assert.isFalse(Cause.hasDies(exit.cause), `a defect: ${Cause.pretty(exit.cause)}`)
    const error = Cause.squash(exit.cause)
    assert.instanceOf(error, ProviderFailure)
    assert.notInclude((error as ProviderFailure).message, AUTH_TOKEN)
    return error as ProviderFailure
  })

const sms = (body: string, to = "+14155550100"): SmsInput => ({ to, body })

const only = (fake: FakeUpstream): Recorded => {
  assert.strictEqual(fake.requests.length, 1, "exactly one request")
  return fake.requests[0]!
}

interface Logged {
  readonly level: string
  readonly message: unknown
  readonly annotations: Readonly<Record<string, unknown>>
}

/** Runs an effect with its log lines collected. */
const withLogs = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const logs: Array<Logged> = []
    const collect = Logger.make(({ fiber, logLevel, message }) => {
      logs.push({ level: logLevel, message, annotations: fiber.getRef(References.CurrentLogAnnotations) })
    })
    const result = yield* effect.pipe(Effect.provide(Logger.layer([collect])))
    return { result, logs }
  })

layer(upstreamLayers, { excludeTestServices: true })("twilio over HTTP", (it) => {
  it.effect("POSTs the form with Basic auth, maps the Message resource and meters num_segments", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(created({ num_segments: "2" }))
      const provider = yield* twilioProvider(fake)
      assert.strictEqual(provider.name, "twilio")
      assert.strictEqual(provider.capability, "sms")
      assert.deepStrictEqual(provider.unitPrice, PRICE)

      const body = `Your code is 123456. ${"Valid for ten minutes & one use only. ".repeat(5)}`.trim()
      assert.strictEqual(countSegments(body).segments, 2)
      const input = sms(body)
      assert.strictEqual(quoteOf(provider, input).microUsd, 15_800n, "price × 2 segments")

      const metered = yield* runCall(provider, input)
      const request = only(fake)
      assert.strictEqual(request.method, "POST")
      assert.strictEqual(request.path, MESSAGES_PATH)
      assert.strictEqual(
        request.headers.authorization,
        `Basic ${Buffer.from(`${ACCOUNT_SID}:${AUTH_TOKEN}`).toString("base64")}`
      )
      assert.match(request.headers["content-type"] ?? "", /^application\/x-www-form-urlencoded/)
      assert.strictEqual(request.headers.accept, "application/json")
      assert.isUndefined(request.headers.traceparent)
      const form = formOf(request)
      assert.deepStrictEqual([...form.keys()].sort(), ["Body", "From", "To"])
      assert.strictEqual(form.get("To"), "+14155550100")
      assert.strictEqual(form.get("From"), FROM)
      assert.strictEqual(form.get("Body"), body)
      assert.include(request.body, "To=%2B14155550100", "the + of E.164 is escaped")
      assert.notInclude(request.body, AUTH_TOKEN)

      assert.deepStrictEqual(metered.output, {
        sid: "SM1f0e8ae6ade43cb3c0ce4525424e404f",
        segments: 2,
        encoding: "GSM-7",
        status: "queued"
      })
      assert.strictEqual(metered.actualMicroUsd, 15_800n)
    }))

  it.effect("with a Messaging Service: MessagingServiceSid instead of From; num_segments \"0\" falls back to the count", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(created({ num_segments: "0", status: "accepted", from: null }))
      const provider = yield* twilioProvider(fake, { messagingServiceSid: SERVICE_SID })
      const body = "Здравствуйте! Ваш заказ №4821 отправлен 🚚 сегодня утром. Номер для отслеживания: 1Z999AA10123456784."
      const counted = countSegments(body)
      assert.strictEqual(counted.encoding, "UCS-2")
      assert.strictEqual(counted.segments, 2)

      const metered = yield* runCall(provider, sms(body))
      const form = formOf(only(fake))
      assert.deepStrictEqual([...form.keys()].sort(), ["Body", "MessagingServiceSid", "To"])
      assert.strictEqual(form.get("MessagingServiceSid"), SERVICE_SID)
      assert.strictEqual(form.get("Body"), body)
      assert.deepStrictEqual(metered.output, {
        sid: "SM1f0e8ae6ade43cb3c0ce4525424e404f",
        segments: 2,
        encoding: "UCS-2",
        status: "accepted"
      })
      assert.strictEqual(metered.actualMicroUsd, 15_800n)
    }))

  it.effect("fewer segments reported than quoted: the reported ones are charged", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(created({ num_segments: "1" }))
      const provider = yield* twilioProvider(fake)
      const input = sms(a(200))
      assert.strictEqual(quoteOf(provider, input).microUsd, 15_800n)
      const metered = yield* runCall(provider, input)
      assert.strictEqual(metered.output.segments, 1)
      assert.strictEqual(metered.actualMicroUsd, 7_900n)
    }))

  it.effect("more segments reported than quoted: the quote is charged, and a warning logged", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(created({ num_segments: "3" }))
      const provider = yield* twilioProvider(fake)
      const input = sms("Short and plain.")
      assert.strictEqual(quoteOf(provider, input).microUsd, 7_900n)
      const { result: metered, logs } = yield* withLogs(runCall(provider, input))
      assert.strictEqual(metered.output.segments, 3, "the answer says what Twilio reported")
      assert.strictEqual(metered.actualMicroUsd, 7_900n, "never above the quote")
      const warnings = logs.filter((log) => log.level === "Warn")
      assert.strictEqual(warnings.length, 1)
      assert.include(String(warnings[0]!.message), "more segments than quoted")
      assert.strictEqual(warnings[0]!.annotations.reportedSegments, 3)
      assert.strictEqual(warnings[0]!.annotations.countedSegments, 1)

      // As many as quoted: nothing logged.
      fake.answer = created({ num_segments: "1" })
      const quiet = yield* withLogs(runCall(provider, input))
      assert.strictEqual(quiet.logs.filter((log) => log.level === "Warn").length, 0)
    }))

  it.effect("a missing or unusable num_segments falls back to the count", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(created({ num_segments: null }))
      const provider = yield* twilioProvider(fake)
      const input = sms(a(161))
      for (const value of [null, undefined, "", "two", "-1", "1.5"]) {
        fake.answer = created({ num_segments: value })
        const metered = yield* runCall(provider, input)
        assert.strictEqual(metered.output.segments, 2, String(value))
        assert.strictEqual(metered.actualMicroUsd, 15_800n)
      }
      fake.answer = created({ num_segments: 2 })
      assert.strictEqual((yield* runCall(provider, input)).output.segments, 2, "a number is taken too")
    }))

  it.effect("401, 403 and 400 (21211 invalid 'To') are rejected with Twilio's message and code", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(() => twilioError(401, 20003, "Authenticate"))
      const provider = yield* twilioProvider(fake)
      const unauthorized = yield* failureOf(provider, sms("hi"))
      assert.strictEqual(unauthorized.reason, "rejected")
      assert.include(unauthorized.message, "HTTP 401 20003")
      assert.include(unauthorized.message, "Authenticate")

      fake.answer = () => twilioError(400, 21211, "Invalid 'To' Phone Number: +1415555XXXX")
      const invalidTo = yield* failureOf(provider, sms("hi"))
      assert.strictEqual(invalidTo.reason, "rejected")
      assert.include(invalidTo.message, "21211")
      assert.include(invalidTo.message, "Invalid 'To' Phone Number")

      fake.answer = () => twilioError(403, 20008, `Resource not accessible with Test Account Credentials ${AUTH_TOKEN}`)
      const forbidden = yield* failureOf(provider, sms("hi"))
      assert.strictEqual(forbidden.reason, "rejected")
      assert.include(forbidden.message, "[redacted]")
    }))

  it.effect("429 is rate_limited, 5xx unavailable", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(() => twilioError(429, 20429, "Too Many Requests"))
      const provider = yield* twilioProvider(fake)
      assert.strictEqual((yield* failureOf(provider, sms("hi"))).reason, "rate_limited")
      fake.answer = () => twilioError(500, 20500, "Internal Server Error")
      assert.strictEqual((yield* failureOf(provider, sms("hi"))).reason, "unavailable")
      fake.answer = () => text(503, "<html><body><h1>503 Service Unavailable</h1></body></html>", "text/html")
      const down = yield* failureOf(provider, sms("hi"))
      assert.strictEqual(down.reason, "unavailable")
      assert.include(down.message, "503 Service Unavailable")
    }))

  it.effect("a message created already failed was not sent: rejected", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(created({ status: "failed", error_code: 30007, error_message: "Message filtered" }))
      const provider = yield* twilioProvider(fake)
      const failure = yield* failureOf(provider, sms("hi"))
      assert.strictEqual(failure.reason, "rejected")
      assert.include(failure.message, "failed 30007")
      assert.include(failure.message, "Message filtered")
    }))

  it.effect("an answer that is not JSON, or lacks sid or status, is malformed", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(() => text(201, "Created"))
      const provider = yield* twilioProvider(fake)
      assert.strictEqual((yield* failureOf(provider, sms("hi"))).reason, "malformed")
      for (const overrides of [{ sid: null }, { sid: "" }, { sid: 12 }, { status: null }, { status: "queued now" }]) {
        fake.answer = created(overrides)
        assert.strictEqual((yield* failureOf(provider, sms("hi"))).reason, "malformed", JSON.stringify(overrides))
      }
      fake.answer = () => json([], 201)
      assert.strictEqual((yield* failureOf(provider, sms("hi"))).reason, "malformed")
    }))

  it.effect("a server that does not answer is a timeout within the bound", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(() => ({ _tag: "hang" }))
      const provider = yield* twilioProvider(fake, { timeoutMs: 300 })
      const started = Date.now()
      assert.strictEqual((yield* failureOf(provider, sms("hi"))).reason, "timeout")
      assert.isBelow(Date.now() - started, 3_000)
    }))

  it.effect("an endless or oversized answer is too_large; a cut one is a network failure", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(() => ({ _tag: "endless" }))
      const provider = yield* twilioProvider(fake, { maxResponseBytes: 64 * 1024 })
      const started = Date.now()
      assert.strictEqual((yield* failureOf(provider, sms("hi"))).reason, "too_large")
      assert.isBelow(Date.now() - started, 5_000)
      fake.answer = () => ({ _tag: "declared", length: 10 * 1024 * 1024 })
      assert.strictEqual((yield* failureOf(provider, sms("hi"))).reason, "too_large")
      const roomy = yield* twilioProvider(fake, { maxResponseBytes: 1024 * 1024 })
      fake.answer = () => ({ _tag: "cut" })
      assert.oneOf((yield* failureOf(roomy, sms("hi"))).reason, ["network", "unavailable"])
    }))

  it.effect("a refused connection is unavailable", () =>
    Effect.gen(function*() {
      const url = yield* refusedUrl
      const provider = yield* Twilio.make({ accountSid: ACCOUNT_SID, authToken: Redacted.make(AUTH_TOKEN), from: FROM, baseUrl: url, unitPrice: PRICE })
      assert.strictEqual((yield* failureOf(provider, sms("hi"))).reason, "unavailable")
    }))

  it.effect("a bad configuration is a defect", () =>
    Effect.gen(function*() {
      const base = { accountSid: ACCOUNT_SID, authToken: Redacted.make(AUTH_TOKEN), unitPrice: PRICE }
      const cases: ReadonlyArray<Twilio.TwilioOptions> = [
        base,
        { ...base, from: FROM, messagingServiceSid: SERVICE_SID },
        { ...base, from: FROM, accountSid: "AC123/../../Calls" },
        { ...base, messagingServiceSid: "MG123" },
        { ...base, from: "not a sender!" },
        { ...base, from: FROM, authToken: Redacted.make("") },
        { ...base, from: FROM, unitPrice: { per: "message", priceMicroUsd: 1n } }
      ]
      for (const [index, options] of cases.entries()) {
        const exit = yield* Effect.exit(Twilio.make(options))
        assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause), `case ${index}`)
      }
      const alphanumeric = yield* Effect.exit(Twilio.make({ ...base, from: "Spendgate" }))
      assert.isTrue(Exit.isSuccess(alphanumeric), "an alphanumeric sender ID is a sender")
    }))
})
