import { Clock, Context, Effect, Exit, Layer, Option, Result } from "effect"
import type { Principal } from "../domain/Agent.ts"
import type { Capability } from "../domain/Capability.ts"
import { capabilityNames } from "../domain/Capability.ts"
import { ModelNotPriced, NotFound, ValidationError } from "../domain/errors.ts"
import { OutboundHttp, type UnsafeUrl } from "../ports/Net.ts"
import { Store } from "../ports/Store.ts"
import { DEFAULT_QUOTE_TTL_MS, MAX_QUOTE_TTL_MS, MIN_QUOTE_TTL_MS } from "../quotes/Quote.ts"
import { Spend } from "../wallet/Spend.ts"
import { capabilityInfo } from "./catalog.ts"
import { type AnyProvider, type Metered, type Provider, ProviderFailure, type Quote } from "./Provider.ts"
import { availabilityOf, type ProviderAvailability, ProviderHealth, type ProviderStatus, probesOf, ProviderStatuses } from "./ProviderHealth.ts"
import { type Bound, quotedCalls } from "./quoted.ts"
import type { BuiltCapability, CapabilityIO } from "./schemas.ts"

/**
 * Metered execution: validate → pick providers → quote → the spend pipeline
 * (reserve, run, settle or release) → result and receipt. Providers are
 * tried cheapest first among the healthy ones; when one fails before any
 * output reached the caller its hold is released and the next is tried.
 * A provider that found at start-up it cannot work here (its own `status`, or
 * the one ProviderStatuses reports) is never chosen, not even when pinned: a
 * capability left with no usable provider is PROVIDER_UNAVAILABLE (503).
 */

/** The configured providers, in the order the operator listed them. */
export class Providers extends Context.Service<Providers, {
  readonly all: ReadonlyArray<AnyProvider>
}>()("spendgate/Providers") {
  static readonly make = (providers: ReadonlyArray<AnyProvider>) => Layer.succeed(Providers, { all: providers })
}


import type {
  CapabilitiesOptions,
  Estimate,
  EstimateError,
  ExecuteError,
  ExecuteOptions,
  ExecutionResult,
  IssuedQuote,
  QuoteError
} from "./results.ts"
import { NoProvider } from "./results.ts"

export {
  type CapabilitiesOptions,
  type Estimate,
  type EstimateError,
  type ExecuteError,
  type ExecuteOptions,
  type ExecutionResult,
  type IssuedQuote,
  NoProvider,
  type QuoteError
} from "./results.ts"

interface Choice<C extends BuiltCapability> {
  readonly pinned: string | undefined
  /** In the order execute tries them. */
  readonly ordered: ReadonlyArray<{ readonly provider: Provider<C>; readonly quote: Quote; readonly healthy: boolean }>
}

export interface CapabilitySummary {
  readonly name: Capability
  readonly description: string
  readonly per: string
  readonly providers: ReadonlyArray<AnyProvider>
  /** Per provider name: usable, degraded (with why) or unavailable here (with why). */
  readonly availability: { readonly [provider: string]: ProviderAvailability }
  readonly defaultProvider: string | null
}

const pinnedOf = (input: { readonly provider?: string | undefined }) => input.provider

const descriptionOf = (capability: Capability, provider: string, quote: Quote) =>
  quote.model === undefined ? `${capability} via ${provider}` : `${capability} via ${provider} (${quote.model})`

export class Capabilities extends Context.Service<Capabilities, {
  readonly list: Effect.Effect<ReadonlyArray<CapabilitySummary>>
  readonly describe: (capability: string) => Effect.Effect<CapabilitySummary, NotFound>
  readonly execute: <C extends BuiltCapability>(
    principal: Principal,
    capability: C,
    input: CapabilityIO[C]["input"],
    options?: ExecuteOptions
  ) => Effect.Effect<ExecutionResult<CapabilityIO[C]["output"]>, ExecuteError>
  /**
   * A binding quote: the estimate of the call (provider, price, decision);
   * when the spend rules would refuse the call now, that refusal and nothing
   * stored; else a stored quote, usable once by the calling agent until it
   * expires.
   */
  readonly quote: <C extends BuiltCapability>(
    principal: Principal,
    capability: C,
    input: CapabilityIO[C]["input"]
  ) => Effect.Effect<IssuedQuote, QuoteError>
  /**
   * The provider and quote execute would start with, and the spend
   * pipeline's decision on that quote now (`Spend.estimate`): nothing held,
   * nothing charged, no provider called.
   */
  readonly estimate: <C extends BuiltCapability>(
    principal: Principal,
    capability: C,
    input: CapabilityIO[C]["input"]
  ) => Effect.Effect<Estimate, EstimateError>
}>()("spendgate/Capabilities") {
  static readonly layerWith = (options: Partial<CapabilitiesOptions> = {}) => Layer.effect(
    Capabilities,
    Effect.gen(function*() {
      const quoteTtlMs = options.quoteTtlMs ?? DEFAULT_QUOTE_TTL_MS
      if (!Number.isInteger(quoteTtlMs) || quoteTtlMs < MIN_QUOTE_TTL_MS || quoteTtlMs > MAX_QUOTE_TTL_MS) {
        return yield* Effect.die(new Error(`quoteTtlMs must be a whole number of ms from ${MIN_QUOTE_TTL_MS} to ${MAX_QUOTE_TTL_MS}`))
      }
      const { all } = yield* Providers
      const health = yield* ProviderHealth
      const spend = yield* Spend
      const store = yield* Store
      const outbound = yield* Effect.serviceOption(OutboundHttp)
      const statuses = yield* Effect.serviceOption(ProviderStatuses)

      /** What start-up found: the operator's probe when there is one, else the provider's own word. */
      const statusOf = (provider: Pick<AnyProvider, "name" | "status">): ProviderStatus | undefined =>
        (Option.isSome(statuses) ? statuses.value.of(provider.name) : undefined) ?? provider.status
      const usable = (provider: Pick<AnyProvider, "name" | "status">) => statusOf(provider)?.ok !== false
      /** The start-up probes of these providers still running, to wait for before reading their status. */
      const probing = (providers: ReadonlyArray<Pick<AnyProvider, "name">>) => probesOf(Option.getOrUndefined(statuses), providers)

      const providersFor = (capability: Capability): ReadonlyArray<AnyProvider> =>
        all.filter((p) => p.capability === capability)

      /** Cheapest nominal price first: a flat unit price, or the default model's output price. */
      const nominalPrice = (provider: AnyProvider): bigint =>
        provider.unitPrice?.priceMicroUsd ?? provider.models?.[0]?.outputPer1kMicroUsd ?? 0n

      const summary = (capability: Capability) =>
        Effect.gen(function*() {
          const providers = providersFor(capability)
          const probes = probing(providers)
          if (probes !== undefined) yield* probes
          const candidates = providers.filter(usable)
          const healthy: Array<AnyProvider> = []
          for (const p of candidates) if (yield* health.isHealthy(p.name)) healthy.push(p)
          const best = [...(healthy.length > 0 ? healthy : candidates)].sort((a, b) =>
            nominalPrice(a) < nominalPrice(b) ? -1 : nominalPrice(a) > nominalPrice(b) ? 1 : 0
          )[0]
          return {
            name: capability,
            description: capabilityInfo[capability].description,
            per: capabilityInfo[capability].per,
            providers,
            availability: Object.fromEntries(providers.map((p) => [p.name, availabilityOf(statusOf(p))])),
            defaultProvider: best?.name ?? null
          } satisfies CapabilitySummary
        })

      const list = Effect.forEach(capabilityNames, summary)

      const describe = (capability: string) =>
        (capabilityNames as ReadonlyArray<string>).includes(capability)
          ? summary(capability as Capability)
          : Effect.fail(new NotFound({ resource: `Capability ${capability.slice(0, 64)}` }))

      /** A provider's run, as the spend pipeline calls it; the model it names goes into `found`. */
      const runProvider = Effect.fnUntraced(function*<C extends BuiltCapability>(
        provider: Provider<C>,
        input: CapabilityIO[C]["input"],
        quote: Quote,
        found: { model: string | undefined }
      ) {
        if (!(yield* health.admit(provider.name))) {
          return yield* new ProviderFailure({ provider: provider.name, reason: "unavailable", message: "circuit open" })
        }
        const started = yield* Clock.currentTimeMillis
        const exit = yield* Effect.exit(provider.run(input, quote))
        const latencyMs = (yield* Clock.currentTimeMillis) - started
        if (Exit.isSuccess(exit)) {
          yield* health.record(provider.name, { ok: true, latencyMs })
          const metered: Metered<CapabilityIO[C]["output"]> = exit.value
          found.model = metered.model ?? found.model
          return { value: metered.output, actualMicroUsd: metered.actualMicroUsd }
        }
        const failure = Option.getOrUndefined(Exit.findErrorOption(exit))
        if (failure === undefined) {
          yield* health.abandon(provider.name)
          return yield* Effect.failCause(exit.cause)
        }
        // A URL refused mid-flight is the caller's, not the provider's, fault.
        if (failure.reason !== "blocked") {
          yield* health.record(provider.name, { ok: false, latencyMs, error: `${failure.reason}: ${failure.message}` })
        } else {
          yield* health.abandon(provider.name)
        }
        return yield* Effect.fail(failure)
      })

      // Made once, not per call (docs/performance.md, "Generators made once").
      const runOneMade = Effect.fnUntraced(function*<C extends BuiltCapability>(
        principal: Principal,
        capability: C,
        provider: Provider<C>,
        input: CapabilityIO[C]["input"],
        quote: Quote,
        bound: Bound | undefined
      ) {
        const found = { model: quote.model }
        const run = runProvider(provider, input, quote, found).pipe(Effect.onInterrupt(() => health.abandon(provider.name)))
        const request = {
          capability,
          provider: provider.name,
          quotedMicroUsd: bound?.quotedMicroUsd ?? quote.microUsd,
          description: descriptionOf(capability, provider.name, quote),
          run
        }
        const { value, receipt } = bound === undefined
          ? yield* spend.spend(principal, request)
          : yield* spend.spendQuoted(principal, { ...request, quote: bound.claim })
        return { data: value, receipt, provider: provider.name, model: found.model }
      })
      const runOne = <C extends BuiltCapability>(
        principal: Principal,
        capability: C,
        provider: Provider<C>,
        input: CapabilityIO[C]["input"],
        quote: Quote,
        /** A binding quote: the hold is its price, and it is used up with the hold. */
        bound?: Bound
      ) => runOneMade(principal, capability, provider, input, quote, bound)

      /**
       * The "choose provider and quote" step, shared by execute and estimate:
       * the pinned provider or every configured one, the unusable ones
       * dropped, the caller's URL checked, each quoted, then (unpinned)
       * healthy first and cheapest first. Execute tries them in this order,
       * so the first is the one it would run (and estimate reports).
       */
      // Made once, not per call (docs/performance.md, "Generators made once").
      const chooseMade = Effect.fnUntraced(function*<C extends BuiltCapability>(
        capability: C,
        input: CapabilityIO[C]["input"]
      ) {
        const configured = providersFor(capability) as ReadonlyArray<Provider<C>>
        const pinned = pinnedOf(input)
        let candidates: ReadonlyArray<Provider<C>> = configured
        if (pinned !== undefined) {
          const found = configured.find((p) => p.name === pinned)
          if (found === undefined) return yield* new NotFound({ resource: `Provider ${pinned.slice(0, 64)} for ${capability}` })
          candidates = [found]
        }
        // Never run where the provider itself said it cannot work (e.g. no bubblewrap for the sandbox);
        // a probe still running is waited for.
        const probes = probing(candidates)
        if (probes !== undefined) yield* probes
        candidates = candidates.filter(usable)
        if (candidates.length === 0) return yield* Effect.fail(new NoProvider({ capability }))

        // Addresses chosen by the caller are checked before anything is held.
        const url = (input as { readonly url?: string | undefined }).url
        if (url !== undefined && Option.isSome(outbound)) yield* outbound.value.check(url)

        const quoted: Array<{ readonly provider: Provider<C>; readonly quote: Quote; readonly healthy: boolean }> = []
        let firstRefusal: NotFound | ModelNotPriced | ValidationError | undefined
        for (const provider of candidates) {
          const quote = provider.quote(input)
          if (Result.isFailure(quote)) {
            firstRefusal ??= quote.failure
            continue
          }
          quoted.push({ provider, quote: quote.success, healthy: yield* health.isHealthy(provider.name) })
        }
        if (quoted.length === 0) {
          // No provider's card prices the model: unpinned, the refusal names no one provider.
          if (pinned === undefined && firstRefusal instanceof ModelNotPriced) {
            return yield* new ModelNotPriced({ model: firstRefusal.model })
          }
          return yield* Effect.fail(firstRefusal!)
        }
        const ordered = pinned !== undefined
          ? quoted
          : [...quoted].sort((a, b) =>
            a.healthy !== b.healthy
              ? (a.healthy ? -1 : 1)
              : a.quote.microUsd < b.quote.microUsd
              ? -1
              : a.quote.microUsd > b.quote.microUsd
              ? 1
              : 0
          )
        if (pinned === undefined && !ordered.some((o) => o.healthy)) return yield* Effect.fail(new NoProvider({ capability }))
        return { pinned, ordered }

      })
      const choose = <C extends BuiltCapability>(
        capability: C,
        input: CapabilityIO[C]["input"]
      ): Effect.Effect<Choice<C>, NotFound | ModelNotPriced | ValidationError | UnsafeUrl | NoProvider> => chooseMade(capability, input)

      /** A provider failure on a URL the caller chose is the caller's: 400, as a refused URL. */
      const blockedAsValidation = (error: ProviderFailure) =>
        new ValidationError({
          message: `This URL may not be fetched: ${error.message}`,
          issues: [{ path: "url", message: `not allowed: ${error.message}` }]
        })

      /**
       * Whether a failed call of `email` or `sms` may still have sent its
       * message: its request went out and no answer said it was refused (no
       * answer in time, a connection broken during the answer, a success
       * answer that could not be read). Another provider is then not tried,
       * which could send the message twice. A refused connection, a 4xx, a 429
       * or a 5xx says the message was not taken, and the next one is tried.
       */
      const mayHaveSent = (capability: Capability, error: ProviderFailure): boolean =>
        (capability === "email" || capability === "sms") &&
        (error.reason === "timeout" || error.reason === "network" || error.reason === "malformed" || error.reason === "too_large")

      /** One attempt on one provider; a URL refused mid-flight is the caller's 400. */
      const attempt = <C extends BuiltCapability>(
        principal: Principal,
        capability: C,
        provider: Provider<C>,
        input: CapabilityIO[C]["input"],
        quote: Quote,
        bound: Bound
      ): Effect.Effect<ExecutionResult<CapabilityIO[C]["output"]>, ExecuteError> =>
        runOne(principal, capability, provider, input, quote, bound).pipe(
          Effect.catchIf(
            (error): error is ProviderFailure => error instanceof ProviderFailure && error.reason === "blocked",
            (error) => Effect.fail(blockedAsValidation(error))
          )
        )

      // Made once, not per call (docs/performance.md, "Generators made once").
      const executeMade = Effect.fnUntraced(function*<C extends BuiltCapability>(
        principal: Principal,
        capability: C,
        input: CapabilityIO[C]["input"],
        options?: ExecuteOptions
      ) {
        if (options?.quoteId !== undefined) return yield* quoted.execute(principal, capability, input, options.quoteId)
        const { pinned, ordered } = yield* choose(capability, input)
        let lastFailure: ProviderFailure | undefined
        for (const { provider, quote, healthy } of ordered) {
          if (!healthy && pinned === undefined) continue
          const attempt = yield* Effect.exit(runOne(principal, capability, provider, input, quote))
          if (Exit.isSuccess(attempt)) return attempt.value
          const error = Option.getOrUndefined(Exit.findErrorOption(attempt))
          if (!(error instanceof ProviderFailure)) return yield* Effect.failCause(attempt.cause)
          if (error.reason === "blocked") return yield* Effect.fail(blockedAsValidation(error))
          // A message that may have gone out is not sent again through another provider.
          if (mayHaveSent(capability, error)) return yield* Effect.fail(error)
          lastFailure = error
        }
        return yield* Effect.fail(
          lastFailure ?? new ProviderFailure({ provider: ordered[0]!.provider.name, reason: "unavailable", message: "no provider answered" })
        )
      })
      const execute = <C extends BuiltCapability>(
        principal: Principal,
        capability: C,
        input: CapabilityIO[C]["input"],
        options?: ExecuteOptions
      ): Effect.Effect<ExecutionResult<CapabilityIO[C]["output"]>, ExecuteError> => executeMade(principal, capability, input, options)

      // Made once, not per call (docs/performance.md, "Generators made once").
      const estimateMade = Effect.fnUntraced(function*<C extends BuiltCapability>(
        principal: Principal,
        capability: C,
        input: CapabilityIO[C]["input"]
      ) {
        const { ordered } = yield* choose(capability, input)
        const { provider, quote } = ordered[0]!
        const { decision, remainingThisHourMicroUsd, remainingThisMonthMicroUsd, remainingTodayMicroUsd } = yield* spend.estimate(
          principal,
          capability,
          quote.microUsd
        )
        return {
          capability,
          provider: provider.name,
          model: quote.model,
          quotedMicroUsd: quote.microUsd,
          refusal: Result.isFailure(decision) ? decision.failure : null,
          remainingTodayMicroUsd,
          remainingThisMonthMicroUsd,
          remainingThisHourMicroUsd
        } satisfies Estimate
      })
      const estimate = <C extends BuiltCapability>(
        principal: Principal,
        capability: C,
        input: CapabilityIO[C]["input"]
      ): Effect.Effect<Estimate, EstimateError> => estimateMade(principal, capability, input)

      const quoted = quotedCalls({
        store,
        quoteTtlMs,
        estimate,
        providerNow: <C extends BuiltCapability>(capability: C, name: string) =>
          Effect.gen(function*() {
            const provider = (providersFor(capability) as ReadonlyArray<Provider<C>>).find((p) => p.name === name)
            const probes = provider === undefined ? undefined : probing([provider])
            if (probes !== undefined) yield* probes
            if (provider === undefined || !usable(provider) || !(yield* health.isHealthy(provider.name))) {
              return yield* new NoProvider({ capability })
            }
            return provider
          }),
        checkUrl: (input) => {
          const url = (input as { readonly url?: string | undefined }).url
          return url !== undefined && Option.isSome(outbound) ? outbound.value.check(url) : Effect.void
        },
        attempt
      })

      return Capabilities.of({ list, describe, execute, estimate, quote: quoted.issue })
    })
  )

  static readonly layer = Capabilities.layerWith()
}

