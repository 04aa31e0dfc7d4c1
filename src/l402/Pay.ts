import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex, hexToBytes } from "@noble/hashes/utils.js"
import { Cause, Clock, Context, Duration, Effect, Layer, Option, Schedule } from "effect"
import type { Principal } from "../domain/Agent.ts"
import { requireOwner } from "../agents/Access.ts"
import { type Forbidden, RateUnavailable, type ValidationError } from "../domain/errors.ts"
import type { AccountId } from "../domain/ids.ts"
import { L402PaymentStore } from "../ports/L402PaymentStore.ts"
import { FetchFailed, OutboundHttp, type OutboundResponse, type UnsafeUrl } from "../ports/Net.ts"
import { type DecodedLightningInvoice, LightningRail, type LightningPayer, type LightningPaymentStatus } from "../ports/Rails.ts"
import { RateSource } from "../ports/RateSource.ts"
import { Spend, type SpendReceipt } from "../wallet/Spend.ts"
import { microUsdToCents, msatToSats } from "../domain/Money.ts"
import { payFailed, paySucceeded } from "../webhooks/events.ts"
import { authorizationHeader, findL402Challenge, type L402Challenge } from "./challenge.ts"

/**
 * Outbound L402: an agent calls a URL through the gateway; when it answers
 * `402` with an L402 challenge, the invoice is decoded and checked (not
 * expired, not above the caller's `maxSats`, its host on the account's
 * allow-list of payee hosts), priced in USD at the rate snapshot (amount
 * plus the fee limit) and run through the one spend pipeline as capability
 * `pay` (allowed capabilities, caps, kill switch, hold). The payment is
 * recorded before it is sent; the rail pays; the hold is settled at the
 * amount paid plus the routing fee, or released when the payment failed.
 * The request is retried once with `Authorization: L402 <macaroon>:<preimage>`,
 * and the token is kept per (account, host, path prefix) for the next calls
 * until the server refuses it (a 402 again: paid again, once per call).
 *
 * A payment whose outcome is unknown (the node did not say by the deadline,
 * or the process died) keeps its hold; `resolvePending` asks the node by
 * hash (at start-up and periodically) and charges or releases then. A hash
 * with a pending or successful payment is never sent again.
 */

import { memoryFallback } from "./memoryStore.ts"
import {
  type CachedToken,
  challengeHeaders,
  feeLimitFor,
  FORBIDDEN_HEADERS,
  hostAllowed,
  invalid,
  L402Refused,
  MAX_BODY_BYTES,
  MAX_CACHED_TOKENS,
  MAX_HEADERS,
  MAX_PAYEE_HOSTS,
  MAX_RESPONSE_BYTES,
  MAX_SATS,
  METHODS,
  msatToMicroUsdCharge,
  normalizePayeeHost,
  PAY_PROVIDER,
  type PayError,
  type PayInput,
  type PaymentMade,
  type PayResult,
  PAYMENT_TIMEOUT_SECONDS,
  refused,
  REQUEST_TIMEOUT_MS,
  RESOLVE_AFTER_MS,
  returnedHeaders,
  tokenKey,
  TRACK_EVERY_MS,
  TRACK_TRIES,
  UpstreamFailed
} from "./rules.ts"

export * from "./rules.ts"

export class L402Payments extends Context.Service<L402Payments, {
  readonly pay: (principal: Principal, input: PayInput) => Effect.Effect<PayResult, PayError>
  /** The account's allow-list of payee hosts (owners only). */
  readonly payeeHosts: (principal: Principal) => Effect.Effect<ReadonlyArray<string>, Forbidden>
  /** Replaces the account's allow-list (owners only); answers it as stored (lower case, sorted, no duplicates). */
  readonly setPayeeHosts: (
    principal: Principal,
    hosts: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<string>, ValidationError | Forbidden>
  /** The `Authorization` value of the token cached for this URL (the proxy's L402 services), if any. */
  readonly tokenFor: (accountId: AccountId, url: URL) => string | undefined
  /** Drops the token cached for this URL (the server refused it). */
  readonly forgetToken: (accountId: AccountId, url: URL) => void
  /**
   * Pays the L402 challenge found in a `WWW-Authenticate` value for `url`,
   * with the same checks, pipeline and records as `pay` (the proxy's L402
   * services); caches the token and answers the `Authorization` value to
   * retry with. Undefined when the value holds no L402 challenge.
   */
  readonly payChallenge: (
    principal: Principal,
    url: URL,
    wwwAuthenticate: string | undefined,
    maxSats: number
  ) => Effect.Effect<{ readonly authorization: string; readonly payment: PaymentMade; readonly receipt: SpendReceipt } | undefined, PayError>
  /**
   * Asks the node about payments left pending (older than `olderThanMs`),
   * charging or releasing their holds; returns how many were resolved.
   */
  readonly resolvePending: (olderThanMs: number) => Effect.Effect<number>
}>()("spendgate/L402Payments") {
  static readonly layer = Layer.effect(
    L402Payments,
    Effect.gen(function*() {
      const spend = yield* Spend
      const rates = yield* RateSource
      const rail = yield* LightningRail
      const storeOption = yield* Effect.serviceOption(L402PaymentStore)
      const outbound = yield* Effect.serviceOption(OutboundHttp)
      const store = Option.isSome(storeOption) ? storeOption.value : yield* memoryFallback
      const tokens = new Map<string, CachedToken>()
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

      const remember = (key: string, token: CachedToken) => {
        tokens.delete(key)
        if (tokens.size >= MAX_CACHED_TOKENS) tokens.delete(tokens.keys().next().value!)
        tokens.set(key, token)
      }

      const checkInput = (input: PayInput) =>
        Effect.gen(function*() {
          let url: URL
          try {
            url = new URL(input.url)
          } catch {
            return yield* invalid("url", "url must be an absolute http(s) URL")
          }
          if (url.protocol !== "http:" && url.protocol !== "https:") return yield* invalid("url", "url must be http or https")
          const method = input.method.toUpperCase()
          if (!(METHODS as ReadonlyArray<string>).includes(method)) {
            return yield* invalid("method", `method must be one of ${METHODS.join(", ")}`)
          }
          if (!Number.isSafeInteger(input.maxSats) || input.maxSats < 1 || input.maxSats > MAX_SATS) {
            return yield* invalid("maxSats", `maxSats must be a whole number of sats from 1 to ${MAX_SATS}`)
          }
          const headers: Record<string, string> = {}
          const entries = Object.entries(input.headers ?? {})
          if (entries.length > MAX_HEADERS) return yield* invalid("headers", `at most ${MAX_HEADERS} headers`)
          for (const [name, value] of entries) {
            const lower = name.toLowerCase()
            if (!/^[!#$%&'*+.^_`|~0-9a-z-]{1,64}$/.test(lower) || FORBIDDEN_HEADERS.has(lower) || lower.startsWith("proxy-")) {
              return yield* invalid(`headers.${name.slice(0, 64)}`, `the header ${name.slice(0, 64)} may not be set`)
            }
            if (value.length > 8192 || /[^\t\x20-\x7e\x80-\xff]/.test(value)) {
              return yield* invalid(`headers.${lower}`, "header values are one line of at most 8192 Latin-1 characters")
            }
            headers[lower] = value
          }
          if (input.body !== undefined && Buffer.byteLength(input.body) > MAX_BODY_BYTES) {
            return yield* invalid("body", `body is at most ${MAX_BODY_BYTES} bytes`)
          }
          if (input.body !== undefined && (method === "GET" || method === "HEAD")) {
            return yield* invalid("body", `a ${method} request has no body`)
          }
          return { url, method, headers, body: input.body, maxMsat: BigInt(input.maxSats) * 1000n }
        })

      const payerOf = (): Effect.Effect<LightningPayer, L402Refused> =>
        rail.payer === undefined
          ? Effect.fail(refused("L402_UNAVAILABLE", `the ${rail.name} Lightning rail cannot make payments`))
          : Effect.succeed(rail.payer)

      const checkInvoice = (payer: LightningPayer, challenge: L402Challenge, maxMsat: bigint, at: Date) =>
        Effect.gen(function*() {
          const decoded = payer.decode(challenge.invoice)
          if ("invalid" in decoded) {
            return yield* refused("L402_BAD_CHALLENGE", `The paywall's invoice is not valid: ${decoded.invalid}`)
          }
          const invoice: DecodedLightningInvoice = decoded
          if (invoice.amountMsat === undefined) {
            return yield* refused("L402_BAD_CHALLENGE", "The paywall's invoice has no amount")
          }
          const expiresAtMs = (invoice.timestampSeconds + invoice.expirySeconds) * 1000
          if (expiresAtMs <= at.getTime()) {
            return yield* refused("L402_BAD_CHALLENGE", "The paywall's invoice has expired", {
              expiredAt: new Date(expiresAtMs).toISOString()
            })
          }
          if (invoice.amountMsat > maxMsat) {
            return yield* refused("L402_PRICE_ABOVE_MAX", "The paywall asks more than maxSats", {
              invoiceSats: Number(invoice.amountMsat) / 1000,
              maxSats: Number(maxMsat / 1000n)
            })
          }
          return { ...invoice, amountMsat: invoice.amountMsat }
        })

      /** The node's word after an unknown outcome, asked a few times; InFlight when it still does not say. */
      const trackAWhile = (payer: LightningPayer, paymentHash: string) =>
        Effect.gen(function*() {
          for (let attempt = 0; attempt < TRACK_TRIES; attempt++) {
            const status = yield* payer.trackPayment(paymentHash).pipe(
              Effect.catchTag("RailError", () => Effect.succeed({ _tag: "InFlight" } as const))
            )
            if (status._tag !== "InFlight") return status
            yield* Effect.sleep(Duration.millis(TRACK_EVERY_MS))
          }
          return { _tag: "InFlight" } as const
        })

      const send = (
        url: URL,
        method: string,
        headers: Record<string, string>,
        body: string | undefined
      ): Effect.Effect<OutboundResponse, L402Refused | UnsafeUrl | UpstreamFailed> => {
        const request = Option.isSome(outbound) ? outbound.value.request : undefined
        if (request === undefined) {
          return Effect.fail(refused("L402_UNAVAILABLE", "outbound requests to caller-chosen URLs are not configured"))
        }
        return request({ url: url.href, method, headers, body, maxBytes: MAX_RESPONSE_BYTES, timeoutMs: REQUEST_TIMEOUT_MS }).pipe(
          Effect.catchIf(
            (error): error is FetchFailed => error instanceof FetchFailed,
            (error) => Effect.fail(new UpstreamFailed({ host: url.host, message: `${url.host}: ${error.message}` }))
          )
        )
      }

      /** Pays the challenge's invoice under the spend pipeline; answers the preimage and the charge. */
      const payInvoice = (
        principal: Principal,
        payer: LightningPayer,
        url: URL,
        challenge: L402Challenge,
        maxMsat: bigint
      ) =>
        Effect.gen(function*() {
          const accountId = principal.agent.accountId
          const at = yield* now
          const invoice = yield* checkInvoice(payer, challenge, maxMsat, at)
          const hosts = yield* store.payeeHosts(accountId)
          if (!hostAllowed(hosts, url)) {
            return yield* refused("L402_HOST_NOT_ALLOWED", `${url.host} is not on the account's list of L402 payee hosts`, {
              host: url.host
            })
          }
          const rate = yield* rates.current
          if (Option.isNone(rate)) return yield* new RateUnavailable()
          const microUsdPerBtc = rate.value.rate.microUsdPerBtc
          const feeLimitMsat = feeLimitFor(invoice.amountMsat)
          const quotedMicroUsd = msatToMicroUsdCharge(invoice.amountMsat + feeLimitMsat, microUsdPerBtc)
          const where = `${url.host}${url.pathname}`.slice(0, 200)
          let reservationId: string | undefined
          // Set once the payment's record is written: from then on an interruption (the caller
          // went away, the server is stopping) may leave the payment under way, so the hold stays
          // for the resolver to charge or release from the node's answer.
          let recorded = false
          const run = Effect.gen(function*() {
            const begun = yield* store.beginPayment({
              paymentHash: invoice.paymentHash,
              accountId,
              agentId: principal.agent.id,
              reservationId: reservationId!,
              url: `${url.origin}${url.pathname}`,
              paymentRequest: invoice.paymentRequest,
              amountMsat: invoice.amountMsat,
              feeLimitMsat,
              rateMicroUsdPerBtc: microUsdPerBtc,
              status: "pending",
              preimage: null,
              feeMsat: null,
              transactionId: null,
              createdAt: at,
              resolvedAt: null
            })
            if (!begun) {
              return yield* refused("L402_PAYMENT_FAILED", "This invoice was already paid or is being paid; it is not paid twice", {
                paymentHash: invoice.paymentHash
              })
            }
            recorded = true
            const first: LightningPaymentStatus = yield* payer.payInvoice({
              paymentRequest: invoice.paymentRequest,
              paymentHash: invoice.paymentHash,
              amountMsat: invoice.amountMsat,
              feeLimitMsat,
              timeoutSeconds: PAYMENT_TIMEOUT_SECONDS
            }).pipe(Effect.catchTag("RailError", () => Effect.succeed({ _tag: "InFlight" } as const)))
            const status = first._tag === "InFlight" ? yield* trackAWhile(payer, invoice.paymentHash) : first
            switch (status._tag) {
              case "Succeeded": {
                if (bytesToHex(sha256(hexToBytes(status.preimage))) !== invoice.paymentHash) {
                  yield* Effect.logError(`The node's preimage for ${invoice.paymentHash} does not hash to it`)
                }
                const spentMsat = status.amountMsat + status.feeMsat
                return {
                  value: { ...status, paymentHash: invoice.paymentHash },
                  actualMicroUsd: msatToMicroUsdCharge(spentMsat, microUsdPerBtc)
                }
              }
              case "InFlight":
                return yield* refused(
                  "L402_PAYMENT_PENDING",
                  "The payment's outcome is not known yet; its hold stays until the node says (never paid twice)",
                  { paymentHash: invoice.paymentHash }
                )
              case "Failed":
              case "NotFound": {
                const failedAt = yield* now
                const reason = status._tag === "Failed" ? status.reason : "not sent"
                yield* store.resolvePayment(invoice.paymentHash, {
                  status: "failed",
                  preimage: null,
                  feeMsat: null,
                  transactionId: null,
                  resolvedAt: failedAt
                }, [payFailed(accountId, failedAt, {
                  paymentHash: invoice.paymentHash,
                  agentId: principal.agent.id,
                  url: `${url.origin}${url.pathname}`,
                  amountSats: msatToSats(invoice.amountMsat),
                  reason
                })])
                return yield* refused("L402_PAYMENT_FAILED", "The Lightning payment failed; nothing was charged", {
                  reason: status._tag === "Failed" ? status.reason : "not sent"
                })
              }
            }
          })
          const { receipt, value } = yield* spend.spend(principal, {
            capability: "pay",
            provider: PAY_PROVIDER,
            quotedMicroUsd,
            description: `L402 payment to ${where} (${invoice.amountMsat} msat, hash ${invoice.paymentHash})`,
            onHeld: (id) => {
              reservationId = id
            },
            keepHold: (cause) =>
              (recorded && Cause.hasInterruptsOnly(cause)) ||
              (Cause.squash(cause) instanceof L402Refused && (Cause.squash(cause) as L402Refused).code === "L402_PAYMENT_PENDING"),
            run
          })
          const paidAt = yield* now
          yield* store.resolvePayment(invoice.paymentHash, {
            status: "succeeded",
            preimage: value.preimage,
            feeMsat: value.feeMsat,
            transactionId: receipt.transactionId,
            resolvedAt: paidAt
          }, [paySucceeded(accountId, paidAt, {
            paymentHash: invoice.paymentHash,
            agentId: principal.agent.id,
            url: `${url.origin}${url.pathname}`,
            amountSats: msatToSats(value.amountMsat),
            routingFeeSats: msatToSats(value.feeMsat),
            transactionId: receipt.transactionId
          })])
          const payment: PaymentMade = {
            paymentHash: invoice.paymentHash,
            preimage: value.preimage,
            amountMsat: value.amountMsat,
            routingFeeMsat: value.feeMsat
          }
          return { payment, receipt }
        })

      const pay = (principal: Principal, input: PayInput): Effect.Effect<PayResult, PayError> =>
        Effect.gen(function*() {
          const { url, method, headers, body, maxMsat } = yield* checkInput(input)
          const payer = yield* payerOf()
          const key = tokenKey(principal.agent.accountId, url)
          const cached = tokens.get(key)
          const withToken = (token: CachedToken) => ({
            ...headers,
            authorization: authorizationHeader(token.scheme, token.macaroon, token.preimage)
          })
          const first = yield* send(url, method, cached === undefined ? headers : withToken(cached), body)
          const answer = (response: OutboundResponse, l402: PayResult["l402"], paid?: { payment: PaymentMade; receipt: SpendReceipt }): PayResult => ({
            status: response.status,
            headers: returnedHeaders(response.headers),
            body: response.body,
            truncated: response.truncated,
            l402,
            payment: paid?.payment ?? null,
            receipt: paid?.receipt ?? null
          })
          if (first.status !== 402) return answer(first, cached === undefined ? "none" : "token")
          let challenged = first
          if (cached !== undefined) {
            tokens.delete(key) // refused: paid again below, once
            // A server may refuse a spent token with a bare 402 (this gateway's own seller
            // does): the request is sent once more without it, to get a new challenge.
            if (findL402Challenge(challengeHeaders(first)) === undefined) {
              challenged = yield* send(url, method, headers, body)
              if (challenged.status !== 402) return answer(challenged, "none")
            }
          }
          const challenge = findL402Challenge(challengeHeaders(challenged))
          if (challenge === undefined) return answer(challenged, "none")
          const paid = yield* payInvoice(principal, payer, url, challenge, maxMsat)
          const token: CachedToken = { scheme: challenge.scheme, macaroon: challenge.macaroon, preimage: paid.payment.preimage }
          remember(key, token)
          const retried = yield* send(url, method, withToken(token), body).pipe(
            // Paid, then the paid request failed: the payment and its charge stand and the token is
            // kept for the next call; the caller hears what it paid, not only that the host failed.
            Effect.catchIf((error): error is UpstreamFailed => error instanceof UpstreamFailed, (failed) =>
              Effect.fail(
                new UpstreamFailed({
                  host: failed.host,
                  message: `${failed.message} (after the invoice was paid: the payment stands and its token is kept for the next call)`,
                  paid: {
                    paymentHash: paid.payment.paymentHash,
                    amountSats: msatToSats(paid.payment.amountMsat),
                    routingFeeSats: msatToSats(paid.payment.routingFeeMsat),
                    chargedUsdCents: microUsdToCents(paid.receipt.chargedMicroUsd),
                    transactionId: paid.receipt.transactionId,
                    auditId: paid.receipt.auditId
                  }
                })
              )
            )
          )
          if (retried.status === 402) tokens.delete(key)
          return answer(retried, "paid", paid)
        })

      const setPayeeHosts = (principal: Principal, hosts: ReadonlyArray<string>) =>
        Effect.gen(function*() {
          yield* requireOwner(principal, "change the L402 payee hosts")
          const accountId = principal.agent.accountId
          if (hosts.length > MAX_PAYEE_HOSTS) return yield* invalid("hosts", `at most ${MAX_PAYEE_HOSTS} hosts`)
          const normalized: Array<string> = []
          for (const [index, entry] of hosts.entries()) {
            const host = normalizePayeeHost(entry)
            if (host === undefined) return yield* invalid(`hosts.${index}`, "a host name or IP address, with an optional port")
            if (!normalized.includes(host)) normalized.push(host)
          }
          normalized.sort()
          yield* store.setPayeeHosts(accountId, normalized, yield* now)
          return normalized
        })

      const resolvePending = (olderThanMs: number) =>
        Effect.gen(function*() {
          if (rail.payer === undefined) return 0
          const payer = rail.payer
          const cutoff = (yield* Clock.currentTimeMillis) - olderThanMs
          const pending = (yield* store.pendingPayments(500)).filter((p) => p.createdAt.getTime() <= cutoff)
          let resolved = 0
          for (const payment of pending) {
            // One payment that cannot be resolved (a store or ledger failure) is logged and retried
            // on the next pass; it does not hold up the payments after it.
            const one = Effect.gen(function*() {
              const status = yield* payer.trackPayment(payment.paymentHash).pipe(
                Effect.catchTag("RailError", (error) =>
                  Effect.as(Effect.logWarning(`L402 payment ${payment.paymentHash}: ${error.message}`), { _tag: "InFlight" } as const))
              )
              if (status._tag === "InFlight") return false
              if (status._tag === "Succeeded") {
                const actualMicroUsd = msatToMicroUsdCharge(status.amountMsat + status.feeMsat, payment.rateMicroUsdPerBtc)
                const transactionId = yield* spend.resolveHeld(payment.accountId, payment.reservationId, {
                  _tag: "Charge",
                  actualMicroUsd,
                  description: `L402 payment to ${payment.url.replace(/^https?:\/\//, "").slice(0, 200)} (${payment.amountMsat} msat, hash ${payment.paymentHash})`
                })
                const paidAt = yield* now
                yield* store.resolvePayment(payment.paymentHash, {
                  status: "succeeded",
                  preimage: status.preimage,
                  feeMsat: status.feeMsat,
                  transactionId,
                  resolvedAt: paidAt
                }, [paySucceeded(payment.accountId, paidAt, {
                  paymentHash: payment.paymentHash,
                  agentId: payment.agentId,
                  url: payment.url,
                  amountSats: msatToSats(status.amountMsat),
                  routingFeeSats: msatToSats(status.feeMsat),
                  transactionId
                })])
              } else {
                yield* spend.resolveHeld(payment.accountId, payment.reservationId, { _tag: "Release", reason: "payment failed" })
                const failedAt = yield* now
                yield* store.resolvePayment(payment.paymentHash, {
                  status: "failed",
                  preimage: null,
                  feeMsat: null,
                  transactionId: null,
                  resolvedAt: failedAt
                }, [payFailed(payment.accountId, failedAt, {
                  paymentHash: payment.paymentHash,
                  agentId: payment.agentId,
                  url: payment.url,
                  amountSats: msatToSats(payment.amountMsat),
                  reason: status._tag === "Failed" ? status.reason : "not sent"
                })])
              }
              yield* Effect.logInfo(`L402 payment ${payment.paymentHash} resolved from the node: ${status._tag}`)
              return true
            })
            const done = yield* one.pipe(
              Effect.catchCause((cause) =>
                Effect.as(Effect.logError(`L402 payment ${payment.paymentHash} could not be resolved; retried on the next pass`, cause), false))
            )
            if (done) resolved++
          }
          return resolved
        })

      const authorizationOf = (token: CachedToken) => authorizationHeader(token.scheme, token.macaroon, token.preimage)

      const payChallenge = (principal: Principal, url: URL, wwwAuthenticate: string | undefined, maxSats: number) =>
        Effect.gen(function*() {
          const challenge = wwwAuthenticate === undefined ? undefined : findL402Challenge([wwwAuthenticate])
          if (challenge === undefined) return undefined
          if (!Number.isSafeInteger(maxSats) || maxSats < 1 || maxSats > MAX_SATS) {
            return yield* invalid("maxSats", `maxSats must be a whole number of sats from 1 to ${MAX_SATS}`)
          }
          const payer = yield* payerOf()
          const paid = yield* payInvoice(principal, payer, url, challenge, BigInt(maxSats) * 1000n)
          const token: CachedToken = { scheme: challenge.scheme, macaroon: challenge.macaroon, preimage: paid.payment.preimage }
          remember(tokenKey(principal.agent.accountId, url), token)
          return { authorization: authorizationOf(token), payment: paid.payment, receipt: paid.receipt }
        })

      return L402Payments.of({
        tokenFor: (accountId, url) => {
          const token = tokens.get(tokenKey(accountId, url))
          return token === undefined ? undefined : authorizationOf(token)
        },
        forgetToken: (accountId, url) => void tokens.delete(tokenKey(accountId, url)),
        payChallenge,
        pay,
        payeeHosts: (principal) =>
          Effect.andThen(
            requireOwner(principal, "read the L402 payee hosts"),
            store.payeeHosts(principal.agent.accountId)
          ),
        setPayeeHosts,
        resolvePending
      })
    })
  )

  /** Resolves pending payments at start-up (all of them) and then every minute (those older than five). */
  static readonly resolver = (options: { readonly everyMs?: number; readonly olderThanMs?: number } = {}) =>
    Layer.effectDiscard(
      Effect.gen(function*() {
        const payments = yield* L402Payments
        const at = yield* payments.resolvePending(0).pipe(
          Effect.catchCause((cause) => Effect.as(Effect.logError("L402 payment resolution failed", cause), 0))
        )
        if (at > 0) yield* Effect.logWarning(`Resolved ${at} L402 payment(s) left pending by a previous run`)
        yield* payments.resolvePending(options.olderThanMs ?? RESOLVE_AFTER_MS).pipe(
          Effect.catchCause((cause) => Effect.as(Effect.logError("L402 payment resolution failed", cause), 0)),
          Effect.repeat(Schedule.spaced(Duration.millis(options.everyMs ?? 60_000))),
          Effect.forkScoped
        )
      })
    )
}

