import { Effect, Layer, Option, Redacted } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { timingSafeEqual, createHash } from "node:crypto"
import { isApiKeyFormat } from "../../src/domain/ids.ts"
import { microUsdToCents, msatToSats } from "../../src/domain/Money.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import { ProviderHealth, probesOf, ProviderStatuses } from "../../src/capabilities/ProviderHealth.ts"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import * as Admin from "../../src/admin/Admin.ts"
import { Services } from "../../src/services/Services.ts"
import { agentJson } from "./handlers.ts"
import { submissionJson } from "./servicesHandlers.ts"
import { auditJson, transactionJson } from "./walletHandlers.ts"
import { RateStatus } from "../../src/ports/RateSource.ts"
import { Api } from "./Api.ts"
import { toHttpError } from "./errors.ts"
import { invoiceJson } from "./fundingHandlers.ts"
import { AdminAuthentication } from "./middleware.ts"
import { cookieSession, operatorSessionValid, Sessions } from "./sessions.ts"
import { HttpServerRequest } from "effect/http"

const digest = (text: string) => createHash("sha256").update(text).digest()

/**
 * ADMIN_TOKEN checks: unset → the admin API does not exist (404); an agent
 * key → 403 FORBIDDEN; anything else that is not the token → 401.
 * Compared in constant time over SHA-256 digests.
 *
 * Without an Authorization header, an operator's dashboard session
 * (sessions.ts) stands for the token while the token it was opened with is
 * still the configured one; an owner's or agent's session is 403 FORBIDDEN,
 * as its key would be. Changes need the session's CSRF token.
 */
export const AdminAuthenticationLive = (adminToken: Option.Option<Redacted.Redacted<string>>) =>
  Layer.effect(
    AdminAuthentication,
    Effect.gen(function*() {
      const sessions = yield* Effect.serviceOption(Sessions)
      return AdminAuthentication.of({
        bearer: (httpEffect, { credential }) =>
          Effect.gen(function*() {
            if (Option.isNone(adminToken)) {
              return yield* Effect.fail(toHttpError({ code: "NOT_FOUND", message: "Not found" }))
            }
            if (Option.isSome(sessions)) {
              const request = yield* HttpServerRequest.HttpServerRequest
              const session = yield* cookieSession(sessions.value, request)
              if (Option.isSome(session)) {
                if (session.value.role !== "operator") {
                  return yield* Effect.fail(toHttpError({ code: "FORBIDDEN", message: "Agent keys cannot use the admin API" }))
                }
                if (!operatorSessionValid(session.value, adminToken)) {
                  return yield* Effect.fail(toHttpError({ code: "UNAUTHORIZED", message: "The session has ended; sign in again" }))
                }
                return yield* httpEffect
              }
            }
            const presented = Redacted.value(credential)
            if (timingSafeEqual(digest(presented), digest(Redacted.value(adminToken.value)))) return yield* httpEffect
            return yield* Effect.fail(
              isApiKeyFormat(presented)
                ? toHttpError({ code: "FORBIDDEN", message: "Agent keys cannot use the admin API" })
                : toHttpError({ code: "UNAUTHORIZED", message: "Missing or invalid admin token" })
            )
          })
      })
    })
  )

export const AdminHandlers = HttpApiBuilder.group(
  Api,
  "admin",
  Effect.fn(function*(handlers) {
    const rates = yield* RateStatus
    const admin = yield* Admin.make
    const health = yield* ProviderHealth
    const { all: providers } = yield* Providers
    const statuses = yield* Effect.serviceOption(ProviderStatuses)
    const services = yield* Services
    return handlers
      .handle("submissions", ({ query }) =>
        Effect.gen(function*() {
          const page = Admin.pageOf(query)
          const result = yield* services.allSubmissions(query.status, page)
          return {
            submissions: result.items.map((s) => ({ ...submissionJson(s), accountId: s.accountId })),
            total: result.total,
            ...page
          }
        }))
      .handle("approve", ({ params, payload }) =>
        services.review(params.id, "approved", payload.note ?? null).pipe(Effect.map(submissionJson), Effect.mapError(toHttpError)))
      .handle("reject", ({ params, payload }) =>
        services.review(params.id, "rejected", payload.note ?? null).pipe(Effect.map(submissionJson), Effect.mapError(toHttpError)))
      .handle("stats", ({ query }) =>
        Effect.gen(function*() {
          const { window, stats } = yield* admin.stats(query.days)
          return {
            from: window.from.toISOString(),
            until: window.until.toISOString(),
            accounts: stats.accounts,
            agents: stats.agents,
            balances: { usdCents: microUsdToCents(stats.balances.usdMicroUsd), sats: msatToSats(stats.balances.satsMsat) },
            spend: stats.spend.map((row) => ({
              day: row.day,
              capability: row.capability,
              provider: row.provider,
              calls: row.calls,
              amountUsdCents: microUsdToCents(row.amountMicroUsd)
            })),
            funding: stats.funding.map((row) => ({
              day: row.day,
              pocket: row.pocket,
              credits: row.credits,
              usdCents: microUsdToCents(row.usdMicroUsd),
              sats: msatToSats(row.satsMsat)
            }))
          }
        }))
      .handle("agents", ({ query }) =>
        Effect.gen(function*() {
          const result = yield* admin.agents({
            accountId: query.accountId as AccountId | undefined,
            role: query.role,
            killed: query.killed === undefined ? undefined : query.killed === "true"
          }, query)
          return {
            agents: result.items.map((a) => ({ ...agentJson(a), accountId: a.accountId })),
            total: result.total,
            limit: result.limit,
            offset: result.offset
          }
        }))
      .handle("transactions", ({ query }) =>
        Effect.gen(function*() {
          const result = yield* admin.transactions({
            accountId: query.accountId as AccountId | undefined,
            agentId: query.agentId as AgentId | undefined,
            type: query.type,
            startDate: query.startDate,
            endDate: query.endDate
          }, query)
          return {
            transactions: result.items.map((t) => ({ ...transactionJson(t), accountId: t.accountId })),
            total: result.total,
            limit: result.limit,
            offset: result.offset
          }
        }))
      .handle("refund", ({ params, payload }) =>
        admin.refund(params.id, { amountMicroUsd: payload.amountUsdCents, reason: payload.reason }).pipe(
          Effect.mapError(toHttpError),
          Effect.map((result) => ({
            refund: { ...transactionJson(result.refund), accountId: result.refund.accountId, reason: payload.reason },
            charge: {
              id: result.charge.id,
              amountUsdCents: microUsdToCents(result.charge.amountMicroUsd),
              refundedUsdCents: microUsdToCents(result.refunded.microUsd),
              remainingUsdCents: microUsdToCents(result.remainingMicroUsd),
              refundedPockets: {
                usdCents: microUsdToCents(result.refunded.usdMicroUsd),
                sats: msatToSats(result.refunded.satsMsat)
              }
            },
            wallet: {
              balanceUsdCents: microUsdToCents(result.wallet.usdMicroUsd),
              balanceSats: msatToSats(result.wallet.satsMsat)
            }
          }))
        ))
      .handle("auditLogs", ({ query }) =>
        Effect.gen(function*() {
          const result = yield* admin.auditLogs({
            accountId: query.accountId as AccountId | undefined,
            kind: query.kind,
            startDate: query.startDate,
            endDate: query.endDate
          }, query)
          return {
            auditLogs: result.items.map((r) => {
              const { verified: _, ...json } = auditJson(r, true)
              return { ...json, accountId: r.accountId }
            }),
            total: result.total,
            limit: result.limit,
            offset: result.offset
          }
        }))
      .handle("serviceHealth", () =>
        Effect.gen(function*() {
          const reports = []
          // A start-up probe still running is waited for: the report states only verdicts known.
          const probes = probesOf(Option.getOrUndefined(statuses), providers)
          if (probes !== undefined) yield* probes
          for (const provider of providers) {
            const report = yield* health.report(provider.name)
            const status = (Option.isSome(statuses) ? statuses.value.of(provider.name) : undefined) ?? provider.status
            const reason = status === undefined ? undefined : !status.ok ? status.reason : status.degraded
            reports.push({
              name: provider.name,
              capability: provider.capability,
              configured: true,
              status: status !== undefined && !status.ok
                ? "unavailable" as const
                : report.circuit === "closed" && reason === undefined ? "ok" as const : "degraded" as const,
              ...(reason !== undefined ? { reason } : {}),
              circuit: report.circuit,
              calls: report.calls,
              successRate: report.successRate,
              p50LatencyMs: report.p50LatencyMs,
              p95LatencyMs: report.p95LatencyMs,
              lastError: report.lastError,
              lastErrorAt: report.lastErrorAt === null ? null : report.lastErrorAt.toISOString()
            })
          }
          return { providers: reports }
        }))
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
          const result = yield* admin.latePayments(query)
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
            limit: result.limit,
            offset: result.offset
          }
        }))
  })
)
