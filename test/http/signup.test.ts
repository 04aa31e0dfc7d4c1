import { Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { clientKey } from "../../adapters/http/rateLimit.ts"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import * as RedisRateLimiter from "../../adapters/ratelimit/redis.ts"
import { client, errorCode, type RunningServer, startServer } from "../support/server.ts"

/**
 * Who may sign up (SIGNUP) and how often (SIGNUP_RATE_PER_HOUR per client
 * address, TRUST_PROXY), over real HTTP.
 */

const REDIS_URL = process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379"
const SIGNUP_TOKEN = "signup-token-0123456789abcdef"

const ADMIN_TOKEN = "admin-token-0123456789abcdef"

/** Accounts in the store, from the admin API (every server here is started with ADMIN_TOKEN). */
const accounts = async (server: RunningServer): Promise<number> => {
  const stats = await client(server.baseUrl).get("/v1/admin/stats", ADMIN_TOKEN)
  expect(stats.status).toBe(200)
  return stats.body.accounts
}

describe("signup limit per client address", () => {
  it("admits the default 10 an hour from one address, then answers 429 RATE_LIMITED with Retry-After and creates nothing", async () => {
    const server = await startServer(MemoryStore.layer, { adminToken: ADMIN_TOKEN, signup: {} })
    try {
      const api = client(server.baseUrl)
      for (let i = 0; i < 10; i++) {
        const ok = await api.post("/v1/signup", { name: `ops-${i}` })
        expect(ok.status).toBe(201)
        expect(ok.headers.get("x-ratelimit-limit")).toBe("10")
        expect(ok.headers.get("x-ratelimit-remaining")).toBe(String(9 - i))
      }
      const before = await accounts(server)
      const refused = await api.post("/v1/signup", { name: "one-too-many" })
      expect(refused.status).toBe(429)
      expect(errorCode(refused)).toBe("RATE_LIMITED")
      expect(refused.body.error.details).toMatchObject({ scope: "signup", limit: 10 })
      // GCRA over an hour: one more every 6 minutes.
      const retryAfter = Number(refused.headers.get("retry-after"))
      expect(retryAfter).toBeGreaterThan(300)
      expect(retryAfter).toBeLessThanOrEqual(360)
      expect(await accounts(server)).toBe(before)
      // Other endpoints are not affected.
      expect((await api.get("/health")).status).toBe(200)
    } finally {
      await server.close()
    }
  })

  it("ignores X-Forwarded-For unless TRUST_PROXY says how many proxies to trust", async () => {
    const direct = await startServer(MemoryStore.layer, { adminToken: ADMIN_TOKEN, signup: { perHour: 2 } })
    try {
      const api = client(direct.baseUrl)
      const as = (ip: string, name: string) =>
        api.call("POST", "/v1/signup", { body: { name }, headers: { "x-forwarded-for": ip } })
      expect((await as("10.0.0.1", "a")).status).toBe(201)
      expect((await as("10.0.0.2", "b")).status).toBe(201)
      expect((await as("10.0.0.3", "c")).status).toBe(429)
    } finally {
      await direct.close()
    }

    const proxied = await startServer(MemoryStore.layer, { adminToken: ADMIN_TOKEN, signup: { perHour: 2, trustProxyHops: 1 } })
    try {
      const api = client(proxied.baseUrl)
      const as = (ip: string, name: string) =>
        api.call("POST", "/v1/signup", { body: { name }, headers: { "x-forwarded-for": ip } })
      expect((await as("10.0.0.1", "a1")).status).toBe(201)
      expect((await as("10.0.0.1", "a2")).status).toBe(201)
      expect((await as("10.0.0.1", "a3")).status).toBe(429)
      // A client cannot buy a fresh budget by forging the left of the header:
      // the proxy appends the address it saw, and that is what counts.
      expect((await as("203.0.113.9, 10.0.0.1", "forged")).status).toBe(429)
      expect((await as("10.0.0.2", "b1")).status).toBe(201)
      // IPv6 clients are counted per /64.
      expect((await as("2001:db8:1:2::1", "v6-1")).status).toBe(201)
      expect((await as("2001:db8:1:2:ffff::9", "v6-2")).status).toBe(201)
      expect((await as("2001:db8:1:2::abcd", "v6-3")).status).toBe(429)
      expect((await as("2001:db8:1:3::1", "v6-other")).status).toBe(201)
    } finally {
      await proxied.close()
    }
  })

  it("keys addresses by IPv4 address and IPv6 /64", () => {
    expect(clientKey("192.0.2.7")).toBe("ip:192.0.2.7")
    expect(clientKey("::ffff:192.0.2.7")).toBe("ip:192.0.2.7")
    expect(clientKey("2001:db8:0:1::5")).toBe("ip6:2001:db8:0:1::/64")
    expect(clientKey("2001:DB8:0:1:2:3:4:5")).toBe("ip6:2001:db8:0:1::/64")
    expect(clientKey("[::1]")).toBe("ip6:0:0:0:0::/64")
    expect(clientKey("fe80::1%eth0")).toBe("ip6:fe80:0:0:0::/64")
    expect(clientKey("not-an-ip")).toBeUndefined()
  })

  describe("shared by instances that count in Redis", () => {
    let servers: ReadonlyArray<RunningServer> = []
    beforeAll(async () => {
      // Two instances, each with its own connection to the same Redis and key space.
      const keyPrefix = `spendgate:test:${randomUUID()}:`
      servers = await Promise.all(
        [0, 1].map(() =>
          startServer(MemoryStore.layer, {
            signup: { perHour: 3 },
            rateLimits: { limiter: RedisRateLimiter.layer({ url: REDIS_URL, keyPrefix }) }
          })
        )
      )
    })
    afterAll(() => Promise.all(servers.map((server) => server.close())))

    it("three signups across both, then both refuse", async () => {
      const [a, b] = servers.map((server) => client(server.baseUrl))
      expect((await a!.post("/v1/signup", { name: "a1" })).status).toBe(201)
      expect((await b!.post("/v1/signup", { name: "b1" })).status).toBe(201)
      expect((await a!.post("/v1/signup", { name: "a2" })).status).toBe(201)
      const fromB = await b!.post("/v1/signup", { name: "b2" })
      expect(fromB.status).toBe(429)
      expect(errorCode(fromB)).toBe("RATE_LIMITED")
      expect((await a!.post("/v1/signup", { name: "a3" })).status).toBe(429)
    })
  })
})

describe("SIGNUP=closed", () => {
  it("answers 403 FORBIDDEN and creates nothing", async () => {
    const server = await startServer(MemoryStore.layer, { adminToken: ADMIN_TOKEN, signup: { mode: "closed" } })
    try {
      const api = client(server.baseUrl)
      const refused = await api.post("/v1/signup", { name: "ops" })
      expect(refused.status).toBe(403)
      expect(errorCode(refused)).toBe("FORBIDDEN")
      expect(refused.body.error.message).toMatch(/closed/)
      const withKey = await api.call("POST", "/v1/signup", {
        body: { name: "ops" },
        headers: { "idempotency-key": "k-1" }
      })
      expect(withKey.status).toBe(403)
      expect(await accounts(server)).toBe(0)
    } finally {
      await server.close()
    }
  })
})

describe("SIGNUP=token", () => {
  it("needs Authorization: Bearer <SIGNUP_TOKEN>; missing or wrong is 401 UNAUTHORIZED and creates nothing", async () => {
    const server = await startServer(MemoryStore.layer, {
      adminToken: ADMIN_TOKEN,
      signup: { mode: "token", token: Redacted.make(SIGNUP_TOKEN), perHour: 1 }
    })
    try {
      const api = client(server.baseUrl)
      const missing = await api.post("/v1/signup", { name: "ops" })
      expect(missing.status).toBe(401)
      expect(errorCode(missing)).toBe("UNAUTHORIZED")
      const wrongHeaders = [
        "Bearer nope",
        `Bearer ${SIGNUP_TOKEN}x`,
        `Bearer ${SIGNUP_TOKEN.slice(0, -1)}`,
        `Token ${SIGNUP_TOKEN}`,
        SIGNUP_TOKEN,
        "Bearer "
      ]
      for (const authorization of wrongHeaders) {
        const refused = await api.call("POST", "/v1/signup", { body: { name: "ops" }, headers: { authorization } })
        expect(refused.status).toBe(401)
        expect(errorCode(refused)).toBe("UNAUTHORIZED")
      }
      expect(await accounts(server)).toBe(0)

      // With the token, and not limited per address (perHour 1 would refuse the second).
      for (const name of ["ops", "ops-2"]) {
        const ok = await api.post("/v1/signup", { name }, SIGNUP_TOKEN)
        expect(ok.status).toBe(201)
        expect(ok.body.apiKey).toMatch(/^sk_agt_/)
      }
      expect(await accounts(server)).toBe(2)
    } finally {
      await server.close()
    }
  })

  it("never replays a token holder's stored signup (and its owner key) to a caller without the token", async () => {
    const server = await startServer(MemoryStore.layer, {
      adminToken: ADMIN_TOKEN,
      signup: { mode: "token", token: Redacted.make(SIGNUP_TOKEN) }
    })
    try {
      const api = client(server.baseUrl)
      const headers = { "idempotency-key": "signup-once" }
      const first = await api.call("POST", "/v1/signup", {
        body: { name: "ops" },
        headers: { ...headers, authorization: `Bearer ${SIGNUP_TOKEN}` }
      })
      expect(first.status).toBe(201)
      const replayed = await api.call("POST", "/v1/signup", { body: { name: "ops" }, headers })
      expect(replayed.status).toBe(401)
      expect(errorCode(replayed)).toBe("UNAUTHORIZED")
      expect(replayed.text).not.toContain(first.body.apiKey)
      // The holder of the token still gets its stored answer back.
      const again = await api.call("POST", "/v1/signup", {
        body: { name: "ops" },
        headers: { ...headers, authorization: `Bearer ${SIGNUP_TOKEN}` }
      })
      expect(again.status).toBe(201)
      expect(again.body.apiKey).toBe(first.body.apiKey)
      expect(await accounts(server)).toBe(1)
    } finally {
      await server.close()
    }
  })

  it("cannot be built without a token", async () => {
    await expect(startServer(MemoryStore.layer, { signup: { mode: "token" } })).rejects.toThrow(/token/)
  })
})
