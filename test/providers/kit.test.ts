import { upstreamLayers } from "../support/upstreamLayers.ts"
import type { UpstreamClient } from "../../adapters/net/upstreamClient.ts"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Redacted } from "effect"
import * as Brave from "../../adapters/providers/search/brave.ts"
import * as BuiltinRead from "../../adapters/providers/read/builtin.ts"
import * as Jina from "../../adapters/providers/read/jina.ts"
import * as BuiltinScrape from "../../adapters/providers/scrape/builtin.ts"
import * as Firecrawl from "../../adapters/providers/scrape/firecrawl.ts"
import type { UnitPrice } from "../../src/capabilities/Provider.ts"
import type { OutboundHttp } from "../../src/ports/Net.ts"
import { testOutboundHttp } from "./pages.ts"

const perQuery: UnitPrice = { per: "query", priceMicroUsd: 1_000n }
const perPage: UnitPrice = { per: "page", priceMicroUsd: 1_000n }
const negative: UnitPrice = { per: "page", priceMicroUsd: -1n }
const key = Redacted.make("test-key-0123456789")

const dies = <A, E>(effect: Effect.Effect<A, E, never>) =>
  Effect.map(Effect.exit(effect), (exit) => Exit.isFailure(exit) && Cause.hasDies(exit.cause))

describe("one price checker for every provider", () => {
  it.effect("a page provider refuses a price card that is not per page, or is negative", () =>
    Effect.gen(function*() {
      const layers = Layer.mergeAll(testOutboundHttp, upstreamLayers)
      const page: ReadonlyArray<readonly [string, (unitPrice: UnitPrice) => Effect.Effect<unknown, never, OutboundHttp | UpstreamClient>]> = [
        ["readability", (unitPrice) => BuiltinRead.make({ unitPrice })],
        ["scraper", (unitPrice) => BuiltinScrape.make({ unitPrice })],
        ["jina", (unitPrice) => Jina.make({ unitPrice, apiKey: key })],
        ["firecrawl", (unitPrice) => Firecrawl.make({ unitPrice, apiKey: key })]
      ]
      for (const [name, make] of page) {
        const build = (unitPrice: UnitPrice) => dies(Effect.provide(make(unitPrice), layers))
        assert.isTrue(yield* build(perQuery), `${name}: a price per query is refused`)
        assert.isTrue(yield* build(negative), `${name}: a negative price is refused`)
        assert.isFalse(yield* build(perPage), `${name}: a price per page is taken`)
      }
    }))

  it.effect("a search provider refuses a price card that is not per query", () =>
    Effect.gen(function*() {
      const build = (unitPrice: UnitPrice) =>
        dies(Brave.make({ apiKey: key, unitPrice }).pipe(Effect.provide(upstreamLayers)))
      assert.isTrue(yield* build(perPage))
      assert.isFalse(yield* build(perQuery))
    }))
})
