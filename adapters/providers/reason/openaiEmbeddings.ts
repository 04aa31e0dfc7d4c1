/**
 * OpenAI's embeddings (`POST {OPENAI_BASE_URL}/embeddings`) with the
 * operator's OPENAI_API_KEY, priced by the `openai-embeddings` price card
 * (per 1000 input tokens for each model, with its vector length). Not a
 * capability provider: an upstream the proxy reaches as the operator
 * service `openai-embeddings`, counted as the capability `reason`, which the
 * OpenAI-compatible `POST /v1/embeddings` routes to by model
 * (src/services/embeddings.ts; priced by src/services/embeddingsQuote.ts).
 */
import { Effect, Option, Redacted } from "effect"
import { env, envOr, type ProviderConfig } from "../kit/config.ts"

export const SLUG = "openai-embeddings"
export const EMBEDDINGS_PATH = "/embeddings"
export const DEFAULT_BASE_URL = "https://api.openai.com/v1"

export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    const key = yield* env("OPENAI_API_KEY")
    const card = cards.get(SLUG)
    if (Option.isNone(key) || card?.kind !== "embeddings") return { providers: [], services: [] }
    const baseUrl = yield* envOr("OPENAI_BASE_URL", DEFAULT_BASE_URL)
    return {
      providers: [],
      services: [{
        service: {
          slug: SLUG,
          name: "OpenAI embeddings",
          description: "OpenAI embeddings with the operator's credentials, per 1000 input tokens",
          baseUrl,
          capabilities: ["reason"],
          origin: "operator",
          endpoints: [{
            path: EMBEDDINGS_PATH,
            method: "POST",
            description: "Create embeddings",
            price: { kind: "embeddings", models: card.models }
          }]
        },
        credentials: { authorization: Redacted.make(`Bearer ${key.value}`) }
      }]
    }
  })
