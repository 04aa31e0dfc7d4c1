/**
 * The settings and the provider object every keyed HTTP upstream shares: its
 * name, base URL, credential, price (one checker: `checkUnitPrice`), time and
 * size limits, and how its error bodies read; and, for an upstream priced per
 * call, the provider itself around the adapter's own `run`.
 */
import { Effect, Redacted, Result } from "effect"
import type { Provider, ProviderFailure, UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { BuiltCapability, CapabilityIO } from "../../../src/capabilities/schemas.ts"
import type { Upstream } from "./exchange.ts"
import { baseUrlOf, checkUnitPrice, credential, positiveInteger, positiveNumber, providerName } from "./settings.ts"
import { defectsUnavailable, keySecrets } from "./text.ts"

/** The options every HTTP upstream takes. */
export interface UpstreamOptions {
  /** Provider name in the catalogue and in failures. */
  readonly name?: string | undefined
  /** Scheme, host and optional path prefix. */
  readonly baseUrl?: string | undefined
  /** From the operator's price card. */
  readonly unitPrice: UnitPrice
  /** Limit for the whole call, from connecting to the end of the answer. */
  readonly timeoutMs?: number | undefined
  /** Largest answer accepted. */
  readonly maxResponseBytes?: number | undefined
}

/** What an adapter says about its upstream. */
export interface UpstreamSpec {
  /** The adapter, in messages about bad options ("Brave"). */
  readonly label: string
  /** The provider name when the options give none. */
  readonly name: string
  /** The base URL when the options give none; without it the options must. */
  readonly baseUrl?: string | undefined
  /** Whether the base URL may carry credentials (a proxy's); default no. */
  readonly allowCredentials?: boolean | undefined
  /** The unit the price card must be per. */
  readonly per: string
  readonly timeoutMs: number
  readonly maxResponseBytes: number
  /** The credential, when the upstream takes one. */
  readonly secret?: {
    readonly label: string
    readonly value: Redacted.Redacted<string>
    readonly printable?: boolean | undefined
  } | undefined
  /** A key the upstream may go without (a self-hosted server): sent when given, kept out of messages when long enough to be one. */
  readonly optionalKey?: Redacted.Redacted<string> | undefined
  /** How the upstream's failures read (exchange.ts). */
  readonly errors?: Pick<Upstream, "errorDetail" | "errorText" | "onErrorStatus" | "requestIdHeader" | "unreachable"> | undefined
}

export interface UpstreamSettings {
  readonly name: string
  /** Without trailing slashes. */
  readonly baseUrl: string
  /** The credential (or the optional key) in clear, "" when none. */
  readonly secret: string
  readonly unitPrice: UnitPrice
  readonly timeoutMs: number
  readonly upstream: Upstream
}

/** Checks the options once; a bad value is a deployment error (thrown, naming it). */
export const upstreamSettings = (options: UpstreamOptions, spec: UpstreamSpec): UpstreamSettings => {
  const name = providerName(spec.label, options.name ?? spec.name)
  const base = options.baseUrl ?? spec.baseUrl
  if (base === undefined) throw new RangeError(`${name}: baseUrl is required`)
  const baseUrl = baseUrlOf(name, base, { allowCredentials: spec.allowCredentials ?? false })
  const secret = spec.secret !== undefined
    ? credential(name, spec.secret.label, spec.secret.value, { printable: spec.secret.printable ?? false })
    : spec.optionalKey !== undefined
    ? Redacted.value(spec.optionalKey)
    : ""
  const secrets = spec.secret !== undefined ? [secret] : keySecrets(spec.optionalKey)
  const unitPrice = checkUnitPrice(name, options.unitPrice, spec.per)
  const timeoutMs = positiveNumber(name, "timeoutMs", options.timeoutMs, spec.timeoutMs)
  const upstream: Upstream = {
    provider: name,
    timeoutMs,
    maxResponseBytes: positiveInteger(name, "maxResponseBytes", options.maxResponseBytes, spec.maxResponseBytes),
    ...(secrets.length === 0 ? {} : { secrets }),
    ...spec.errors
  }
  return { name, baseUrl, secret, unitPrice, timeoutMs, upstream }
}

/**
 * A provider priced per call: the quote and the charge are the price card's,
 * whatever the input. `run` is traced as `span`; a defect in it is an
 * `unavailable` failure (exchange.ts), with the credential kept out.
 */
export const perCallProvider = <C extends BuiltCapability>(
  capability: C,
  settings: Pick<UpstreamSettings, "name" | "unitPrice" | "upstream">,
  span: string,
  run: (input: CapabilityIO[C]["input"]) => Effect.Effect<CapabilityIO[C]["output"], ProviderFailure>
): Provider<C> => {
  const price = settings.unitPrice.priceMicroUsd
  const traced = Effect.fn(span)(
    function*(input: CapabilityIO[C]["input"]) {
      const output = yield* run(input)
      return { output, actualMicroUsd: price }
    },
    defectsUnavailable(settings.name, settings.upstream.secrets)
  )
  return {
    name: settings.name,
    capability,
    unitPrice: settings.unitPrice,
    quote: () => Result.succeed({ microUsd: price }),
    run: (input) => traced(input)
  }
}
