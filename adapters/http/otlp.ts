import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Duration, Layer, Redacted } from "effect"
import { constTrue } from "effect/Function"
import { HttpClient } from "effect/http"
import * as OtlpExporter from "effect/observability/OtlpExporter"
import * as OtlpLogger from "effect/observability/OtlpLogger"
import * as OtlpMetrics from "effect/observability/OtlpMetrics"
import * as OtlpSerialization from "effect/observability/OtlpSerialization"
import * as OtlpTracer from "effect/observability/OtlpTracer"
import { packageVersion } from "../packageVersion.ts"
import type { OtlpConfig } from "./otlpConfig.ts"

/**
 * The OTLP exporters (effect/observability) for traces, metrics and logs,
 * over Node's HTTP client. The server loads this module only when an OTLP
 * endpoint is configured (adapters/http/serve.ts).
 *
 * - Traces: the spans the code opens with Effect's own tracing (the request
 *   in observability.ts, authentication, the spend pipeline's reserve,
 *   upstream call and settle in src/wallet/Spend.ts, and the `Effect.fn`
 *   spans of the core services).
 * - Metrics: the process's metric registry, the same series GET /metrics serves.
 * - Logs: every log line, beside the console's, with the trace and span ids
 *   of the span it was written in.
 *
 * Outgoing HTTP calls get no spans of their own and carry no trace headers:
 * their URLs may hold a caller's query or a webhook's secret path, and an
 * upstream provider has no business with the gateway's trace ids. The
 * upstream call's span (`Spend.upstream`) stands for them.
 */

/**
 * The resource's `service.version`: the package's version, from the sources
 * (adapters/http/) and from the build (dist/adapters/http/) alike.
 */
export const serviceVersion = (): string | undefined => packageVersion(import.meta.url)

const interval = (ms: number | undefined) => ms === undefined ? undefined : Duration.millis(ms)

export const otlpLayer = (config: OtlpConfig): Layer.Layer<OtlpExporter.Flusher> => {
  const version = serviceVersion()
  const resource = { serviceName: config.serviceName, ...(version === undefined ? {} : { serviceVersion: version }) }
  const headers = config.headers === undefined ? undefined : Redacted.value(config.headers)
  const signals: Array<Layer.Layer<OtlpExporter.Flusher, never, HttpClient.HttpClient | OtlpSerialization.OtlpSerialization>> = [
    OtlpExporter.layerFlusher
  ]
  if (config.tracesUrl !== undefined) {
    signals.push(OtlpTracer.layer({ url: config.tracesUrl, resource, headers, exportInterval: interval(config.tracesIntervalMs) }))
  }
  if (config.metricsUrl !== undefined) {
    signals.push(OtlpMetrics.layer({ url: config.metricsUrl, resource, headers, exportInterval: interval(config.metricsIntervalMs) }))
  }
  if (config.logsUrl !== undefined) {
    signals.push(OtlpLogger.layer({
      url: config.logsUrl,
      resource,
      headers,
      exportInterval: interval(config.logsIntervalMs),
      // Beside the console logger, not in its place.
      mergeWithExisting: true
    }))
  }
  return Layer.mergeAll(
    Layer.succeed(HttpClient.TracerDisabledWhen)(constTrue),
    Layer.succeed(HttpClient.TracerPropagationEnabled)(false),
    ...signals
  ).pipe(
    Layer.provide(config.protocol === "http/json" ? OtlpSerialization.layerJson : OtlpSerialization.layerProtobuf),
    Layer.provide(NodeHttpClient.layerUndici)
  )
}
