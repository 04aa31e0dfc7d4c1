import { Duration, Effect, Option, Redacted, Result } from "effect"
import type { NodemailerError, SMTPTransportOptions } from "nodemailer"
import type { MailComposerOptions } from "nodemailer/lib/mail-composer"
import { type Provider, ProviderFailure, type UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { EmailInput, EmailOutput } from "../../../src/capabilities/schemas.ts"
import { oneLineSubject, parseSender, type Sender } from "../kit/email.ts"
import { clip as clipText, failure, redact } from "../kit/index.ts"
import { env, envOr, invalid, nothing, one, type ProviderConfig, unitPriceOf } from "../kit/config.ts"

/**
 * `email` through any SMTP server (the operator's relay, a provider's SMTP
 * endpoint), sent with nodemailer.
 *
 * Message: `From` is the operator's configured sender (callers cannot choose
 * it), `To` the input's recipients (at most 10), `Subject`, `Reply-To` when
 * given, and a text part, an html part or both (multipart/alternative).
 * Nothing else can be put in: no attachments, no custom headers, no file or
 * URL content (nodemailer's file and URL access are turned off, so a body is
 * always literal text), and data: images in the html stay where they are. The
 * subject is one line: line breaks and other control characters become
 * spaces before nodemailer encodes it, so no header can be smuggled in.
 *
 * Connection: one connection per message (no pool), implicit TLS with
 * `secure`, STARTTLS required with `requireTls` (otherwise used when offered),
 * the server's certificate checked unless `tls.rejectUnauthorized` is false;
 * `tls.ca` adds a trusted CA for this server only. Every wait (connecting, the
 * greeting, each reply) and the whole call are bounded by `timeoutMs`; at the
 * bound the connection is closed. A server reply is read up to 64 KiB.
 *
 * Size: the message is composed here first (CRLF line ends, as sent), so its
 * exact size is known: above MAX_MESSAGE_BYTES it is not sent (`too_large`;
 * the input schema's caps keep a valid input well below), and a server that
 * advertises SIZE is told the size with MAIL FROM; a message above the
 * server's limit is not sent (`rejected`). The SMTP envelope is given
 * explicitly (the sender's address, the input's recipients), never derived
 * from the headers.
 *
 * Outcome:
 * - some recipients refused at RCPT TO, others accepted: success, the refused
 *   ones listed in `rejected`; the message went out, so it is charged;
 * - every recipient refused: `ProviderFailure("rejected")`, nothing charged;
 * - connection refused, DNS failure, a TLS failure (or no STARTTLS when it is
 *   required), the server closing on us, a 4xx reply: `unavailable`;
 * - authentication refused, or a 5xx reply to the sender or the message:
 *   `rejected` (with the server's reply);
 * - no answer in time: `timeout`. As with any network send, a timeout after
 *   the message data went out cannot prove the server did not take it.
 *
 * Price: one unit per message (the price card's `message`), whatever the
 * number of recipients; a message with a recipient refused is still one
 * message.
 */

export const PROVIDER_NAME = "smtp"
export const DEFAULT_TIMEOUT_MS = 30_000
/** Longest server reply read (nodemailer's own default is 1 MB). */
export const MAX_SERVER_REPLY_BYTES = 64 * 1024
/** The input schema allows at most this many recipients; nodemailer is told the same. */
export const MAX_RECIPIENTS = 10
/** Largest composed message sent; the schema's caps (998 + 2 × 200,000 characters) stay well below. */
export const MAX_MESSAGE_BYTES = 4 * 1024 * 1024
/** Longest server text kept in a failure message. */
export const MAX_UPSTREAM_MESSAGE_CHARS = 300

export interface SmtpOptions {
  /** Provider name in the catalogue and in failures; default "smtp". */
  readonly name?: string | undefined
  readonly host: string
  readonly port: number
  /** Implicit TLS from the first byte (usually port 465). */
  readonly secure: boolean
  /** Refuse to send unless the connection is upgraded with STARTTLS (ports 587/25). */
  readonly requireTls?: boolean | undefined
  readonly auth?: { readonly user: string; readonly pass: Redacted.Redacted<string> } | undefined
  /** The operator's sender: `noreply@example.com` or `Example <noreply@example.com>`. */
  readonly from: string
  /** Flat price per message, from the operator's price card. */
  readonly unitPrice: UnitPrice
  /** Bound on every wait and on the whole call; default 30 s. */
  readonly timeoutMs?: number | undefined
  readonly tls?: {
    /** Default true; false accepts any certificate (a test relay only). */
    readonly rejectUnauthorized?: boolean | undefined
    /** PEM of an extra CA trusted for this server. */
    readonly ca?: string | undefined
  } | undefined
}

// ---------------------------------------------------------------------------
// Settings

interface Settings {
  readonly name: string
  readonly transport: SMTPTransportOptions
  readonly sender: Sender
  readonly password: string
  readonly unitPrice: UnitPrice
  readonly timeoutMs: number
}

/** Checks the options once; a bad value is a deployment error (a defect naming it). */
const settingsOf = (options: SmtpOptions): Settings => {
  const name = options.name ?? PROVIDER_NAME
  if (name.trim() === "" || name.length > 64) throw new Error(`SMTP: provider name must be 1 to 64 characters`)
  const host = options.host.trim()
  if (host === "" || host.length > 253 || /[\s/\u0000-\u001f\u007f]/.test(host)) {
    throw new Error(`${name}: host must be a host name or an IP address, got ${JSON.stringify(options.host)}`)
  }
  if (!Number.isInteger(options.port) || options.port < 1 || options.port > 65_535) {
    throw new Error(`${name}: port must be an integer from 1 to 65535`)
  }
  const sender = parseSender(options.from)
  if (sender === undefined) throw new Error(`${name}: from must be an address or "Name <address>", got ${JSON.stringify(options.from)}`)
  if (options.unitPrice.per !== "message" || options.unitPrice.priceMicroUsd < 0n) {
    throw new Error(`${name}: the price must be a non-negative amount per message`)
  }
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new Error(`${name}: timeoutMs must be a positive number`)
  const password = options.auth === undefined ? "" : Redacted.value(options.auth.pass)
  if (options.auth !== undefined && (options.auth.user === "" || password === "")) {
    throw new Error(`${name}: auth needs a user and a password`)
  }
  const transport: SMTPTransportOptions = {
    host,
    port: options.port,
    secure: options.secure,
    // With implicit TLS the connection is encrypted from the start; STARTTLS only applies without it.
    requireTLS: !options.secure && options.requireTls === true,
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    socketTimeout: timeoutMs,
    dnsTimeout: timeoutMs,
    socketCloseTimeout: Math.min(timeoutMs, 5_000),
    maxResponseSize: MAX_SERVER_REPLY_BYTES,
    maxRecipients: MAX_RECIPIENTS,
    disableFileAccess: true,
    disableUrlAccess: true,
    attachDataUrls: false,
    logger: false,
    debug: false,
    tls: {
      rejectUnauthorized: options.tls?.rejectUnauthorized ?? true,
      ...(options.tls?.ca === undefined ? {} : { ca: options.tls.ca })
    }
  }
  return { name, transport, sender, password, unitPrice: options.unitPrice, timeoutMs }
}

// ---------------------------------------------------------------------------
// Failures

/** One line, without the password, at most `max` characters. */
const clip = (text: string, secret: string, max = MAX_UPSTREAM_MESSAGE_CHARS): string => clipText(redact(text, [secret]), max)

const asNodemailerError = (error: unknown): NodemailerError =>
  (error instanceof Error ? error : new Error(String(error))) as NodemailerError

/** What a failed send stands for. */
const sendFailure = (settings: Settings, cause: unknown): ProviderFailure => {
  const error = asNodemailerError(cause)
  const name = settings.name
  const code = typeof error.code === "string" ? error.code : undefined
  const reply = error.response === undefined ? "" : `: ${clip(error.response, settings.password)}`
  const text = clip(error.message, settings.password, 200)
  const responseCode = typeof error.responseCode === "number" ? error.responseCode : undefined
  switch (code) {
    case "ETIMEDOUT":
      return failure(name, "timeout", `${name} did not answer in time (${error.timeoutType ?? "timeout"})`)
    case "EAUTH":
    case "ENOAUTH":
      return failure(name, "rejected", `${name} refused the login${reply}`)
    case "EENVELOPE": {
      const refused = error.rejected ?? []
      if (refused.length > 0) {
        return failure(name, "rejected", `${name} refused every recipient (${refused.length})${reply}`)
      }
      break
    }
    case "ETLS":
    case "EREQUIRETLS":
      return failure(name, "unavailable", `no TLS connection with ${name}: ${text}`)
    case "EDNS":
      return failure(name, "unavailable", `${name}'s host name does not resolve: ${text}`)
    case "ECONNECTION":
    case "ESOCKET": {
      const original = error.originalCode ?? (error as { errno?: unknown }).errno
      const detail = typeof original === "string" ? original : text
      return failure(name, "unavailable", `${name} is unreachable: ${detail}`)
    }
    case "EMESSAGE":
      // Refused before sending: the message is larger than the SIZE the server advertised.
      if (responseCode === undefined) return failure(name, "rejected", `${name} does not take the message: ${text}`)
      break
    case "EPROTOCOL":
      return failure(name, "malformed", `${name} does not speak SMTP as expected: ${text}`)
    default:
      break
  }
  if (responseCode !== undefined && responseCode >= 500 && responseCode !== 503) {
    return failure(name, "rejected", `${name} refused the message (${responseCode})${reply}`)
  }
  if (responseCode !== undefined) {
    return failure(name, "unavailable", `${name} deferred the message (${responseCode})${reply}`)
  }
  return failure(name, "unavailable", `sending through ${name} failed${code === undefined ? "" : ` (${code})`}: ${text}`)
}

// ---------------------------------------------------------------------------
// The provider

/** The message: only these fields, so nothing else can reach it. */
export const mailOf = (sender: Sender, input: EmailInput): MailComposerOptions => ({
  from: { name: sender.name, address: sender.address },
  to: input.to.map((address) => ({ name: "", address })),
  subject: oneLineSubject(input.subject),
  ...(input.text === undefined ? {} : { text: input.text }),
  ...(input.html === undefined ? {} : { html: input.html }),
  ...(input.replyTo === undefined ? {} : { replyTo: { name: "", address: input.replyTo } }),
  attachments: [],
  disableFileAccess: true,
  disableUrlAccess: true,
  newline: "win"
})

interface Composed {
  readonly messageId: string
  readonly raw: Buffer
}

/** nodemailer, loaded when an SMTP provider is built (SMTP_HOST set), never otherwise. */
const loadNodemailer = () => import("nodemailer")
const loadMailComposer = () => import("nodemailer/lib/mail-composer").then((module) => module.default)

const compose = (settings: Settings, input: EmailInput): Effect.Effect<Composed, ProviderFailure> =>
  Effect.tryPromise({
    try: async () => {
      const MailComposer = await loadMailComposer()
      const node = new MailComposer(mailOf(settings.sender, input)).compile()
      const messageId = node.messageId()
      return { messageId, raw: await node.build() }
    },
    catch: (error) =>
      failure(settings.name, "rejected", `the message cannot be composed: ${clip(String(error), settings.password, 200)}`)
  })

const stringsOf = (value: unknown): Array<string> =>
  Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : []

export const make = (options: SmtpOptions): Effect.Effect<Provider<"email">> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() => settingsOf(options))
    const auth = options.auth === undefined ? {} : { auth: { user: options.auth.user, pass: settings.password } }
    // Without `pool`, every sendMail opens its own connection and closes it: nothing to release later.
    const { createTransport } = yield* Effect.promise(loadNodemailer)
    yield* Effect.promise(loadMailComposer)
    const transporter = createTransport({ ...settings.transport, ...auth })
    const price = settings.unitPrice.priceMicroUsd

    const run = Effect.fn("Smtp.run")(
      function*(input: EmailInput) {
        const { messageId, raw } = yield* compose(settings, input)
        if (raw.length > MAX_MESSAGE_BYTES) {
          return yield* failure(settings.name, "too_large", `the message is ${raw.length} bytes, above ${MAX_MESSAGE_BYTES}`)
        }
        const info = yield* Effect.tryPromise({
          // Interruption (the timeout below, or the caller) aborts the send and closes the connection.
          try: (signal) =>
            transporter.sendMail({
              raw,
              envelope: { from: settings.sender.address, to: [...input.to], size: raw.length },
              disableFileAccess: true,
              disableUrlAccess: true,
              maxRecipients: MAX_RECIPIENTS,
              signal
            }),
          catch: (error) => sendFailure(settings, error)
        }).pipe(
          Effect.timeoutOrElse({
            duration: Duration.millis(settings.timeoutMs),
            orElse: () =>
              Effect.fail(failure(settings.name, "timeout", `${settings.name} did not finish within ${settings.timeoutMs} ms`))
          })
        )
        const accepted = stringsOf(info.accepted)
        const rejected = stringsOf(info.rejected)
        if (accepted.length === 0) {
          return yield* failure(settings.name, "rejected", `${settings.name} accepted none of the recipients`)
        }
        const output: EmailOutput = { messageId, accepted, rejected }
        return { output, actualMicroUsd: price }
      },
      (effect) =>
        effect.pipe(
          Effect.catchDefect((defect) =>
            Effect.fail(failure(settings.name, "unavailable", `unexpected failure: ${clip(String(defect), settings.password, 200)}`))
          )
        )
    )

    return {
      name: settings.name,
      capability: "email",
      unitPrice: settings.unitPrice,
      quote: () => Result.succeed({ microUsd: price }),
      run: (input) => run(input)
    } satisfies Provider<"email">
  })

// ---------------------------------------------------------------------------
// Configuration

/**
 * SMTP_HOST with SMTP_FROM (SMTP_PORT, default 587; SMTP_USER and
 * SMTP_PASSWORD; SMTP_SECURE, default false; SMTP_REQUIRE_TLS, default true):
 * the `smtp` price card (per message).
 */
export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    const host = yield* env("SMTP_HOST")
    if (Option.isNone(host)) return nothing
    const from = yield* env("SMTP_FROM")
    if (Option.isNone(from)) return yield* invalid("SMTP_FROM is required when SMTP_HOST is set")
    const port = Number(yield* envOr("SMTP_PORT", "587"))
    if (!Number.isInteger(port) || port < 1 || port > 65535) return yield* invalid("SMTP_PORT must be a port number")
    const user = yield* env("SMTP_USER")
    const pass = yield* env("SMTP_PASSWORD")
    const unitPrice = yield* unitPriceOf(cards, PROVIDER_NAME, "email", "message")
    const build = make({
      host: host.value,
      port,
      secure: (yield* envOr("SMTP_SECURE", "false")) === "true",
      requireTls: (yield* envOr("SMTP_REQUIRE_TLS", "true")) === "true",
      ...(Option.isSome(user) ? { auth: { user: user.value, pass: Redacted.make(Option.getOrElse(pass, () => "")) } } : {}),
      from: from.value,
      unitPrice
    })
    return one(PROVIDER_NAME, "email", build)
  })
