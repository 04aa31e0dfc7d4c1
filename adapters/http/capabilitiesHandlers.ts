import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Capabilities, type CapabilitySummary, type Estimate, type ExecutionResult } from "../../src/capabilities/Capabilities.ts"
import { priceKey } from "../../src/capabilities/catalog.ts"
import type { AnyProvider } from "../../src/capabilities/Provider.ts"
import type { ProviderAvailability } from "../../src/capabilities/ProviderHealth.ts"
import type { BuiltCapability, CapabilityIO } from "../../src/capabilities/schemas.ts"
import { NotFound } from "../../src/domain/errors.ts"
import { microUsdToCents, msatToSats } from "../../src/domain/Money.ts"
import { L402Payments, PAY_PROVIDER, type PayResult } from "../../src/l402/Pay.ts"
import { callReceipt } from "../../src/wallet/receipt.ts"
import { Api } from "./Api.ts"
import { failAsHttpError, toHttpError } from "./errors.ts"
import { CurrentPrincipal } from "./middleware.ts"
import { QUOTE_HEADER } from "./QuotesApi.ts"

/** Prices in USD cents, each object carrying its unit (decisions §7). */
const providerPricing = (provider: AnyProvider): Record<string, unknown> => {
  if (provider.models !== undefined) {
    return Object.fromEntries(provider.models.map((model) => [model.id, {
      inputPer1k: microUsdToCents(model.inputPer1kMicroUsd),
      outputPer1k: microUsdToCents(model.outputPer1kMicroUsd),
      unit: "usd_cents",
      per: "1k_tokens"
    }]))
  }
  const price = provider.unitPrice
  return price === undefined
    ? {}
    : { [priceKey(price.per)]: microUsdToCents(price.priceMicroUsd), unit: "usd_cents", per: price.per }
}

const listItem = (summary: CapabilitySummary) => ({
  name: summary.name,
  description: summary.description,
  providers: summary.providers.map((p) => p.name),
  pricing: Object.fromEntries(summary.providers.map((p) => [p.name, providerPricing(p)]))
})

const notOk = (availability: ProviderAvailability | undefined) =>
  availability === undefined || availability.status === "ok" ? {} : { status: availability.status, reason: availability.reason }

const detail = (summary: CapabilitySummary) => ({
  name: summary.name,
  description: summary.description,
  defaultProvider: summary.defaultProvider,
  providers: summary.providers.map((p) => ({
    ...(p.models !== undefined
      ? {
        name: p.name,
        models: p.models.map((m) => ({
          id: m.id,
          inputPricePer1kTokens: microUsdToCents(m.inputPer1kMicroUsd),
          outputPricePer1kTokens: microUsdToCents(m.outputPer1kMicroUsd),
          ...(m.cachedInputPer1kMicroUsd === undefined ? {} : { cachedInputPricePer1kTokens: microUsdToCents(m.cachedInputPer1kMicroUsd) }),
          ...(m.cacheWritePer1kMicroUsd === undefined ? {} : { cacheWritePricePer1kTokens: microUsdToCents(m.cacheWritePer1kMicroUsd) }),
          maxTokens: m.maxTokens,
          ...(m.contextTokens === undefined ? {} : { contextTokens: m.contextTokens })
        }))
      }
      : { name: p.name, pricing: providerPricing(p) }),
    // Only a provider that cannot work here, or works with less protection, says so (with why).
    ...notOk(summary.availability[p.name])
  }))
})

export const resultJson = <O>(result: ExecutionResult<O>) => ({
  data: result.data,
  metadata: {
    ...callReceipt(result.receipt, { provider: result.provider, model: result.model }),
    ...(result.quoteId === undefined ? {} : { quoteId: result.quoteId })
  }
})

/** An estimate on the wire: USD cents, and the refusal exactly as execute would put it in the error envelope. */
export const estimateJson = (estimate: Estimate) => ({
  capability: estimate.capability,
  provider: estimate.provider,
  ...(estimate.model !== undefined ? { model: estimate.model } : {}),
  quotedUsdCents: microUsdToCents(estimate.quotedMicroUsd),
  allowed: estimate.refusal === null,
  ...(estimate.refusal !== null
    ? { refusal: toHttpError(estimate.refusal).error }
    : {}),
  remainingTodayUsdCents: estimate.remainingTodayMicroUsd === null ? null : microUsdToCents(estimate.remainingTodayMicroUsd),
  remainingThisMonthUsdCents: estimate.remainingThisMonthMicroUsd === null
    ? null
    : microUsdToCents(estimate.remainingThisMonthMicroUsd),
  remainingThisHourUsdCents: estimate.remainingThisHourMicroUsd === null
    ? null
    : microUsdToCents(estimate.remainingThisHourMicroUsd)
})

const isText = (contentType: string | undefined, body: Uint8Array): boolean => {
  if (contentType !== undefined && !/^(text\/|application\/(json|xml|javascript|x-www-form-urlencoded)|[^;]*\+(json|xml))/i.test(contentType)) {
    return false
  }
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(body)
    return true
  } catch {
    return false
  }
}

/** A paywalled call on the wire: the upstream's answer, the payment, and the charge. */
export const payJson = (result: PayResult) => {
  const text = isText(result.headers["content-type"], result.body)
  return {
    status: result.status,
    headers: { ...result.headers },
    body: text ? new TextDecoder().decode(result.body) : Buffer.from(result.body).toString("base64"),
    bodyEncoding: text ? "utf8" as const : "base64" as const,
    truncated: result.truncated,
    l402: result.l402,
    payment: result.payment === null ? null : {
      paymentHash: result.payment.paymentHash,
      preimage: result.payment.preimage,
      amountSats: msatToSats(result.payment.amountMsat),
      routingFeeSats: msatToSats(result.payment.routingFeeMsat)
    },
    metadata: result.receipt === null
      ? null
      : { ...callReceipt(result.receipt, { provider: PAY_PROVIDER, model: undefined }), transactionId: result.receipt.transactionId }
  }
}

export const CapabilitiesHandlers = HttpApiBuilder.group(
  Api,
  "capabilities",
  Effect.fn(function*(handlers) {
    const capabilities = yield* Capabilities
    const payments = yield* L402Payments
    const execute = <C extends BuiltCapability>(
      capability: C,
      input: CapabilityIO[C]["input"],
      headers: { readonly [QUOTE_HEADER]?: string | undefined }
    ) =>
      Effect.flatMap(CurrentPrincipal, (principal) =>
        capabilities.execute(principal, capability, input, { quoteId: headers[QUOTE_HEADER] }).pipe(
          Effect.map(resultJson),
          Effect.catch(failAsHttpError)
        ))
    const estimate = <C extends BuiltCapability>(capability: C, input: CapabilityIO[C]["input"]) =>
      Effect.flatMap(CurrentPrincipal, (principal) =>
        capabilities.estimate(principal, capability, input).pipe(Effect.map(estimateJson), Effect.mapError(toHttpError)))
    return handlers
      .handle("list", () => Effect.map(capabilities.list, (all) => all.map(listItem)))
      .handle("describe", ({ params }) =>
        capabilities.describe(params.capability).pipe(Effect.map(detail), Effect.mapError(toHttpError)))
      .handle("reason", ({ headers, payload }) => execute("reason", payload, headers))
      .handle("search", ({ headers, payload }) => execute("search", payload, headers))
      .handle("read", ({ headers, payload }) => execute("read", payload, headers))
      .handle("scrape", ({ headers, payload }) => execute("scrape", payload, headers))
      .handle("execute", ({ headers, payload }) => execute("execute", payload, headers))
      .handle("imagine", ({ headers, payload }) => execute("imagine", payload, headers))
      .handle("speak", ({ headers, payload }) => execute("speak", payload, headers))
      .handle("transcribe", ({ headers, payload }) => execute("transcribe", payload, headers))
      .handle("email", ({ headers, payload }) => execute("email", payload, headers))
      .handle("sms", ({ headers, payload }) => execute("sms", payload, headers))
      .handle("pay", ({ payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const result = yield* payments.pay(principal, payload).pipe(Effect.catch(failAsHttpError))
          return payJson(result)
        }))
      .handle("estimateReason", ({ payload }) => estimate("reason", payload))
      .handle("estimateSearch", ({ payload }) => estimate("search", payload))
      .handle("estimateRead", ({ payload }) => estimate("read", payload))
      .handle("estimateScrape", ({ payload }) => estimate("scrape", payload))
      .handle("estimateExecute", ({ payload }) => estimate("execute", payload))
      .handle("estimateImagine", ({ payload }) => estimate("imagine", payload))
      .handle("estimateSpeak", ({ payload }) => estimate("speak", payload))
      .handle("estimateTranscribe", ({ payload }) => estimate("transcribe", payload))
      .handle("estimateEmail", ({ payload }) => estimate("email", payload))
      .handle("estimateSms", ({ payload }) => estimate("sms", payload))
      .handle("estimateOther", ({ params }) =>
        Effect.fail(toHttpError(new NotFound({ resource: `Capability ${params.capability.slice(0, 64)}` }))))
      .handle("other", ({ params }) =>
        Effect.fail(toHttpError(new NotFound({ resource: `Capability ${params.capability.slice(0, 64)}` }))))
  })
)
