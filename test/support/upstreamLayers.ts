import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Layer } from "effect"
import { UpstreamClient } from "../../adapters/net/upstreamClient.ts"

/**
 * What providers and the proxy's transport call upstreams with, as the
 * server provides it: the upstream client (metered exchanges) and Effect's
 * undici client (streamed answers).
 */
export const upstreamLayers = Layer.mergeAll(UpstreamClient.layer, NodeHttpClient.layerUndici)
