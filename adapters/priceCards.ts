import { Effect, Result, Schema } from "effect"
import { readFileSync } from "node:fs"
import type { ModelInfo, UnitPrice } from "../src/capabilities/Provider.ts"
import { ImageSize } from "../src/capabilities/schemas.ts"
import { Capability } from "../src/domain/Capability.ts"
import { centsToMicroUsd } from "../src/domain/Money.ts"
import { InvalidConfig } from "./config.ts"

/**
 * Price cards: config/prices.json ships defaults; PRICES_FILE (same shape)
 * replaces entries by provider name. Amounts are USD cents with at most 4
 * decimals, converted to micro-dollars exactly.
 */

const Cents = Schema.Number.check(Schema.isGreaterThanOrEqualTo(0), Schema.isLessThanOrEqualTo(1_000_000))

const ModelCard = Schema.Struct({
  id: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(200)),
  inputPer1kUsdCents: Cents,
  outputPer1kUsdCents: Cents,
  maxTokens: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 1_000_000 })),
  defaultMaxTokens: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 1_000_000 }))
})

const EmbeddingCard = Schema.Struct({
  id: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(200)),
  inputPer1kUsdCents: Cents,
  dimensions: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 65_536 }))
})

const PriceCard = Schema.Union([
  Schema.Struct({ capability: Schema.Literal("reason"), models: Schema.Array(ModelCard).check(Schema.isMinLength(1)) }),
  Schema.Struct({
    capability: Schema.Literal("imagine"),
    model: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(200)),
    per: Schema.Literal("image"),
    sizes: Schema.Record(Schema.String, Cents).check(
      Schema.isMinProperties(1),
      Schema.makeFilter((sizes: Record<string, number>) => {
        const unknown = Object.keys(sizes).filter((size) => !(ImageSize.literals as ReadonlyArray<string>).includes(size))
        return unknown.length === 0 ? undefined : `Unknown image size ${unknown[0]}`
      })
    )
  }),
  Schema.Struct({
    capability: Capability,
    per: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(32)),
    priceUsdCents: Cents
  }),
  /** Embedding models (OpenAI's `POST /embeddings`), per 1000 input tokens; they count as `reason`. */
  Schema.Struct({ capability: Schema.Literal("reason"), embeddings: Schema.Array(EmbeddingCard).check(Schema.isMinLength(1)) })
])

const PriceFile = Schema.Record(Schema.String, Schema.Unknown)

export type PriceEntry =
  | { readonly kind: "models"; readonly models: ReadonlyArray<ModelInfo> }
  | { readonly kind: "images"; readonly model: string; readonly sizes: Readonly<Partial<Record<typeof ImageSize.Type, bigint>>> }
  | { readonly kind: "unit"; readonly capability: Capability; readonly unitPrice: UnitPrice }
  | { readonly kind: "embeddings"; readonly models: ReadonlyArray<EmbeddingModelPrice> }

export interface EmbeddingModelPrice {
  readonly id: string
  readonly inputPer1kMicroUsd: bigint
  readonly dimensions: number
}

const micro = (cents: number, where: string): Effect.Effect<bigint, InvalidConfig> => {
  const converted = centsToMicroUsd(cents)
  return Result.isSuccess(converted)
    ? Effect.succeed(converted.success)
    : Effect.fail(new InvalidConfig({ message: `Invalid price card: ${where}: ${converted.failure.message}` }))
}

const parseEntry = (name: string, raw: unknown): Effect.Effect<PriceEntry, InvalidConfig> =>
  Effect.gen(function*() {
    const card = yield* Schema.decodeUnknownEffect(PriceCard)(raw).pipe(
      Effect.mapError((error) => new InvalidConfig({ message: `Invalid price card "${name}": ${error.message}` }))
    )
    if ("embeddings" in card) {
      const models: Array<EmbeddingModelPrice> = []
      for (const m of card.embeddings) {
        models.push({ id: m.id, inputPer1kMicroUsd: yield* micro(m.inputPer1kUsdCents, `${name}/${m.id}`), dimensions: m.dimensions })
      }
      return { kind: "embeddings", models } as const
    }
    if ("sizes" in card) {
      const sizes: Partial<Record<typeof ImageSize.Type, bigint>> = {}
      for (const [size, cents] of Object.entries(card.sizes) as Array<[typeof ImageSize.Type, number]>) {
        sizes[size] = yield* micro(cents, `${name}/${size}`)
      }
      return { kind: "images", model: card.model, sizes } as const
    }
    if ("models" in card) {
      const models: Array<ModelInfo> = []
      for (const m of card.models) {
        if (m.defaultMaxTokens > m.maxTokens) {
          return yield* new InvalidConfig({ message: `Invalid price card "${name}": ${m.id}: defaultMaxTokens is above maxTokens` })
        }
        models.push({
          id: m.id,
          inputPer1kMicroUsd: yield* micro(m.inputPer1kUsdCents, `${name}/${m.id}`),
          outputPer1kMicroUsd: yield* micro(m.outputPer1kUsdCents, `${name}/${m.id}`),
          maxTokens: m.maxTokens,
          defaultMaxTokens: m.defaultMaxTokens
        })
      }
      return { kind: "models", models } as const
    }
    return {
      kind: "unit",
      capability: card.capability,
      unitPrice: { per: card.per, priceMicroUsd: yield* micro(card.priceUsdCents, name) }
    } as const
  })

const readJson = (path: string): Effect.Effect<Record<string, unknown>, InvalidConfig> =>
  Effect.try({
    try: () => JSON.parse(readFileSync(path, "utf8")) as unknown,
    catch: (error) => new InvalidConfig({ message: `Invalid price file ${path}: ${error instanceof Error ? error.message : String(error)}` })
  }).pipe(
    Effect.flatMap((json) =>
      Schema.decodeUnknownEffect(PriceFile)(json).pipe(
        Effect.mapError(() => new InvalidConfig({ message: `Invalid price file ${path}: expected an object keyed by provider` }))
      )
    )
  )

export const DEFAULT_PRICES_FILE = new URL("../config/prices.json", import.meta.url).pathname

/** The shipped cards, with the operator's file (if any) laid over them by provider name. */
export const loadPriceCards = (overridePath: string | undefined): Effect.Effect<ReadonlyMap<string, PriceEntry>, InvalidConfig> =>
  Effect.gen(function*() {
    const merged: Record<string, unknown> = { ...(yield* readJson(DEFAULT_PRICES_FILE)) }
    if (overridePath !== undefined) Object.assign(merged, yield* readJson(overridePath))
    const cards = new Map<string, PriceEntry>()
    for (const [name, raw] of Object.entries(merged)) {
      if (name.startsWith("$")) continue
      cards.set(name, yield* parseEntry(name, raw))
    }
    return cards
  })
