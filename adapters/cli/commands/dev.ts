import { Effect } from "effect"
import { Argument, Command } from "effect/cli"
import { CliFailure, EXIT_REFUSED, emit, type Connection, request, usage, withKey } from "../client.ts"

interface Invoice {
  readonly id: string
  readonly type: string
  readonly status: string
  readonly paymentRequest?: string
}

/** Finds one of the account's invoices by id, newest first, a page of 100 at a time. */
export const findInvoice = (connection: Connection, invoiceId: string): Effect.Effect<Invoice, CliFailure> =>
  Effect.gen(function*() {
    for (let offset = 0;; offset += 100) {
      const page = (yield* request(connection, "/v1/wallet/invoices", {
        auth: "key",
        query: { limit: 100, offset }
      })) as { invoices: ReadonlyArray<Invoice>; total: number }
      const found = page.invoices.find((invoice) => invoice.id === invoiceId)
      if (found !== undefined) return found
      if (page.invoices.length === 0 || offset + page.invoices.length >= page.total) {
        return yield* new CliFailure({ message: `NOT_FOUND: no invoice ${invoiceId} in this account`, exitCode: EXIT_REFUSED })
      }
    }
  })

const pay = Command.make("pay", {
  ...withKey,
  invoice: Argument.String("invoice").pipe(
    Argument.withDescription("A payment request (lnbcrt…), or an invoice id (inv_…, which needs --key to look it up)")
  )
}, ({ invoice, json, key, url }) =>
  Effect.gen(function*() {
    const text = invoice.trim()
    if (text === "") return yield* usage("give a payment request (lnbcrt…) or an invoice id (inv_…)")
    const paymentRequest = text.startsWith("inv_")
      ? yield* Effect.flatMap(findInvoice({ url, key }, text), (found) =>
        found.type === "lightning" && found.paymentRequest !== undefined
          ? Effect.succeed(found.paymentRequest)
          : Effect.fail(new CliFailure({ message: `${text} is not a Lightning invoice`, exitCode: EXIT_REFUSED })))
      : text
    const body = (yield* request({ url }, "/v1/dev/lightning/pay", {
      auth: "none",
      body: { paymentRequest }
    })) as { invoiceId: string; outcome: string }
    yield* emit(json, body, () => `${body.invoiceId}: ${body.outcome}`)
    if (body.outcome !== "credited" && body.outcome !== "duplicate") {
      return yield* new CliFailure({ message: `not credited: ${body.outcome}`, exitCode: EXIT_REFUSED })
    }
  })).pipe(
    Command.withDescription("Pay a dev-rail Lightning invoice as a wallet app would (only while the server uses the dev rail)")
  )

/** `spendgate dev …`: helpers for the development rails. */
export const dev = Command.make("dev").pipe(
  Command.withDescription("Development helpers: pay"),
  Command.withSubcommands([pay])
)
