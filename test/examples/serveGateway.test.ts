import { Effect, Layer, Result } from "effect"
import { HttpServer } from "effect/http"
import { type Provider, Spendgate } from "spendgate"
import { serveGateway } from "spendgate/server"
import { expect, it } from "vitest"

/**
 * `spendgate/server`'s serveGateway: the HTTP API inside the embedder's
 * process, over a ready layer, answering real HTTP on a free port.
 */

const provider = {
  name: "own-search",
  capability: "search" as const,
  unitPrice: { per: "query", priceMicroUsd: 2_000n },
  quote: () => Result.succeed({ microUsd: 2_000n }),
  run: (input: { readonly query: string }) =>
    Effect.succeed({ output: { results: [], query: input.query, totalResults: 0 }, actualMicroUsd: 1_500n })
} satisfies Provider<"search">

it("serves the API over Spendgate.memory(): signup, the wallet, the catalogue with the given provider, a refused key", async () => {
  const program = Effect.gen(function*() {
    const server = yield* HttpServer.HttpServer
    if (server.address._tag === "UnixPathAddress") return yield* Effect.die("not TCP")
    const base = `http://127.0.0.1:${server.address.port}`
    return yield* Effect.promise(async () => {
      const signup = await fetch(`${base}/v1/signup`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ name: "operator" })
      })
      const { apiKey } = (await signup.json()) as { apiKey: string }
      const auth = { authorization: `Bearer ${apiKey}` }
      const wallet = await fetch(`${base}/v1/wallet`, { headers: auth })
      const capabilities = (await (await fetch(`${base}/v1/capabilities`, { headers: auth })).json()) as ReadonlyArray<{
        name: string
      }>
      const refused = await fetch(`${base}/v1/wallet`, { headers: { authorization: "Bearer sk_agt_nope" } })
      return {
        signup: signup.status,
        wallet: wallet.status,
        ownSearch: JSON.stringify(capabilities).includes("own-search"),
        refused: refused.status
      }
    })
  })
  const app = serveGateway(Spendgate.memory({ providers: [provider] }), {
    port: 0,
    host: "127.0.0.1",
    announce: false,
    providers: [provider]
  })
  const result = await Effect.runPromise(Effect.scoped(Effect.flatMap(Layer.build(app), (context) => Effect.provideContext(program, context))))
  expect(result).toEqual({ signup: 201, wallet: 200, ownSearch: true, refused: 401 })
})
