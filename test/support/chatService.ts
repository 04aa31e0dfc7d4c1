import { Redacted } from "effect"
import type { OperatorService } from "../../adapters/services/transport.ts"

/**
 * An operator service with one token-priced endpoint in OpenAI's chat format,
 * `POST /v1/chat/completions`, for the proxy's tests against a local upstream:
 * model `m-1` at 1,000 µUSD per 1,000 prompt tokens and 2,000 µUSD per 1,000
 * completion tokens, at most 1,000 completion tokens (100 when the call names
 * none), reached with `Authorization: Bearer <key>`.
 */
export const operatorChatService = (slug: string, name: string, baseUrl: string, key: string): OperatorService => ({
  service: {
    slug,
    name,
    description: "test",
    baseUrl,
    capabilities: ["reason"],
    origin: "operator",
    endpoints: [{
      path: "/v1/chat/completions",
      method: "POST",
      description: "chat",
      price: {
        kind: "tokens",
        format: "openai-chat",
        models: [{ id: "m-1", inputPer1kMicroUsd: 1_000n, outputPer1kMicroUsd: 2_000n, maxTokens: 1000, defaultMaxTokens: 100 }]
      }
    }]
  },
  credentials: { authorization: Redacted.make(`Bearer ${key}`) }
})
