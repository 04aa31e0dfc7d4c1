import { Duration, Effect } from "effect"
import { Command, Flag } from "effect/cli"
import { CliFailure, EXIT_REFUSED, emit, err, field, out, request, withKey } from "../client.ts"
import { findInvoice } from "./dev.ts"

const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]

const lightning = Command.make("lightning", {
  ...withKey,
  sats: Flag.Int("sats").pipe(Flag.withDescription("Whole sats to add to the sats pocket")),
  wait: Flag.Boolean("wait").pipe(
    Flag.withDescription("Wait until the invoice is paid or expires (--no-wait: print it and exit)"),
    Flag.withDefault(true)
  ),
  interval: Flag.Int("interval-ms").pipe(
    Flag.withDescription("How often to ask the server whether it is paid"),
    Flag.withDefault(1000)
  )
}, ({ interval, json, key, sats, url, wait }) =>
  Effect.gen(function*() {
    const connection = { url, key }
    const invoice = yield* request(connection, "/v1/wallet/fund", { auth: "key", body: { amountSats: sats } })
    const invoiceId = field(invoice, "invoiceId")
    const paymentRequest = field(invoice, "paymentRequest")
    if (json) {
      yield* out(JSON.stringify(invoice))
    } else {
      const { default: QRCode } = yield* Effect.promise(() => import("qrcode"))
      const qr = yield* Effect.promise(() => QRCode.toString(paymentRequest.toUpperCase(), { type: "terminal", small: true }))
      yield* out(
        [
          qr.trimEnd(),
          `invoice   ${invoiceId}`,
          `amount    ${field(invoice, "amountSats")} sats`,
          `expires   ${field(invoice, "expiresAt")}`,
          `pay       ${paymentRequest}`
        ].join("\n")
      )
    }
    if (!wait) return

    // Polls the invoice; a spinner on stderr while a person watches, one line otherwise.
    const tty = process.stderr.isTTY === true
    if (!tty) yield* err(`waiting for ${invoiceId} to be paid…`)
    let frame = 0
    const pollEvery = Duration.millis(Math.max(100, interval))
    for (;;) {
      const found = yield* findInvoice(connection, invoiceId)
      if (found.status !== "pending") {
        if (tty) yield* Effect.sync(() => void process.stderr.write("\r\x1b[K"))
        yield* emit(json, found, () => `${invoiceId}: ${found.status}`)
        if (found.status === "paid") return
        return yield* new CliFailure({
          message: found.status === "expired"
            ? `${invoiceId} expired before it was paid`
            : `${invoiceId} is ${found.status}: paid, but not credited (see the README, Funding)`,
          exitCode: EXIT_REFUSED
        })
      }
      if (tty) {
        yield* Effect.sync(() =>
          void process.stderr.write(`\r${SPINNER[frame++ % SPINNER.length]} waiting for payment of ${invoiceId}…`)
        )
      }
      yield* Effect.sleep(pollEvery)
    }
  })).pipe(
    Command.withDescription(
      "Create a Lightning invoice, print it with a QR code, and wait until it is paid (exit 0) or expires (exit 1)"
    )
  )

const card = Command.make("card", {
  ...withKey,
  usdCents: Flag.Int("usd-cents").pipe(Flag.withDescription("Whole cents to add to the USD pocket (at least 1000)"))
}, ({ json, key, url, usdCents }) =>
  Effect.gen(function*() {
    const body = yield* request({ url, key }, "/v1/wallet/fund-card", { auth: "key", body: { amountUsdCents: usdCents } })
    yield* emit(json, body, () =>
      [
        `invoice   ${field(body, "invoiceId")}`,
        `amount    ${field(body, "amountUsdCents")} cents`,
        `expires   ${field(body, "expiresAt")}`,
        `checkout  ${field(body, "checkoutUrl")}`,
        "Open the checkout URL in a browser to pay."
      ].join("\n"))
  })).pipe(Command.withDescription("Create a card checkout and print its URL"))

/** `spendgate fund …`: add money to the wallet. */
export const fund = Command.make("fund").pipe(
  Command.withDescription("Fund the wallet: lightning, card"),
  Command.withSubcommands([lightning, card])
)
