import { Cause, Effect, Exit } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { DEFAULT_PRICES_FILE, loadPriceCards, type PriceEntry } from "../../adapters/priceCards.ts"
import type { ModelInfo } from "../../src/capabilities/Provider.ts"

/**
 * Price cards: the shipped catalogue (config/prices.json) and an operator's
 * PRICES_FILE laid over it by provider name. The catalogue is dated and
 * sane; the new model fields (cached input, cache writes, context window)
 * are read exactly, the old card shape still loads, and a bad value stops
 * start-up with an InvalidConfig naming the card and the model.
 */

const dir = mkdtempSync(join(tmpdir(), "spendgate-prices-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

let files = 0
const file = (json: unknown) => {
  const path = join(dir, `prices-${files++}.json`)
  writeFileSync(path, typeof json === "string" ? json : JSON.stringify(json))
  return path
}

const load = (override?: unknown) => Effect.runPromiseExit(loadPriceCards(override === undefined ? undefined : file(override)))

const loaded = async (override?: unknown): Promise<ReadonlyMap<string, PriceEntry>> => {
  const exit = await load(override)
  if (Exit.isFailure(exit)) throw new Error(`expected the cards to load: ${Cause.pretty(exit.cause)}`)
  return exit.value
}

const refusal = async (override: unknown): Promise<string> => {
  const exit = await load(override)
  if (Exit.isSuccess(exit)) throw new Error("expected the cards to be refused")
  const error = Cause.squash(exit.cause) as { readonly _tag?: string; readonly message?: string }
  expect(error._tag).toBe("InvalidConfig")
  return error.message ?? ""
}

const modelsOf = (cards: ReadonlyMap<string, PriceEntry>, name: string): ReadonlyArray<ModelInfo> => {
  const card = cards.get(name)
  if (card?.kind !== "models") throw new Error(`no reason card ${name}`)
  return card.models
}

const oldShape = { id: "m-old", inputPer1kUsdCents: 0.1, outputPer1kUsdCents: 0.2, maxTokens: 4096, defaultMaxTokens: 512 }
const reasonCard = (...models: ReadonlyArray<Record<string, unknown>>) => ({ capability: "reason", models })

describe("the shipped catalogue", () => {
  const raw = JSON.parse(readFileSync(DEFAULT_PRICES_FILE, "utf8")) as Record<string, unknown>

  it("is dated, and every reason card says where its figures come from", () => {
    expect(raw["$updated"]).toMatch(/^\d{4}-\d{2}-\d{2}$/)
    expect(Number.isNaN(Date.parse(raw["$updated"] as string))).toBe(false)
    const reasonCards = Object.entries(raw).filter(([, card]) => (card as { capability?: string }).capability === "reason")
    expect(reasonCards.map(([name]) => name)).toEqual(expect.arrayContaining(["openai", "openrouter", "groq", "local", "anthropic"]))
    for (const [name, card] of reasonCards) {
      expect(typeof (card as { $sources?: unknown }).$sources, name).toBe("string")
    }
  })

  it("every reason model: cached ≤ input, defaultMaxTokens ≤ maxTokens ≤ contextTokens, ids unique", async () => {
    const cards = await loaded()
    let checked = 0
    for (const [name, card] of cards) {
      if (card.kind !== "models") continue
      expect(new Set(card.models.map((m) => m.id)).size, name).toBe(card.models.length)
      for (const m of card.models) {
        const where = `${name}/${m.id}`
        expect(m.inputPer1kMicroUsd, where).toBeGreaterThan(0n)
        expect(m.outputPer1kMicroUsd, where).toBeGreaterThan(0n)
        if (m.cachedInputPer1kMicroUsd !== undefined) expect(m.cachedInputPer1kMicroUsd, where).toBeLessThanOrEqual(m.inputPer1kMicroUsd)
        if (m.cacheWritePer1kMicroUsd !== undefined) expect(m.cacheWritePer1kMicroUsd, where).toBeGreaterThanOrEqual(m.inputPer1kMicroUsd)
        expect(m.defaultMaxTokens, where).toBeLessThanOrEqual(m.maxTokens)
        expect(m.contextTokens, `${where} has a context window`).toBeDefined()
        expect(m.maxTokens, where).toBeLessThanOrEqual(m.contextTokens!)
        checked++
      }
    }
    expect(checked).toBeGreaterThanOrEqual(30)
  })

  it("covers the models people use, at the published prices where confirmed", async () => {
    const cards = await loaded()
    const ids = (name: string) => modelsOf(cards, name).map((m) => m.id)
    expect(ids("openai")).toEqual(expect.arrayContaining(["gpt-5", "gpt-5-mini", "gpt-5-nano", "gpt-4.1", "gpt-4.1-mini", "gpt-4o", "gpt-4o-mini", "o3", "o4-mini"]))
    expect(ids("anthropic")).toEqual(expect.arrayContaining(["claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1", "claude-3-5-haiku-latest"]))
    expect(ids("groq")).toEqual(expect.arrayContaining(["llama-3.1-8b-instant", "llama-3.3-70b-versatile", "openai/gpt-oss-120b"]))
    expect(ids("openrouter")).toEqual(expect.arrayContaining(["openai/gpt-5", "anthropic/claude-sonnet-4.5", "meta-llama/llama-3.3-70b-instruct", "deepseek/deepseek-chat-v3-0324"]))
    // $1.25 / $0.125 / $10 per 1M tokens = 1250 / 125 / 10000 µUSD per 1000 tokens.
    const gpt5 = modelsOf(cards, "openai").find((m) => m.id === "gpt-5")!
    expect([gpt5.inputPer1kMicroUsd, gpt5.cachedInputPer1kMicroUsd, gpt5.outputPer1kMicroUsd]).toEqual([1_250n, 125n, 10_000n])
    // Sonnet: $3 input, $0.30 cache hits, $3.75 5-minute cache writes, $15 output per 1M tokens.
    const sonnet = modelsOf(cards, "anthropic").find((m) => m.id === "claude-sonnet-4-5")!
    expect([sonnet.inputPer1kMicroUsd, sonnet.cachedInputPer1kMicroUsd, sonnet.cacheWritePer1kMicroUsd, sonnet.outputPer1kMicroUsd])
      .toEqual([3_000n, 300n, 3_750n, 15_000n])
  })

  it("keeps each reason card's default model (the first) as it was", async () => {
    const cards = await loaded()
    expect(["openai", "openrouter", "groq", "local", "anthropic"].map((name) => modelsOf(cards, name)[0]!.id))
      .toEqual(["gpt-4o-mini", "openai/gpt-4o-mini", "llama-3.1-8b-instant", "local-model", "claude-3-5-haiku-latest"])
  })
})

describe("PRICES_FILE", () => {
  it("replaces cards by provider name; the old card shape (no cache prices, no context window) still loads", async () => {
    const cards = await loaded({ openai: reasonCard(oldShape) })
    expect(modelsOf(cards, "openai")).toEqual([
      { id: "m-old", inputPer1kMicroUsd: 1_000n, outputPer1kMicroUsd: 2_000n, maxTokens: 4096, defaultMaxTokens: 512 }
    ])
    // Other cards stay the shipped ones.
    expect(modelsOf(cards, "anthropic")[0]!.id).toBe("claude-3-5-haiku-latest")
  })

  it("reads the new fields exactly, and notes ($…) anywhere", async () => {
    const cards = await loaded({
      $updated: "2026-01-01",
      local: {
        ...reasonCard({
          ...oldShape,
          cachedInputPer1kUsdCents: 0.0125,
          cacheWritePer1kUsdCents: 0.1234,
          contextTokens: 32_768,
          $note: "measured on our own hardware"
        }),
        $sources: "our electricity bill",
        $updated: "2026-01-01"
      }
    })
    expect(modelsOf(cards, "local")).toEqual([{
      id: "m-old",
      inputPer1kMicroUsd: 1_000n,
      outputPer1kMicroUsd: 2_000n,
      cachedInputPer1kMicroUsd: 125n,
      cacheWritePer1kMicroUsd: 1_234n,
      contextTokens: 32_768,
      maxTokens: 4096,
      defaultMaxTokens: 512
    }])
    expect(cards.has("$updated")).toBe(false)
  })

  it("a bad value is an InvalidConfig naming the card and the model", async () => {
    const cases: ReadonlyArray<readonly [Record<string, unknown>, ReadonlyArray<string>]> = [
      [{ ...oldShape, cachedInputPer1kUsdCents: 0.2 }, ["\"openai\"", "m-old", "cachedInputPer1kUsdCents is above inputPer1kUsdCents"]],
      [{ ...oldShape, contextTokens: 1000 }, ["\"openai\"", "m-old", "above contextTokens"]],
      [{ ...oldShape, defaultMaxTokens: 8192 }, ["\"openai\"", "m-old", "defaultMaxTokens is above maxTokens"]],
      [{ ...oldShape, cachedInputPer1kUsdCents: -1 }, ["\"openai\""]],
      [{ ...oldShape, cachedInputPer1kUsdCents: "0.01" }, ["\"openai\""]],
      [{ ...oldShape, contextTokens: 1.5 }, ["\"openai\""]],
      [{ ...oldShape, contextTokens: 0 }, ["\"openai\""]],
      [{ ...oldShape, cacheWritePer1kUsdCents: 0.00001 }, ["openai/m-old"]]
    ]
    for (const [model, says] of cases) {
      const message = await refusal({ openai: reasonCard(model) })
      for (const part of says) expect(message, JSON.stringify(model)).toContain(part)
    }
    expect(await refusal({ openai: reasonCard(oldShape, oldShape) })).toContain("listed twice")
  })
})
