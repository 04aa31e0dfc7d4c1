import { HttpApi } from "effect/http-api"
import { describe, expect, it } from "vitest"
import { Api } from "../../adapters/http/Api.ts"
import { elideIds, requestIdFor, routeResolver } from "../../adapters/http/observability.ts"
import { prng } from "../support/prng.ts"

/**
 * The resolver as it was first written, one pattern per template tried in
 * rank order: the reference the segment tree must agree with.
 */
const referenceResolver = (templates: ReadonlyArray<{ readonly method: string; readonly path: string }>) => {
  const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
  const compile = (template: string) =>
    new RegExp(`^${template.split("/").map((segment) => segment.startsWith(":") ? "[^/]+" : escape(segment)).join("/")}/?$`)
  const byMethod = new Map<string, Array<{ pattern: RegExp; template: string }>>()
  for (const { method, path } of templates) {
    const list = byMethod.get(method) ?? []
    list.push({ pattern: compile(path), template: path })
    byMethod.set(method, list)
  }
  for (const list of byMethod.values()) {
    list.sort((a, b) => (b.template.split(":").length === a.template.split(":").length
      ? b.template.length - a.template.length
      : a.template.split(":").length - b.template.split(":").length))
  }
  const find = (method: string, path: string) =>
    byMethod.get(method)?.find((c) => c.pattern.test(path))?.template ??
      byMethod.get("*")?.find((c) => c.pattern.test(path))?.template
  return (method: string, path: string) => find(method, path) ?? (method === "HEAD" ? find("GET", path) : undefined)
}

/** The pure parts of the access log and the metrics labels. */
describe("request ids and route labels", () => {
  it("keeps a sane request id and replaces the rest with a UUID", () => {
    expect(requestIdFor("abc-123_x.y:z")).toBe("abc-123_x.y:z")
    expect(requestIdFor("a".repeat(128))).toBe("a".repeat(128))
    for (const bad of [undefined, "", "a".repeat(129), "a b", "a/b", "a\"b", "<script>", "a\nb"]) {
      expect(requestIdFor(bad), String(bad)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    }
  })

  it("names the path template of API endpoints and of the routes beside the API, literal segments first", () => {
    const routes = routeResolver(Api, [{ method: "*", path: "/mcp" }, { method: "GET", path: "/dev/checkout/:sessionId" }])
    expect(routes.resolve("GET", "/v1/agents/agt_0Vbq7VNA001bwqVxC6vAyaqa")).toBe("/v1/agents/:id")
    expect(routes.resolve("GET", "/v1/agents/agt_0Vbq7VNA001bwqVxC6vAyaqa/policy")).toBe("/v1/agents/:id/policy")
    expect(routes.resolve("PUT", "/v1/webhooks/alerts/low-balance")).toBe("/v1/webhooks/alerts/low-balance")
    expect(routes.resolve("POST", "/v1/webhooks/wh_1/deliveries/dl_2/retry")).toBe("/v1/webhooks/:id/deliveries/:deliveryId/retry")
    expect(routes.resolve("HEAD", "/health")).toBe("/health")
    expect(routes.resolve("DELETE", "/mcp")).toBe("/mcp")
    expect(routes.resolve("GET", "/dev/checkout/cs_123")).toBe("/dev/checkout/:sessionId")
    expect(routes.resolve("GET", "/v1/nope")).toBeUndefined()
    expect(routes.resolve("DELETE", "/v1/wallet")).toBeUndefined()
  })

  it("names the same template as trying every template's pattern in rank order, on thousands of paths", () => {
    const extra = [
      { method: "*", path: "/mcp" },
      { method: "GET", path: "/dev/checkout/:sessionId" },
      { method: "POST", path: "/dev/checkout/:sessionId/pay" },
      { method: "GET", path: "/metrics" }
    ]
    const templates: Array<{ method: string; path: string }> = [...extra]
    HttpApi.reflect(Api, {
      onGroup: () => {},
      onEndpoint: ({ endpoint }) => templates.push({ method: endpoint.method, path: endpoint.path })
    })
    expect(templates.length).toBeGreaterThan(50)
    const fast = routeResolver(Api, extra)
    const reference = referenceResolver(templates)
    const random = prng(16)
    const methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    const words = ["v1", "agents", "me", "policy", "alerts", "", "x", "agt_0Vbq7VNA001bwqVxC6vAyaqa", "42", "proxy", "openai"]
    for (let i = 0; i < 5_000; i++) {
      const base = random.pick(templates).path.split("/")
      // Parameters filled in, some segments changed, added or removed, a trailing slash now and then.
      const segments = base.map((segment) =>
        segment.startsWith(":") ? (random.chance(0.1) ? "" : `id_${random.int(0, 999)}`) : random.chance(0.05) ? random.pick(words) : segment
      )
      if (random.chance(0.1)) segments.push(random.pick(words))
      if (random.chance(0.1) && segments.length > 2) segments.splice(random.int(1, segments.length - 1), 1)
      if (random.chance(0.15)) segments.push("")
      const path = segments.join("/")
      const method = random.pick(methods)
      expect(fast.resolve(method, path), `${method} ${path}`).toBe(reference(method, path))
    }
  })

  it("elides ids from paths it cannot name", () => {
    expect(elideIds("/v1/things/agt_0Vbq7VNA001bwqVxC6vAyaqa/sub/42")).toBe("/v1/things/:id/sub/:id")
    expect(elideIds("/x/3f2504e0-4f89-11d3-9a0c-0305e82c3301")).toBe("/x/:id")
    expect(elideIds("/plain/words")).toBe("/plain/words")
    expect(elideIds(`/${"a".repeat(500)}x`).length).toBeLessThanOrEqual(200)
  })
})
