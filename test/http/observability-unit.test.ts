import { describe, expect, it } from "vitest"
import { Api } from "../../adapters/http/Api.ts"
import { elideIds, requestIdFor, routeResolver } from "../../adapters/http/observability.ts"

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

  it("elides ids from paths it cannot name", () => {
    expect(elideIds("/v1/things/agt_0Vbq7VNA001bwqVxC6vAyaqa/sub/42")).toBe("/v1/things/:id/sub/:id")
    expect(elideIds("/x/3f2504e0-4f89-11d3-9a0c-0305e82c3301")).toBe("/x/:id")
    expect(elideIds("/plain/words")).toBe("/plain/words")
    expect(elideIds(`/${"a".repeat(500)}x`).length).toBeLessThanOrEqual(200)
  })
})
