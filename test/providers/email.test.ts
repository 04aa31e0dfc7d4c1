import { upstreamLayers } from "../support/upstreamLayers.ts"
import { assert, describe, it, layer } from "@effect/vitest"
import { Cause, Effect, Exit, Redacted, Result } from "effect"
import * as Net from "node:net"
import type { AddressInfo } from "node:net"
import { SMTPServer, type SMTPServerOptions } from "smtp-server"
import * as Resend from "../../adapters/providers/email/resend.ts"
import * as Smtp from "../../adapters/providers/email/smtp.ts"
import { type Provider, ProviderFailure, type UnitPrice } from "../../src/capabilities/Provider.ts"
import type { EmailInput } from "../../src/capabilities/schemas.ts"
import { type FakeUpstream, json, type Recorded, refusedUrl, startFake, text } from "./fakeUpstream.ts"

const PRICE: UnitPrice = { per: "message", priceMicroUsd: 1_000n }
const SENDER = "Spendgate <noreply@spendgate.test>"
const SENDER_ADDRESS = "noreply@spendgate.test"

// ---------------------------------------------------------------------------
// Running a provider

/** Runs a call with a hard bound on the wait, whatever the provider does. */
const runCall = (provider: Provider<"email">, input: EmailInput) =>
  provider.run(input, { microUsd: PRICE.priceMicroUsd }).pipe(
    Effect.timeoutOrElse({ duration: "10 seconds", orElse: () => Effect.die(new Error("the call did not finish within 10 s")) })
  )

/** The failure of a call, checked to be a ProviderFailure and never a defect. */
const failureOf = (provider: Provider<"email">, input: EmailInput) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(runCall(provider, input))
    if (Exit.isSuccess(exit)) return assert.fail(`expected a failure, got ${JSON.stringify(exit.value.output)}`)
    assert.isFalse(Cause.hasDies(exit.cause), `a defect: ${Cause.pretty(exit.cause)}`)
    const error = Cause.squash(exit.cause)
    assert.instanceOf(error, ProviderFailure)
    return error as ProviderFailure
  })

const message = (overrides: Partial<EmailInput> = {}): EmailInput => ({
  to: ["alice@example.com"],
  subject: "Weekly report",
  text: "Hello Alice.\nThe report is attached below.",
  ...overrides
})

// ---------------------------------------------------------------------------
// A real SMTP server on 127.0.0.1

interface Delivery {
  readonly mailFrom: string
  readonly rcptTo: ReadonlyArray<string>
  readonly raw: string
  readonly secure: boolean
  readonly user: unknown
}

interface LocalSmtp {
  readonly port: number
  readonly deliveries: Array<Delivery>
  /** Every RCPT TO the server was sent, accepted or not. */
  readonly rcptSeen: Array<string>
}

interface SmtpBehaviour {
  /** Recipients refused at RCPT TO with 550. */
  readonly refuse?: ReadonlyArray<string>
  /** Authentication required with these credentials. */
  readonly credentials?: { readonly user: string; readonly pass: string }
  /** Offer STARTTLS (the package's built-in self-signed certificate); default off. */
  readonly starttls?: boolean
  /** Reply to DATA with this error. */
  readonly dataError?: { readonly code: number; readonly message: string }
  readonly size?: number
}

const replyError = (message: string, responseCode: number) => Object.assign(new Error(message), { responseCode })

const startSmtp = (behaviour: SmtpBehaviour = {}) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ local: LocalSmtp; server: SMTPServer }>((resolve, reject) => {
        const deliveries: Array<Delivery> = []
        const rcptSeen: Array<string> = []
        const refuse = new Set((behaviour.refuse ?? []).map((address) => address.toLowerCase()))
        const options: SMTPServerOptions = {
          logger: false,
          disableReverseLookup: true,
          closeTimeout: 200,
          authOptional: behaviour.credentials === undefined,
          allowInsecureAuth: true,
          disabledCommands: behaviour.starttls === true ? [] : ["STARTTLS"],
          ...(behaviour.size === undefined ? {} : { size: behaviour.size }),
          onAuth: (auth, _session, callback) => {
            const expected = behaviour.credentials
            if (expected !== undefined && auth.username === expected.user && auth.password === expected.pass) {
              return callback(null, { user: auth.username })
            }
            return callback(replyError("Invalid username or password", 535))
          },
          onRcptTo: (address, _session, callback) => {
            rcptSeen.push(address.address)
            if (refuse.has(address.address.toLowerCase())) {
              return callback(replyError(`<${address.address}>: Recipient address rejected: User unknown`, 550))
            }
            return callback()
          },
          onData: (stream, session, callback) => {
            const chunks: Array<Buffer> = []
            stream.on("data", (chunk: Buffer) => chunks.push(chunk))
            stream.on("end", () => {
              if (behaviour.dataError !== undefined) {
                return callback(replyError(behaviour.dataError.message, behaviour.dataError.code))
              }
              const envelope = session.envelope
              deliveries.push({
                mailFrom: envelope.mailFrom === false ? "" : envelope.mailFrom.address,
                rcptTo: envelope.rcptTo.map((rcpt) => rcpt.address),
                raw: Buffer.concat(chunks).toString("utf8"),
                secure: session.secure,
                user: session.user
              })
              callback(null, "Queued as 4F2A1B")
            })
          }
        }
        const server = new SMTPServer(options)
        server.on("error", () => {})
        const listener = server.listen(0, "127.0.0.1", () => {
          const { port } = listener.address() as AddressInfo
          resolve({ local: { port, deliveries, rcptSeen }, server })
        })
        listener.on("error", reject)
      })
    ),
    ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
  ).pipe(Effect.map(({ local }) => local))

/** A TCP server that accepts connections and never says a word. */
const startSilent = Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<{ port: number; server: Net.Server; sockets: Set<Net.Socket> }>((resolve, reject) => {
      const sockets = new Set<Net.Socket>()
      const server = Net.createServer((socket) => {
        sockets.add(socket)
        socket.on("error", () => {})
        socket.on("close", () => sockets.delete(socket))
      })
      server.on("error", reject)
      server.listen(0, "127.0.0.1", () => resolve({ port: (server.address() as AddressInfo).port, server, sockets }))
    })
  ),
  ({ server, sockets }) =>
    Effect.promise(() =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      })
    )
)

/** A port that was just free on 127.0.0.1: connecting to it is refused. */
const freePort = Effect.promise(() =>
  new Promise<number>((resolve, reject) => {
    const server = Net.createServer()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(port))
    })
  })
)

const smtpProvider = (port: number, overrides: Partial<Smtp.SmtpOptions> = {}) =>
  Smtp.make({ host: "127.0.0.1", port, secure: false, from: SENDER, unitPrice: PRICE, timeoutMs: 5_000, ...overrides })

// ---------------------------------------------------------------------------
// Reading what arrived (a minimal RFC 5322 / MIME reader: enough for nodemailer's output)

interface Part {
  readonly headers: ReadonlyArray<readonly [string, string]>
  readonly body: string
}

/** Headers unfolded, in order, names lower-cased. */
const splitMessage = (raw: string): Part => {
  const end = raw.indexOf("\r\n\r\n")
  const head = end === -1 ? raw : raw.slice(0, end)
  const body = end === -1 ? "" : raw.slice(end + 4)
  const headers: Array<[string, string]> = []
  for (const line of head.split("\r\n")) {
    if (/^[ \t]/.test(line) && headers.length > 0) {
      headers[headers.length - 1]![1] += line.replace(/^[ \t]+/, " ")
    } else {
      const colon = line.indexOf(":")
      headers.push([line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()])
    }
  }
  return { headers, body }
}

const header = (part: Part, name: string): string | undefined => part.headers.find(([key]) => key === name)?.[1]
const headerNames = (part: Part): Array<string> => part.headers.map(([key]) => key)

/** Decodes =?UTF-8?Q?…?= and =?UTF-8?B?…?= words of a header value. */
const decodeWords = (value: string): string =>
  value.replace(/=\?utf-8\?([qb])\?([^?]*)\?=\s*(?==\?)?/gi, (_, encoding: string, data: string) =>
    encoding.toLowerCase() === "b"
      ? Buffer.from(data, "base64").toString("utf8")
      : Buffer.from(
        data.replace(/_/g, " ").replace(/=([0-9a-f]{2})/gi, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16))),
        "latin1"
      ).toString("utf8"))

const decodeBody = (part: Part): string => {
  const encoding = (header(part, "content-transfer-encoding") ?? "7bit").toLowerCase()
  if (encoding === "base64") return Buffer.from(part.body.replace(/\s+/g, ""), "base64").toString("utf8")
  if (encoding === "quoted-printable") {
    const bytes = part.body.replace(/=\r\n/g, "").replace(/=([0-9A-F]{2})/gi, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)))
    return Buffer.from(bytes, "latin1").toString("utf8")
  }
  return part.body
}

/** The leaf parts of a message: itself, or those of its multipart tree. */
const leaves = (part: Part): Array<Part> => {
  const type = header(part, "content-type") ?? "text/plain"
  const boundary = /boundary="?([^";]+)"?/i.exec(type)?.[1]
  if (!/^multipart\//i.test(type) || boundary === undefined) return [part]
  const sections = part.body.split(`--${boundary}`).slice(1)
  return sections
    .filter((section) => !section.startsWith("--"))
    .flatMap((section) => leaves(splitMessage(section.replace(/^\r\n/, "").replace(/\r\n$/, ""))))
}

const textOf = (raw: string, type: "text/plain" | "text/html"): string | undefined => {
  const part = leaves(splitMessage(raw)).find((leaf) => (header(leaf, "content-type") ?? "").toLowerCase().startsWith(type))
  // The last line break of a single-part body belongs to the message's end, not to the text.
  return part === undefined ? undefined : decodeBody(part).replace(/\r\n/g, "\n").replace(/\n$/, "")
}

// ---------------------------------------------------------------------------

describe("smtp (nodemailer) against a local SMTP server", () => {
  it.live("sends From, To, Subject, Reply-To, a Message-ID, text and html; a refused recipient is listed, the others accepted", () =>
    Effect.gen(function*() {
      const server = yield* startSmtp({ refuse: ["nobody@example.org"] })
      const provider = yield* smtpProvider(server.port)
      assert.strictEqual(provider.name, "smtp")
      assert.strictEqual(provider.capability, "email")
      assert.deepStrictEqual(provider.unitPrice, PRICE)

      const input = message({
        to: ["alice@example.com", "nobody@example.org", "bob@example.net"],
        subject: "Quarterly numbers – café ☕",
        text: "Plain version.\nSecond line.",
        html: "<p>HTML <b>version</b></p>",
        replyTo: "ops@example.com"
      })
      const quote = provider.quote(input)
      assert.isTrue(Result.isSuccess(quote))
      if (Result.isSuccess(quote)) assert.strictEqual(quote.success.microUsd, 1_000n, "one message, whatever the recipients")

      const metered = yield* runCall(provider, input)
      assert.deepStrictEqual(metered.output.accepted, ["alice@example.com", "bob@example.net"])
      assert.deepStrictEqual(metered.output.rejected, ["nobody@example.org"])
      assert.strictEqual(metered.actualMicroUsd, 1_000n, "delivered to some: charged")
      assert.match(metered.output.messageId, /^<[^<>\s]+@spendgate\.test>$/)

      assert.deepStrictEqual(server.rcptSeen, ["alice@example.com", "nobody@example.org", "bob@example.net"])
      assert.strictEqual(server.deliveries.length, 1)
      const delivery = server.deliveries[0]!
      assert.strictEqual(delivery.mailFrom, SENDER_ADDRESS)
      assert.deepStrictEqual(delivery.rcptTo, ["alice@example.com", "bob@example.net"])

      const mail = splitMessage(delivery.raw)
      assert.strictEqual(decodeWords(header(mail, "from") ?? ""), "Spendgate <noreply@spendgate.test>")
      assert.strictEqual(header(mail, "to"), "alice@example.com, nobody@example.org, bob@example.net")
      assert.strictEqual(decodeWords(header(mail, "subject") ?? ""), "Quarterly numbers – café ☕")
      assert.strictEqual(header(mail, "reply-to"), "ops@example.com")
      assert.strictEqual(header(mail, "message-id"), metered.output.messageId)
      assert.isDefined(header(mail, "date"))
      assert.match(header(mail, "content-type") ?? "", /^multipart\/alternative;/)
      assert.isUndefined(header(mail, "bcc"))
      assert.isUndefined(header(mail, "cc"))
      assert.strictEqual(textOf(delivery.raw, "text/plain"), "Plain version.\nSecond line.")
      assert.strictEqual(textOf(delivery.raw, "text/html"), "<p>HTML <b>version</b></p>")
      assert.strictEqual(leaves(mail).length, 2, "no attachment or other part")
    }))

  it.live("a text-only message is one text/plain part without Reply-To", () =>
    Effect.gen(function*() {
      const server = yield* startSmtp()
      const provider = yield* smtpProvider(server.port, { from: SENDER_ADDRESS })
      const metered = yield* runCall(provider, message({ text: "Only text." }))
      assert.deepStrictEqual(metered.output.accepted, ["alice@example.com"])
      assert.deepStrictEqual(metered.output.rejected, [])
      const mail = splitMessage(server.deliveries[0]!.raw)
      assert.strictEqual(header(mail, "from"), SENDER_ADDRESS)
      assert.match(header(mail, "content-type") ?? "", /^text\/plain/)
      assert.isUndefined(header(mail, "reply-to"))
      assert.strictEqual(textOf(server.deliveries[0]!.raw, "text/plain"), "Only text.")
      assert.isUndefined(textOf(server.deliveries[0]!.raw, "text/html"))
    }))

  it.live("every recipient refused: rejected, nothing delivered", () =>
    Effect.gen(function*() {
      const server = yield* startSmtp({ refuse: ["a@example.org", "b@example.org"] })
      const provider = yield* smtpProvider(server.port)
      const failure = yield* failureOf(provider, message({ to: ["a@example.org", "b@example.org"] }))
      assert.strictEqual(failure.reason, "rejected")
      assert.strictEqual(failure.provider, "smtp")
      assert.include(failure.message, "User unknown")
      assert.deepStrictEqual(server.rcptSeen, ["a@example.org", "b@example.org"])
      assert.strictEqual(server.deliveries.length, 0)
    }))

  it.live("a refused connection is unavailable", () =>
    Effect.gen(function*() {
      const port = yield* freePort
      const provider = yield* smtpProvider(port, { name: "relay" })
      const failure = yield* failureOf(provider, message())
      assert.strictEqual(failure.reason, "unavailable")
      assert.strictEqual(failure.provider, "relay")
      assert.include(failure.message, "ECONNREFUSED")
    }))

  it.live("logs in when the server requires it; a wrong password is rejected and never shown", () =>
    Effect.gen(function*() {
      const server = yield* startSmtp({ credentials: { user: "mailer", pass: "correct-horse-battery" } })
      const good = yield* smtpProvider(server.port, { auth: { user: "mailer", pass: Redacted.make("correct-horse-battery") } })
      yield* runCall(good, message())
      assert.strictEqual(server.deliveries.length, 1)
      assert.strictEqual(server.deliveries[0]!.user, "mailer")

      const wrong = yield* smtpProvider(server.port, { auth: { user: "mailer", pass: Redacted.make("wrong-password-123") } })
      const failure = yield* failureOf(wrong, message())
      assert.strictEqual(failure.reason, "rejected")
      assert.include(failure.message, "login")
      assert.notInclude(failure.message, "wrong-password-123")
      assert.strictEqual(server.deliveries.length, 1, "nothing more delivered")

      const none = yield* smtpProvider(server.port)
      const refused = yield* failureOf(none, message())
      assert.strictEqual(refused.reason, "rejected", "no credentials where they are required")
      assert.strictEqual(server.deliveries.length, 1)
    }))

  it.live("a server that never answers is a timeout within the bound", () =>
    Effect.gen(function*() {
      const silent = yield* startSilent
      const provider = yield* smtpProvider(silent.port, { timeoutMs: 300 })
      const started = Date.now()
      const failure = yield* failureOf(provider, message())
      const elapsed = Date.now() - started
      assert.strictEqual(failure.reason, "timeout")
      assert.isBelow(elapsed, 3_000, `took ${elapsed} ms`)
      assert.isAtLeast(elapsed, 250)
    }))

  it.live("a line break in the subject cannot add a header or a recipient", () =>
    Effect.gen(function*() {
      const server = yield* startSmtp()
      const provider = yield* smtpProvider(server.port)
      const metered = yield* runCall(
        provider,
        message({ subject: "Hello\r\nBcc: x@y.example\r\nX-Injected: 1\n\nbody", text: "Text." })
      )
      assert.deepStrictEqual(metered.output.accepted, ["alice@example.com"])
      assert.deepStrictEqual(server.rcptSeen, ["alice@example.com"], "no Bcc recipient in the envelope")
      const delivery = server.deliveries[0]!
      assert.deepStrictEqual(delivery.rcptTo, ["alice@example.com"])
      const mail = splitMessage(delivery.raw)
      const names = headerNames(mail)
      assert.notInclude(names, "bcc")
      assert.notInclude(names, "x-injected")
      assert.strictEqual(names.filter((name) => name === "subject").length, 1)
      assert.strictEqual(decodeWords(header(mail, "subject") ?? ""), "Hello Bcc: x@y.example X-Injected: 1 body")
      assert.strictEqual(textOf(delivery.raw, "text/plain"), "Text.")
    }))

  it.live("requireTls refuses a server without STARTTLS before sending anything", () =>
    Effect.gen(function*() {
      const server = yield* startSmtp()
      const provider = yield* smtpProvider(server.port, { requireTls: true })
      const failure = yield* failureOf(provider, message())
      assert.strictEqual(failure.reason, "unavailable")
      assert.deepStrictEqual(server.rcptSeen, [])
      assert.strictEqual(server.deliveries.length, 0)
    }))

  it.live("STARTTLS: an untrusted certificate is refused; trusted by configuration, the message goes over TLS", () =>
    Effect.gen(function*() {
      const server = yield* startSmtp({ starttls: true })
      // The test server's certificate is self-signed: refused by default, nothing sent in clear either.
      const strict = yield* smtpProvider(server.port, { requireTls: true })
      const failure = yield* failureOf(strict, message())
      assert.strictEqual(failure.reason, "unavailable")
      assert.strictEqual(server.deliveries.length, 0)

      const relaxed = yield* smtpProvider(server.port, { requireTls: true, tls: { rejectUnauthorized: false } })
      yield* runCall(relaxed, message())
      assert.strictEqual(server.deliveries.length, 1)
      assert.isTrue(server.deliveries[0]!.secure)
    }))

  it.live("the server refusing the message: 5xx rejected, 4xx unavailable", () =>
    Effect.gen(function*() {
      const permanent = yield* startSmtp({ dataError: { code: 554, message: "Message rejected as spam" } })
      const rejected = yield* failureOf(yield* smtpProvider(permanent.port), message())
      assert.strictEqual(rejected.reason, "rejected")
      assert.include(rejected.message, "spam")

      const transient = yield* startSmtp({ dataError: { code: 451, message: "Try again later" } })
      const deferred = yield* failureOf(yield* smtpProvider(transient.port), message())
      assert.strictEqual(deferred.reason, "unavailable")
      assert.include(deferred.message, "451")
    }))

  it.live("a message above the size the server advertises is not sent", () =>
    Effect.gen(function*() {
      const server = yield* startSmtp({ size: 2_000 })
      const provider = yield* smtpProvider(server.port)
      const failure = yield* failureOf(provider, message({ text: "x".repeat(10_000) }))
      assert.strictEqual(failure.reason, "rejected")
      assert.include(failure.message, "2000")
      assert.strictEqual(server.deliveries.length, 0)
    }))

  it.live("a bad configuration is a defect naming the problem", () =>
    Effect.gen(function*() {
      for (const overrides of [
        { from: "not an address" },
        { from: "Evil\r\nBcc: x@y.example <a@b.example>" },
        { port: 0 },
        { host: "" },
        { unitPrice: { per: "recipient", priceMicroUsd: 1n } }
      ] satisfies ReadonlyArray<Partial<Smtp.SmtpOptions>>) {
        const exit = yield* Effect.exit(smtpProvider(25, overrides))
        assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause), Object.keys(overrides).join())
      }
    }))
})

// ---------------------------------------------------------------------------
// Resend over HTTP

const RESEND_KEY = "re_test_0123456789abcdefABCDEF"

const resendProvider = (fake: FakeUpstream, limits: { readonly timeoutMs?: number; readonly maxResponseBytes?: number } = {}) =>
  Resend.make({ apiKey: Redacted.make(RESEND_KEY), from: SENDER, baseUrl: fake.url, unitPrice: PRICE, ...limits })

const resendError = (statusCode: number, name: string, message: string) => json({ statusCode, name, message }, statusCode)

const only = (fake: FakeUpstream): Recorded => {
  assert.strictEqual(fake.requests.length, 1, "exactly one request")
  return fake.requests[0]!
}

layer(upstreamLayers, { excludeTestServices: true })("resend over HTTP", (it) => {
  it.effect("POSTs /emails with the bearer key and the JSON body, and maps { id }", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(() => json({ id: "49a3999c-0ce1-4ea6-ab68-afcd6dc2e794" }))
      const provider = yield* resendProvider(fake)
      assert.strictEqual(provider.name, "resend")
      assert.strictEqual(provider.capability, "email")
      const input = message({
        to: ["alice@example.com", "bob@example.net"],
        subject: "Build finished",
        text: "All green.",
        html: "<p>All <b>green</b>.</p>",
        replyTo: "ops@example.com"
      })
      const quote = provider.quote(input)
      assert.isTrue(Result.isSuccess(quote) && quote.success.microUsd === 1_000n)

      const metered = yield* runCall(provider, input)
      const request = only(fake)
      assert.strictEqual(request.method, "POST")
      assert.strictEqual(request.path, "/emails")
      assert.strictEqual(request.headers.authorization, `Bearer ${RESEND_KEY}`)
      assert.match(request.headers["content-type"] ?? "", /^application\/json/)
      assert.strictEqual(request.headers.accept, "application/json")
      assert.isUndefined(request.headers.traceparent)
      assert.deepStrictEqual(JSON.parse(request.body), {
        from: "Spendgate <noreply@spendgate.test>",
        to: ["alice@example.com", "bob@example.net"],
        subject: "Build finished",
        text: "All green.",
        html: "<p>All <b>green</b>.</p>",
        reply_to: "ops@example.com"
      })
      assert.notInclude(request.body, RESEND_KEY)
      assert.deepStrictEqual(metered.output, {
        messageId: "49a3999c-0ce1-4ea6-ab68-afcd6dc2e794",
        accepted: ["alice@example.com", "bob@example.net"],
        rejected: []
      })
      assert.strictEqual(metered.actualMicroUsd, 1_000n)
    }))

  it.effect("sends only the fields given, the subject on one line, and keeps a base path", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(() => json({ id: "e-1" }))
      const provider = yield* Resend.make({
        name: "resend-eu",
        apiKey: Redacted.make(RESEND_KEY),
        from: SENDER_ADDRESS,
        baseUrl: `${fake.url}/proxy/`,
        unitPrice: PRICE
      })
      assert.strictEqual(provider.name, "resend-eu")
      yield* runCall(provider, { to: ["alice@example.com"], subject: "Hi\r\nBcc: x@y.example", html: "<p>x</p>" })
      const request = only(fake)
      assert.strictEqual(request.path, "/proxy/emails")
      assert.deepStrictEqual(JSON.parse(request.body), {
        from: SENDER_ADDRESS,
        to: ["alice@example.com"],
        subject: "Hi Bcc: x@y.example",
        html: "<p>x</p>"
      })
    }))

  it.effect("401, 403, 400 and 422 are rejected with Resend's message; the key is never shown", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(() => resendError(401, "missing_api_key", "Missing API key in the authorization header."))
      const provider = yield* resendProvider(fake)
      const cases = [
        [401, "missing_api_key", "Missing API key in the authorization header."],
        [403, "invalid_api_key", `API key is invalid: ${RESEND_KEY}`],
        [400, "validation_error", "The `to` field must be a `string`."],
        [422, "invalid_from_address", "Invalid `from` field. The email address needs to follow the `email@example.com` format."]
      ] as const
      for (const [status, name, text] of cases) {
        fake.answer = () => resendError(status, name, text)
        const failure = yield* failureOf(provider, message())
        assert.strictEqual(failure.reason, "rejected", `HTTP ${status}`)
        assert.include(failure.message, `HTTP ${status}`)
        assert.include(failure.message, name)
        assert.notInclude(failure.message, RESEND_KEY)
        if (status === 403) assert.include(failure.message, "API key is invalid: [redacted]")
      }
    }))

  it.effect("429 is rate_limited, 5xx unavailable", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(() =>
        resendError(429, "rate_limit_exceeded", "Too many requests. You can only make 2 requests per second.")
      )
      const provider = yield* resendProvider(fake)
      const limited = yield* failureOf(provider, message())
      assert.strictEqual(limited.reason, "rate_limited")
      assert.include(limited.message, "2 requests per second")

      fake.answer = () => resendError(500, "application_error", "An unexpected error occurred.")
      assert.strictEqual((yield* failureOf(provider, message())).reason, "unavailable")
      fake.answer = () => text(502, "<html><body>Bad Gateway</body></html>", "text/html")
      const gateway = yield* failureOf(provider, message())
      assert.strictEqual(gateway.reason, "unavailable")
      assert.include(gateway.message, "Bad Gateway")
      assert.notInclude(gateway.message, "<html>")
    }))

  it.effect("an answer that is not JSON, or has no id, is malformed", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(() => text(200, "OK"))
      const provider = yield* resendProvider(fake)
      assert.strictEqual((yield* failureOf(provider, message())).reason, "malformed")
      for (const body of [{}, { id: "" }, { id: 42 }, [], { data: { id: "x" } }, { id: "has space" }]) {
        fake.answer = () => json(body)
        assert.strictEqual((yield* failureOf(provider, message())).reason, "malformed", JSON.stringify(body))
      }
    }))

  it.effect("a server that does not answer is a timeout within the bound", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(() => ({ _tag: "hang" }))
      const provider = yield* resendProvider(fake, { timeoutMs: 300 })
      const started = Date.now()
      const failure = yield* failureOf(provider, message())
      assert.strictEqual(failure.reason, "timeout")
      assert.isBelow(Date.now() - started, 3_000)
    }))

  it.effect("an endless or oversized answer is too_large; a cut one is a network failure", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(() => ({ _tag: "endless" }))
      const provider = yield* resendProvider(fake, { maxResponseBytes: 32 * 1024 })
      const started = Date.now()
      assert.strictEqual((yield* failureOf(provider, message())).reason, "too_large")
      assert.isBelow(Date.now() - started, 5_000)
      fake.answer = () => ({ _tag: "declared", length: 10 * 1024 * 1024 })
      assert.strictEqual((yield* failureOf(provider, message())).reason, "too_large")
      // A body cut short of what it declared (within the limit) is a broken connection.
      const roomy = yield* resendProvider(fake, { maxResponseBytes: 1024 * 1024 })
      fake.answer = () => ({ _tag: "cut" })
      assert.oneOf((yield* failureOf(roomy, message())).reason, ["network", "unavailable"])
    }))

  it.effect("a refused connection is unavailable", () =>
    Effect.gen(function*() {
      const url = yield* refusedUrl
      const provider = yield* Resend.make({ apiKey: Redacted.make(RESEND_KEY), from: SENDER, baseUrl: url, unitPrice: PRICE })
      assert.strictEqual((yield* failureOf(provider, message())).reason, "unavailable")
    }))

  it.effect("a bad configuration is a defect", () =>
    Effect.gen(function*() {
      for (const overrides of [
        { from: "nobody" },
        { apiKey: Redacted.make("  ") },
        { baseUrl: "ftp://api.resend.com" },
        { unitPrice: { per: "query", priceMicroUsd: 1n } }
      ]) {
        const exit = yield* Effect.exit(
          Resend.make({ apiKey: Redacted.make(RESEND_KEY), from: SENDER, unitPrice: PRICE, ...overrides })
        )
        assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause), Object.keys(overrides).join())
      }
    }))
})
