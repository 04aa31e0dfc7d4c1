import { Config, Effect, Option, Redacted, Result } from "effect"
import { check, type InvalidConfig, load, oneOf, refine, text } from "../config.ts"

/**
 * OpenTelemetry export (OTLP over HTTP), read from the standard
 * OpenTelemetry variables. Only the settings are read here: the exporter
 * itself (adapters/http/otlp.ts) is loaded by the server only when an
 * endpoint is set, so a server without one loads and sends nothing.
 *
 * - `OTEL_EXPORTER_OTLP_ENDPOINT`: the collector's base URL; traces go to
 *   `<base>/v1/traces`, metrics to `<base>/v1/metrics`, logs to `<base>/v1/logs`.
 * - `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `…_METRICS_ENDPOINT`,
 *   `…_LOGS_ENDPOINT`: one signal's full URL, used as given (it wins over the
 *   base URL); one of them alone exports that signal alone.
 * - `OTEL_TRACES_EXPORTER`, `OTEL_METRICS_EXPORTER`, `OTEL_LOGS_EXPORTER`:
 *   `none` turns that signal off (`otlp`, the default, keeps it).
 * - `OTEL_SDK_DISABLED=true`: nothing is exported.
 * - `OTEL_EXPORTER_OTLP_PROTOCOL`: `http/protobuf` (default) or `http/json`.
 * - `OTEL_EXPORTER_OTLP_HEADERS`: `name=value,name2=value2` (values
 *   percent-decoded), sent with every export, e.g. a vendor's API key.
 * - `OTEL_SERVICE_NAME` (default `spendgate`); `OTEL_RESOURCE_ATTRIBUTES`
 *   (`key=value,…`) adds resource attributes.
 * - `OTEL_BSP_SCHEDULE_DELAY` (spans, default 5000 ms),
 *   `OTEL_METRIC_EXPORT_INTERVAL` (default 60000 ms), `OTEL_BLRP_SCHEDULE_DELAY`
 *   (logs, default 1000 ms): how often each signal is sent, in milliseconds.
 */

export type OtlpProtocol = "http/protobuf" | "http/json"

export interface OtlpConfig {
  /** Full URL of each signal's endpoint; undefined: that signal is not exported. */
  readonly tracesUrl: string | undefined
  readonly metricsUrl: string | undefined
  readonly logsUrl: string | undefined
  readonly protocol: OtlpProtocol
  readonly serviceName: string
  /** OTEL_EXPORTER_OTLP_HEADERS, kept redacted (they often hold a vendor's key). */
  readonly headers: Redacted.Redacted<Record<string, string>> | undefined
  /** Export intervals in milliseconds; undefined: the exporter's default. */
  readonly tracesIntervalMs: number | undefined
  readonly metricsIntervalMs: number | undefined
  readonly logsIntervalMs: number | undefined
}

const url = (name: string): Config.Config<URL> =>
  text(name).pipe(refine(name, (value) => {
    try {
      const parsed = new URL(value)
      return parsed.protocol === "http:" || parsed.protocol === "https:"
        ? Result.succeed(parsed)
        : Result.fail("must be an http:// or https:// URL")
    } catch {
      return Result.fail("must be an http:// or https:// URL")
    }
  }))

/** `<base>/v1/<signal>`, as the OpenTelemetry specification builds it from the base endpoint. */
export const signalUrl = (base: URL, signal: "traces" | "metrics" | "logs"): string => {
  const copy = new URL(base.href)
  copy.pathname = `${copy.pathname.replace(/\/+$/, "")}/v1/${signal}`
  return copy.href
}

/**
 * `a=1,b=x%20y` -> `{ a: "1", b: "x y" }`; an entry without a name or `=` is
 * refused, and so is a value (as written or once percent-decoded) that an
 * HTTP header cannot carry: a control character (CR, LF, NUL, … ; a tab is
 * allowed) or a character beyond Latin-1. Accepted, such a value would make
 * every export fail, or split into headers of its own.
 */
export const parseOtlpHeaders = (value: string): Result.Result<Record<string, string>, string> => {
  const headers: Record<string, string> = {}
  for (const entry of value.split(",")) {
    if (entry.trim() === "") continue
    const at = entry.indexOf("=")
    const name = at < 0 ? "" : entry.slice(0, at).trim()
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
      return Result.fail("must be a comma-separated list of name=value")
    }
    let decoded: string
    try {
      decoded = decodeURIComponent(entry.slice(at + 1).trim())
    } catch {
      return Result.fail("has a value that is not valid percent-encoding")
    }
    if (/[\x00-\x08\x0a-\x1f\x7f]/.test(decoded)) {
      return Result.fail(`has a control character (such as CR, LF or NUL) in the value of ${name}, which an HTTP header cannot carry`)
    }
    if (/[^\x00-\xff]/.test(decoded)) {
      return Result.fail(`has a character beyond Latin-1 in the value of ${name}, which an HTTP header cannot carry`)
    }
    headers[name.toLowerCase()] = decoded
  }
  return Result.succeed(headers)
}

const milliseconds = (name: string) =>
  Config.option(Config.Int(name).pipe(check(name, (ms) => (ms >= 1 && ms <= 3_600_000) || "must be a whole number of milliseconds from 1 to 3600000")))

const exporterOn = (name: string) =>
  oneOf(name, ["otlp", "none"] as const).pipe(Config.withDefault<"otlp" | "none">("otlp"), Config.map((value) => value === "otlp"))

export const otlpConfig: Config.Config<Option.Option<OtlpConfig>> = Config.all({
  disabled: Config.Boolean("OTEL_SDK_DISABLED").pipe(Config.withDefault(false)),
  base: Config.option(url("OTEL_EXPORTER_OTLP_ENDPOINT")),
  traces: Config.option(url("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")),
  metrics: Config.option(url("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")),
  logs: Config.option(url("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")),
  tracesOn: exporterOn("OTEL_TRACES_EXPORTER"),
  metricsOn: exporterOn("OTEL_METRICS_EXPORTER"),
  logsOn: exporterOn("OTEL_LOGS_EXPORTER"),
  protocol: oneOf("OTEL_EXPORTER_OTLP_PROTOCOL", ["http/protobuf", "http/json"] as const).pipe(
    Config.withDefault<OtlpProtocol>("http/protobuf")
  ),
  headers: Config.option(text("OTEL_EXPORTER_OTLP_HEADERS").pipe(refine("OTEL_EXPORTER_OTLP_HEADERS", parseOtlpHeaders))),
  serviceName: text("OTEL_SERVICE_NAME").pipe(
    check("OTEL_SERVICE_NAME", (name) => name.length <= 200 || "must be at most 200 characters"),
    Config.withDefault("spendgate")
  ),
  tracesIntervalMs: milliseconds("OTEL_BSP_SCHEDULE_DELAY"),
  metricsIntervalMs: milliseconds("OTEL_METRIC_EXPORT_INTERVAL"),
  logsIntervalMs: milliseconds("OTEL_BLRP_SCHEDULE_DELAY")
}).pipe(Config.map((read): Option.Option<OtlpConfig> => {
  const endpoint = (own: Option.Option<URL>, on: boolean, signal: "traces" | "metrics" | "logs") =>
    !on ? undefined : Option.isSome(own)
    ? own.value.href
    : Option.isSome(read.base)
    ? signalUrl(read.base.value, signal)
    : undefined
  const tracesUrl = endpoint(read.traces, read.tracesOn, "traces")
  const metricsUrl = endpoint(read.metrics, read.metricsOn, "metrics")
  const logsUrl = endpoint(read.logs, read.logsOn, "logs")
  if (read.disabled || (tracesUrl === undefined && metricsUrl === undefined && logsUrl === undefined)) {
    return Option.none()
  }
  return Option.some({
    tracesUrl,
    metricsUrl,
    logsUrl,
    protocol: read.protocol,
    serviceName: read.serviceName,
    headers: Option.match(read.headers, { onNone: () => undefined, onSome: (headers) => Redacted.make(headers) }),
    tracesIntervalMs: Option.getOrUndefined(read.tracesIntervalMs),
    metricsIntervalMs: Option.getOrUndefined(read.metricsIntervalMs),
    logsIntervalMs: Option.getOrUndefined(read.logsIntervalMs)
  })
}))

/** Reads the OTLP settings; none when no endpoint is set (or OTEL_SDK_DISABLED=true). */
export const loadOtlpConfig: Effect.Effect<Option.Option<OtlpConfig>, InvalidConfig> = load(otlpConfig)

/** A URL as the log may show it: no user, password or query. */
const shown = (url: string | undefined): string => {
  if (url === undefined) return "off"
  const copy = new URL(url)
  copy.username = ""
  copy.password = ""
  copy.search = ""
  return copy.href
}

/** One line for the start-up log: where each signal goes (never the headers or credentials). */
export const describeOtlp = (config: Option.Option<OtlpConfig>): string =>
  Option.match(config, {
    onNone: () => "off (no OTEL_EXPORTER_OTLP_ENDPOINT, or OTEL_SDK_DISABLED=true)",
    onSome: (c) =>
      `${c.protocol}, service ${c.serviceName}; traces ${shown(c.tracesUrl)}, metrics ${shown(c.metricsUrl)}, logs ${
        shown(c.logsUrl)
      }`
  })
