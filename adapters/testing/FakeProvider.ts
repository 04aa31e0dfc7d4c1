import { Clock, type Duration, Effect, Result } from "effect"
import { capabilityInfo } from "../../src/capabilities/catalog.ts"
import { meterReason, quoteReason } from "../../src/capabilities/pricing.ts"
import { type Metered, type ModelInfo, type Provider, ProviderFailure, type Quote } from "../../src/capabilities/Provider.ts"
import type { BuiltCapability, CapabilityIO } from "../../src/capabilities/schemas.ts"

/**
 * A capability provider whose every call is scripted: what it answers, what
 * the upstream reports it used (and so what the call costs), how long it
 * takes on the Clock, or how it fails. It plugs into the gateway like any
 * provider (`TestGateway.layer({ providers: [search] })`), so the real
 * pipeline quotes, holds, settles or releases around it, and it records
 * every input it received.
 *
 * Outcomes are taken from a queue, one per call; when the queue is empty
 * every call gets `otherwise` (default: succeed, metered at the quote).
 */

export type Input<C extends BuiltCapability> = CapabilityIO[C]["input"]
export type Output<C extends BuiltCapability> = CapabilityIO[C]["output"]
export type FailureReason = ProviderFailure["reason"]

/** What the upstream reports it used: tokens for `reason`, units of the price (queries, pages, …) otherwise. */
export type Usage =
  | { readonly promptTokens: number; readonly completionTokens: number }
  | { readonly units: number }

export interface Succeed<O> {
  readonly _tag: "Succeed"
  /** The answer (default: a minimal valid answer for the capability). */
  readonly output?: O | undefined
  /** The actual cost; wins over `usage` (default: from `usage`, else the quote). The pipeline charges at most the quote. */
  readonly actualMicroUsd?: bigint | undefined
  readonly usage?: Usage | undefined
  /** The model the upstream says it used (`reason`; default: the quoted one). */
  readonly model?: string | undefined
  /** Clock time the call takes before answering (default: none). */
  readonly latency?: Duration.Input | undefined
}

export interface Fail {
  readonly _tag: "Fail"
  readonly reason: FailureReason
  readonly message: string
  /** Clock time the call takes before failing (default: none). */
  readonly latency?: Duration.Input | undefined
}

/** The call never answers: only an interruption (a timeout, a cancelled caller) ends it. */
export interface Hang {
  readonly _tag: "Hang"
}

export type Outcome<O = never> = Succeed<O> | Fail | Hang

/** Succeeds; `{ usage }` meters from what the upstream reports, `{ actualMicroUsd }` sets the cost outright. */
export const succeed = <O = never>(options: Omit<Succeed<O>, "_tag"> = {}): Succeed<O> => ({ _tag: "Succeed", ...options })

/** Fails with a ProviderFailure of this reason (the gateway releases the hold and may try the next provider). */
export const fail = (
  reason: FailureReason,
  options: { readonly message?: string; readonly latency?: Duration.Input } = {}
): Fail => ({
  _tag: "Fail",
  reason,
  message: options.message ?? `scripted ${reason}`,
  ...(options.latency === undefined ? {} : { latency: options.latency })
})

export const hang: Hang = { _tag: "Hang" }

/** One call as the provider received it. */
export interface Call<C extends BuiltCapability> {
  readonly input: Input<C>
  readonly quote: Quote
  /** When the call reached the provider, by the Clock. */
  readonly at: Date
  readonly outcome: Outcome<Output<C>>
}

export interface Options<C extends BuiltCapability> {
  /** Default `fake-<capability>`. */
  readonly name?: string
  /** The flat price per unit, in micro-dollars (not `reason`); default 10,000 (one cent). */
  readonly priceMicroUsd?: bigint
  /** `reason`: the models offered, the first the default (default: one model, `fake-model`). */
  readonly models?: ReadonlyArray<ModelInfo>
  /** The quote of a call in micro-dollars (default: `reason` by the project's token bound, others the unit price). */
  readonly quote?: (input: Input<C>) => bigint
  /** Outcomes for the first calls, in order. */
  readonly script?: ReadonlyArray<Outcome<Output<C>>>
  /** What every call gets once the script has run out (default: `succeed()`). */
  readonly otherwise?: Outcome<Output<C>>
  /** What the provider says about working here (default: able). */
  readonly status?: Provider<C>["status"]
}

export interface FakeProvider<C extends BuiltCapability> extends Provider<C> {
  /** Every call received, oldest first. */
  readonly calls: ReadonlyArray<Call<C>>
  /** The inputs of those calls. */
  readonly inputs: ReadonlyArray<Input<C>>
  /** Scripted outcomes not used yet. */
  readonly remaining: number
  /**
   * Waits until `count` calls in all have reached the provider: for a call
   * forked into the background, before moving the clock under it.
   */
  readonly awaitCalls: (count: number) => Effect.Effect<void>
  /** Appends outcomes to the script. */
  readonly script: (...outcomes: ReadonlyArray<Outcome<Output<C>>>) => void
  /** From now on, what every call gets once the script has run out (e.g. `always(fail("unavailable"))`: the upstream is down). */
  readonly always: (outcome: Outcome<Output<C>>) => void
  /** Forgets the calls and the unused script, and restores `otherwise`. */
  readonly reset: () => void
}

export const FAKE_MODEL: ModelInfo = {
  id: "fake-model",
  inputPer1kMicroUsd: 1_000n,
  outputPer1kMicroUsd: 2_000n,
  maxTokens: 4096,
  defaultMaxTokens: 1000
}

const DEFAULT_PRICE_MICRO_USD = 10_000n

/** Most calls one fake remembers; a test that makes more has a runaway loop. */
export const MAX_RECORDED_CALLS = 10_000

/** A minimal answer that the capability's output schema accepts. */
const defaultOutput = <C extends BuiltCapability>(capability: C, input: Input<C>, usage: Usage | undefined): Output<C> => {
  const any = input as Record<string, unknown>
  const tokens = usage !== undefined && "promptTokens" in usage ? usage : { promptTokens: 0, completionTokens: 0 }
  const outputs: { readonly [K in BuiltCapability]: () => Output<K> } = {
    reason: () => ({
      content: "",
      finishReason: "stop",
      usage: { ...tokens, totalTokens: tokens.promptTokens + tokens.completionTokens }
    }),
    search: () => ({ results: [], query: String(any["query"]), totalResults: 0 }),
    read: () => ({
      url: String(any["url"]),
      title: null,
      byline: null,
      siteName: null,
      excerpt: null,
      text: "",
      markdown: "",
      length: 0
    }),
    scrape: () => ({ url: String(any["url"]), status: 200, contentType: "text/html", links: [], truncated: false }),
    execute: () => ({ stdout: "", stderr: "", exitCode: 0, timedOut: false, durationMs: 0, truncated: false }),
    imagine: () => ({ images: [], size: typeof any["size"] === "string" ? any["size"] : "1024x1024" }),
    speak: () => ({ audio: "", mimeType: "audio/wav", durationMs: null, characters: String(any["text"]).length }),
    transcribe: () => ({ text: "", language: typeof any["language"] === "string" ? any["language"] : null, durationSeconds: null }),
    email: () => ({ messageId: "<fake@spendgate.test>", accepted: [...(any["to"] as ReadonlyArray<string>)], rejected: [] }),
    sms: () => ({ sid: "SMfake", segments: 1, encoding: "GSM-7", status: "queued" })
  }
  return outputs[capability]() as Output<C>
}

/** A provider for `capability` whose calls follow the script. */
export const make = <C extends BuiltCapability>(capability: C, options: Options<C> = {}): FakeProvider<C> => {
  const name = options.name ?? `fake-${capability}`
  const models = capability === "reason" ? options.models ?? [FAKE_MODEL] : undefined
  const priceMicroUsd = options.priceMicroUsd ?? DEFAULT_PRICE_MICRO_USD
  const initialOtherwise: Outcome<Output<C>> = options.otherwise ?? succeed()
  let otherwise = initialOtherwise
  const queue: Array<Outcome<Output<C>>> = [...(options.script ?? [])]
  const calls: Array<Call<C>> = []
  const waiters = new Set<{ readonly count: number; readonly wake: () => void }>()

  const quote = (input: Input<C>): ReturnType<Provider<C>["quote"]> => {
    if (models !== undefined) {
      const quoted = quoteReason(models, input as Input<"reason">)
      if (Result.isFailure(quoted)) return quoted
      return options.quote === undefined ? quoted : Result.succeed({ ...quoted.success, microUsd: options.quote(input) })
    }
    return Result.succeed({ microUsd: options.quote === undefined ? priceMicroUsd : options.quote(input) })
  }

  const meter = (outcome: Succeed<Output<C>>, quoted: Quote): bigint => {
    if (outcome.actualMicroUsd !== undefined) return outcome.actualMicroUsd
    const usage = outcome.usage
    if (usage === undefined) return quoted.microUsd
    if ("units" in usage) return BigInt(Math.ceil(usage.units)) * priceMicroUsd
    const model = models?.find((m) => m.id === (outcome.model ?? quoted.model))
    if (model === undefined) throw new Error(`${name}: token usage was scripted, but ${capability} has no model ${outcome.model ?? quoted.model}`)
    return meterReason(model, usage)
  }

  const sleep = (latency: Duration.Input | undefined) => (latency === undefined ? Effect.void : Effect.sleep(latency))

  const run = (input: Input<C>, quoted: Quote): Effect.Effect<Metered<Output<C>>, ProviderFailure> =>
    Effect.gen(function*() {
      const outcome = queue.shift() ?? otherwise
      if (calls.length >= MAX_RECORDED_CALLS) {
        return yield* Effect.die(new Error(`${name} was called more than ${MAX_RECORDED_CALLS} times`))
      }
      calls.push({ input, quote: quoted, at: new Date(yield* Clock.currentTimeMillis), outcome })
      for (const waiter of waiters) {
        if (waiter.count <= calls.length) {
          waiters.delete(waiter)
          waiter.wake()
        }
      }
      switch (outcome._tag) {
        case "Hang":
          return yield* Effect.never
        case "Fail":
          yield* sleep(outcome.latency)
          return yield* new ProviderFailure({ provider: name, reason: outcome.reason, message: outcome.message })
        case "Succeed": {
          yield* sleep(outcome.latency)
          const actualMicroUsd = yield* Effect.sync(() => meter(outcome, quoted))
          return {
            output: outcome.output ?? defaultOutput(capability, input, outcome.usage),
            actualMicroUsd,
            model: outcome.model ?? quoted.model
          }
        }
      }
    })

  const provider = {
    name,
    capability,
    models,
    unitPrice: models === undefined ? { per: capabilityInfo[capability].per, priceMicroUsd } : undefined,
    status: options.status,
    quote,
    run,
    get calls() {
      return [...calls]
    },
    get inputs() {
      return calls.map((call) => call.input)
    },
    get remaining() {
      return queue.length
    },
    awaitCalls: (count: number) =>
      Effect.callback<void>((resume) => {
        if (calls.length >= count) return resume(Effect.void)
        const waiter = { count, wake: () => resume(Effect.void) }
        waiters.add(waiter)
        return Effect.sync(() => waiters.delete(waiter))
      }),
    script: (...outcomes: ReadonlyArray<Outcome<Output<C>>>) => {
      queue.push(...outcomes)
    },
    always: (outcome: Outcome<Output<C>>) => {
      otherwise = outcome
    },
    reset: () => {
      calls.length = 0
      queue.length = 0
      otherwise = initialOtherwise
    }
  }
  return provider as FakeProvider<C>
}
