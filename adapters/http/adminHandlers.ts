import { Effect, Layer, Option, Redacted } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { timingSafeEqual, createHash } from "node:crypto"
import { isApiKeyFormat } from "../../src/domain/ids.ts"
import { microUsdToCents, msatToSats } from "../../src/domain/Money.ts"
import { Store } from "../../src/ports/Store.ts"
import { RateStatus } from "../rates/Exchanges.ts"
import { Api } from "./Api.ts"
import { toHttpError } from "./errors.ts"
import { invoiceJson } from "./fundingHandlers.ts"
import { AdminAuthentication } from "./middleware.ts"

const digest = (text: string) => createHash("sha256").update(text).digest()

/**
 * ADMIN_TOKEN checks: unset → the admin API does not exist (404); an agent
 * key → 403 FORBIDDEN; anything else that is not the token → 401.
 * Compared in constant time over SHA-256 digests.
 */
export const AdminAuthenticationLive = (adminToken: Option.Option<Redacted.Redacted<string>>) =>
  Layer.succeed(
    AdminAuthentication,
    AdminAuthentication.of({
      bearer: (httpEffect, { credential }) => {
        if (Option.isNone(adminToken)) {
          return Effect.fail(toHttpError({ code: "NOT_FOUND", message: "Not found" }))
        }
        const presented = Redacted.value(credential)
        if (timingSafeEqual(digest(presented), digest(Redacted.value(adminToken.value)))) return httpEffect
        return Effect.fail(
          isApiKeyFormat(presented)
            ? toHttpError({ code: "FORBIDDEN", message: "Agent keys cannot use the admin API" })
            : toHttpError({ code: "UNAUTHORIZED", message: "Missing or invalid admin token" })
        )
      }
    })
  )

export const AdminHandlers = HttpApiBuilder.group(
  Api,
  "admin",
  Effect.fn(function*(handlers) {
    const rates = yield* RateStatus
    const store = yield* Store
    return handlers
      .handle("rate", () =>
        Effect.map(rates.status, (report) => ({
          rate: report.rate === null ? null : Number(report.rate),
          asOf: report.asOf === null ? null : report.asOf.toISOString(),
          stale: report.stale,
          sources: report.sources.map((source) => ({
            name: source.name,
            ok: source.ok,
            ...(source.rate !== undefined ? { rate: Number(source.rate) } : {}),
            ...(source.error !== undefined ? { error: source.error } : {}),
            at: source.at.toISOString()
          }))
        })))
      .handle("latePayments", ({ query }) =>
        Effect.gen(function*() {
          const page = { limit: query.limit ?? 50, offset: query.offset ?? 0 }
          const result = yield* store.listLatePayments(page)
          return {
            invoices: result.items.map((invoice) => ({
              ...invoiceJson(invoice),
              accountId: invoice.accountId,
              ...(invoice.latePaymentAmount !== null
                ? invoice.type === "lightning"
                  ? { latePaymentAmountSats: msatToSats(invoice.latePaymentAmount) }
                  : { latePaymentAmountUsdCents: microUsdToCents(invoice.latePaymentAmount) }
                : {})
            })),
            total: result.total,
            ...page
          }
        }))
  })
)
