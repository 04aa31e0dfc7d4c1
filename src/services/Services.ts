import { Clock, Context, Effect, Layer, Option } from "effect"
import type { Principal } from "../domain/Agent.ts"
import type { Conflict, Forbidden, NotFound, ValidationError } from "../domain/errors.ts"
import { L402Payments } from "../l402/Pay.ts"
import { OutboundHttp, type UnsafeUrl } from "../ports/Net.ts"
import { RegistryStore } from "../ports/RegistryStore.ts"
import { ServiceTransport } from "../ports/ServiceTransport.ts"
import type { Page, PageRequest } from "../ports/Store.ts"
import { Spend } from "../wallet/Spend.ts"
import { makeCatalogue } from "./catalogue.ts"
import { makeProxy, type ProxyCall, type ProxyError, type ProxyResult } from "./proxy.ts"
import { makeRegistry } from "./registry.ts"
import type { Service, Submission, SubmissionInput } from "./Service.ts"
import { type ChatFormat, type ChatModel, type ChatRequest, type ChatResult, makeChat, type StreamedChat } from "./chat.ts"
import { type EmbeddingModel, type EmbeddingsBody, type EmbeddingsResult, makeEmbeddings } from "./embeddings.ts"
import { makeProxyStream, type StreamedProxy, type StreamOptions } from "./stream.ts"

/**
 * Services reachable through the proxy, as one service: the catalogue
 * (catalogue.ts), the registry of community services (registry.ts), the proxy
 * (proxy.ts, priced by quote.ts) and its streamed calls (stream.ts).
 */

// The call shape and its result, where the HTTP adapter and the package entry point find them.
export { ProxyCall, proxyCapability } from "./proxy.ts"
export type { ProxyError, ProxyResult } from "./proxy.ts"
export type { StreamedProxy, StreamOptions } from "./stream.ts"
export { CHAT_CAPABILITY, DEFAULT_ANTHROPIC_VERSION } from "./chat.ts"
export type { ChatBody, ChatFormat, ChatModel, ChatRequest, ChatResult, StreamedChat } from "./chat.ts"
export { EMBEDDINGS_CAPABILITY } from "./embeddings.ts"
export type { EmbeddingModel, EmbeddingsBody, EmbeddingsResult } from "./embeddings.ts"

export class Services extends Context.Service<Services, {
  readonly list: Effect.Effect<ReadonlyArray<Service>>
  readonly get: (slug: string) => Effect.Effect<Service, NotFound>
  readonly submit: (principal: Principal, input: SubmissionInput) => Effect.Effect<Submission, Forbidden | ValidationError | UnsafeUrl | Conflict>
  readonly submissions: (principal: Principal, page: PageRequest) => Effect.Effect<Page<Submission>, Forbidden>
  /** Operator: every submission, by status. */
  readonly allSubmissions: (status: Submission["status"] | undefined, page: PageRequest) => Effect.Effect<Page<Submission>>
  readonly review: (id: string, status: "approved" | "rejected", note: string | null) => Effect.Effect<Submission, NotFound | Conflict>
  readonly proxy: (principal: Principal, slug: string, call: ProxyCall) => Effect.Effect<ProxyResult, ProxyError>
  /** A `stream: true` chat call: the answer streams through as it arrives. */
  readonly proxyStream: (principal: Principal, slug: string, call: ProxyCall, options?: StreamOptions) => Effect.Effect<StreamedProxy, ProxyError>
  /**
   * A chat call by model (chat.ts), in OpenAI's chat format or Anthropic's
   * Messages format: routed to the operator service that prices the model in
   * that format, then proxied.
   */
  readonly chat: (principal: Principal, request: ChatRequest) => Effect.Effect<ChatResult, ProxyError>
  /** The same with `stream: true`, in the stream shape of its format (no Spendgate events). */
  readonly chatStream: (principal: Principal, request: ChatRequest) => Effect.Effect<StreamedChat, ProxyError>
  /** The models a chat call in a format (default OpenAI's) may name. */
  readonly chatModels: (format?: ChatFormat) => Effect.Effect<ReadonlyArray<ChatModel>>
  /** Embeddings by model (embeddings.ts): routed to the operator service that prices the model, then proxied. */
  readonly embeddings: (principal: Principal, body: EmbeddingsBody) => Effect.Effect<EmbeddingsResult, ProxyError>
  /** The models an embeddings call may name. */
  readonly embeddingModels: Effect.Effect<ReadonlyArray<EmbeddingModel>>
}>()("spendgate/Services") {
  static readonly layer = Layer.effect(
    Services,
    Effect.gen(function*() {
      const transport = yield* ServiceTransport
      const registry = yield* RegistryStore
      const spend = yield* Spend
      const outbound = yield* Effect.serviceOption(OutboundHttp)
      const l402 = Option.getOrUndefined(yield* Effect.serviceOption(L402Payments))
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))
      const { operatorServices } = transport

      const catalogue = makeCatalogue({ operatorServices, registry })
      const submissions = makeRegistry({ registry, operatorServices, outbound, now })
      const proxy = makeProxy({ catalogue, transport, spend, l402 })
      const proxyStream = makeProxyStream({ catalogue, transport, spend })
      return Services.of({
        ...catalogue,
        ...submissions,
        proxy,
        proxyStream,
        ...makeChat({
          catalogue,
          proxy,
          proxyStream: (principal, slug, call, format) =>
            proxyStream(principal, slug, call, { trailer: format === "anthropic-messages" ? "anthropic" : "openai" })
        }),
        ...makeEmbeddings({ catalogue, proxy })
      })
    })
  )
}
