import { ConfigProvider, Effect, Exit, Option, Redacted } from "effect"
import { describe, expect, it } from "vitest"
import { describeOtlp, loadOtlpConfig, type OtlpConfig, parseOtlpHeaders, signalUrl } from "../../adapters/http/otlpConfig.ts"

/** The OTLP settings read from the standard OpenTelemetry variables. */

const read = (env: Record<string, string>) =>
  Effect.runPromiseExit(loadOtlpConfig.pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnvRecord(env)))))

const some = async (env: Record<string, string>): Promise<OtlpConfig> => {
  const exit = await read(env)
  if (!Exit.isSuccess(exit)) throw new Error(`refused: ${JSON.stringify(exit.cause)}`)
  if (Option.isNone(exit.value)) throw new Error("off")
  return exit.value.value
}

const refusal = async (env: Record<string, string>): Promise<string> => {
  const exit = await read(env)
  if (Exit.isSuccess(exit)) throw new Error("accepted")
  return String((exit.cause.reasons[0] as { error?: { message?: string } }).error?.message)
}

describe("OTLP settings", () => {
  it("off without any endpoint, or with OTEL_SDK_DISABLED=true", async () => {
    expect(await read({})).toEqual(Exit.succeed(Option.none()))
    expect(await read({ OTEL_SERVICE_NAME: "x", OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" })).toEqual(Exit.succeed(Option.none()))
    expect(await read({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" })).toEqual(
      Exit.succeed(Option.none())
    )
    expect(describeOtlp(Option.none())).toMatch(/^off/)
  })

  it("the base endpoint gives each signal its /v1 path; defaults: protobuf, service spendgate", async () => {
    const config = await some({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" })
    expect(config).toMatchObject({
      tracesUrl: "http://collector:4318/v1/traces",
      metricsUrl: "http://collector:4318/v1/metrics",
      logsUrl: "http://collector:4318/v1/logs",
      protocol: "http/protobuf",
      serviceName: "spendgate",
      headers: undefined,
      tracesIntervalMs: undefined
    })
    expect(signalUrl(new URL("https://otlp.example.com/prefix/"), "logs")).toBe("https://otlp.example.com/prefix/v1/logs")
  })

  it("a signal's own endpoint is used as given and wins; `none` turns a signal off; a signal alone", async () => {
    expect(await some({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://base:4318",
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://traces:9999/custom",
      OTEL_LOGS_EXPORTER: "none"
    })).toMatchObject({ tracesUrl: "http://traces:9999/custom", metricsUrl: "http://base:4318/v1/metrics", logsUrl: undefined })
    expect(await some({ OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: "http://m:1/x" })).toMatchObject({
      tracesUrl: undefined,
      metricsUrl: "http://m:1/x",
      logsUrl: undefined
    })
  })

  it("headers, protocol, service name and intervals", async () => {
    const config = await some({
      OTEL_EXPORTER_OTLP_ENDPOINT: "https://user:secret@collector/",
      OTEL_EXPORTER_OTLP_HEADERS: "api-key=abc%20def, X-Tenant=t1",
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_SERVICE_NAME: "gateway-eu",
      OTEL_BSP_SCHEDULE_DELAY: "250",
      OTEL_METRIC_EXPORT_INTERVAL: "10000",
      OTEL_BLRP_SCHEDULE_DELAY: "500"
    })
    expect(Redacted.value(config.headers!)).toEqual({ "api-key": "abc def", "x-tenant": "t1" })
    expect(config).toMatchObject({ protocol: "http/json", serviceName: "gateway-eu", tracesIntervalMs: 250, metricsIntervalMs: 10_000, logsIntervalMs: 500 })
    // The start-up line shows neither the headers nor the URL's credentials.
    const line = describeOtlp(Option.some(config))
    expect(line).toContain("traces https://collector/v1/traces")
    expect(line).not.toMatch(/secret|abc|user/)
  })

  it("refuses what it cannot use, naming the variable", async () => {
    expect(await refusal({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" })).toBe(
      "Invalid configuration: OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL"
    )
    expect(await refusal({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toBe(
      "Invalid configuration: OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or http/json"
    )
    expect(await refusal({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c", OTEL_EXPORTER_OTLP_HEADERS: "novalue" })).toBe(
      "Invalid configuration: OTEL_EXPORTER_OTLP_HEADERS must be a comma-separated list of name=value"
    )
    expect(await refusal({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c", OTEL_BSP_SCHEDULE_DELAY: "0" })).toContain(
      "OTEL_BSP_SCHEDULE_DELAY must be a whole number of milliseconds"
    )
    expect(await refusal({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c", OTEL_TRACES_EXPORTER: "zipkin" })).toBe(
      "Invalid configuration: OTEL_TRACES_EXPORTER must be otlp or none"
    )
    expect(parseOtlpHeaders("a=%E0%A4%A")._tag).toBe("Failure")
  })

  it("refuses a header value an HTTP header cannot carry: a control character, as written or percent-encoded", async () => {
    const control = "Invalid configuration: OTEL_EXPORTER_OTLP_HEADERS has a control character (such as CR, LF or NUL) in the value of"
    for (
      const headers of [
        "api-key=abc%0D%0AX-Injected: 1",
        "api-key=abc\r\nX-Injected: 1",
        "api-key=abc\nX-Injected: 1",
        "api-key=abc%0Adef",
        "api-key=abc%0Ddef",
        "api-key=abc%00def",
        "api-key=abc\u0000def",
        "api-key=abc%1Bdef",
        "api-key=abc%7Fdef",
        "x-tenant=t1,api-key=%0A"
      ]
    ) {
      expect(await refusal({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c", OTEL_EXPORTER_OTLP_HEADERS: headers }), headers).toBe(
        `${control} api-key, which an HTTP header cannot carry`
      )
    }
    expect(await refusal({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c", OTEL_EXPORTER_OTLP_HEADERS: "api-key=%E2%82%AC1" })).toBe(
      "Invalid configuration: OTEL_EXPORTER_OTLP_HEADERS has a character beyond Latin-1 in the value of api-key, which an HTTP header cannot carry"
    )
    // What a header may carry: a tab inside the value, Latin-1, percent-encoded spaces and commas.
    const config = await some({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c", OTEL_EXPORTER_OTLP_HEADERS: "a=x%09y,b=caf%C3%A9,c=1%2C2%203" })
    expect(Redacted.value(config.headers!)).toEqual({ a: "x\ty", b: "café", c: "1,2 3" })
  })
})
