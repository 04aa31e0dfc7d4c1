import { Effect, Layer, Result } from "effect"
import { chmodSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import * as Sandbox from "../../adapters/providers/execute/sandbox.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import type { Provider } from "../../src/capabilities/Provider.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { client, errorCode, type RunningServer, startServer } from "../support/server.ts"

/**
 * A built-in sandbox that found no bubblewrap at start-up is unavailable:
 * never chosen, never run, listed with its reason; with nothing else for
 * `execute` the call is 503 PROVIDER_UNAVAILABLE (not a provider error).
 */

let tempDir = ""
const ADMIN_TOKEN = "admin-token-for-execute-tests-0123456789"
const brokenSandbox = () =>
  Sandbox.make({ unitPrice: { per: "second", priceMicroUsd: 100n }, tempDir, bwrapPath: "/nonexistent/bwrap" })

/** A remote executor, dearer than the sandbox, that answers every call. */
const remote = (calls: { n: number }): Provider<"execute"> => ({
  name: "piston",
  capability: "execute",
  unitPrice: { per: "second", priceMicroUsd: 500n },
  quote: () => Result.succeed({ microUsd: 500n }),
  run: () =>
    Effect.sync(() => {
      calls.n++
      return {
        output: { stdout: "remote\n", stderr: "", exitCode: 0, timedOut: false, durationMs: 5, truncated: false },
        actualMicroUsd: 500n
      }
    })
})

const funded = async (server: RunningServer) => {
  const api = client(server.baseUrl)
  const signup = await api.post("/v1/signup", { name: "ops" })
  await server.run(Effect.gen(function*() {
    yield* (yield* Wallets).credit({ accountId: signup.body.accountId as AccountId, key: "s", pocket: "usd", amount: 1_000_000n, description: "seed" })
  }))
  return signup.body.apiKey as string
}

beforeAll(() => {
  tempDir = mkdtempSync(path.join(tmpdir(), "sandbox-unavailable-"))
  // The sandbox's uid must reach its call directories here.
  chmodSync(tempDir, 0o755)
})
afterAll(() => rmSync(tempDir, { recursive: true, force: true }))

describe("execute with the sandbox unavailable", () => {
  describe("and no other provider", () => {
    let server: RunningServer
    beforeAll(async () => {
      server = await startServer(MemoryStore.layer, {
        providers: Layer.effect(Providers, Effect.map(brokenSandbox(), (sandbox) => ({ all: [sandbox] })))
      })
    })
    afterAll(() => server?.close())

    it("answers 503 PROVIDER_UNAVAILABLE and charges nothing", async () => {
      const api = client(server.baseUrl)
      const key = await funded(server)
      for (const body of [{ language: "bash", code: "echo hi" }, { language: "bash", code: "echo hi", provider: "sandbox" }]) {
        const res = await api.post("/v1/capabilities/execute", body, key)
        expect(res.status).toBe(503)
        expect(errorCode(res)).toBe("PROVIDER_UNAVAILABLE")
      }
      expect((await api.get("/v1/wallet", key)).body.balanceUsdCents).toBe(100)
    })

    it("lists the sandbox as unavailable with its reason, and no default provider", async () => {
      const api = client(server.baseUrl)
      const key = await funded(server)
      const res = await api.get("/v1/capabilities/execute", key)
      expect(res.status).toBe(200)
      expect(res.body.defaultProvider).toBeNull()
      expect(res.body.providers).toHaveLength(1)
      expect(res.body.providers[0]).toMatchObject({ name: "sandbox", status: "unavailable" })
      expect(res.body.providers[0].reason).toMatch(/bubblewrap is not installed/)
    })
  })

  describe("and a remote executor configured", () => {
    let server: RunningServer
    const calls = { n: 0 }
    beforeAll(async () => {
      server = await startServer(MemoryStore.layer, {
        providers: Layer.effect(Providers, Effect.map(brokenSandbox(), (sandbox) => ({ all: [sandbox, remote(calls)] })))
      })
    })
    afterAll(() => server?.close())

    it("chooses the remote executor although the sandbox is cheaper, and lists it as the default", async () => {
      const api = client(server.baseUrl)
      const key = await funded(server)
      const detail = await api.get("/v1/capabilities/execute", key)
      expect(detail.body.defaultProvider).toBe("piston")
      expect(detail.body.providers.map((p: { name: string; status?: string }) => [p.name, p.status ?? "ok"])).toEqual([
        ["sandbox", "unavailable"],
        ["piston", "ok"]
      ])
      const res = await api.post("/v1/capabilities/execute", { language: "python", code: "print(1)" }, key)
      expect(res.status).toBe(200)
      expect(res.body.metadata.provider).toBe("piston")
      expect(calls.n).toBe(1)
      const pinned = await api.post("/v1/capabilities/execute", { language: "python", code: "print(1)", provider: "sandbox" }, key)
      expect(pinned.status).toBe(503)
      expect(errorCode(pinned)).toBe("PROVIDER_UNAVAILABLE")
      expect(calls.n).toBe(1)
    })
  })

  describe("with the sandbox degraded (no cgroups here)", () => {
    let server: RunningServer
    beforeAll(async () => {
      server = await startServer(MemoryStore.layer, {
        providers: Layer.effect(
          Providers,
          Effect.map(
            Sandbox.make({ unitPrice: { per: "second", priceMicroUsd: 100n }, tempDir, cgroupRoot: tempDir }),
            (sandbox) => ({ all: [sandbox] })
          )
        ),
        adminToken: ADMIN_TOKEN
      })
    })
    afterAll(() => server?.close())

    it("lists the sandbox as degraded with the reason, and still runs code in it", async () => {
      const api = client(server.baseUrl)
      const key = await funded(server)
      const detail = await api.get("/v1/capabilities/execute", key)
      expect(detail.body.defaultProvider).toBe("sandbox")
      expect(detail.body.providers[0]).toMatchObject({ name: "sandbox", status: "degraded" })
      expect(detail.body.providers[0].reason).toContain(`no cgroup limits (memory, CPU, processes of the whole sandbox): no cgroup file system at ${tempDir}`)
      const res = await api.post("/v1/capabilities/execute", { language: "bash", code: "echo ran" }, key)
      expect(res.status).toBe(200)
      expect(res.body.data.stdout).toBe("ran\n")
      const health = await api.call("GET", "/v1/admin/service-health", { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
      expect(health.status).toBe(200)
      const sandbox = health.body.providers.find((p: { name: string }) => p.name === "sandbox")
      expect(sandbox).toMatchObject({ status: "degraded", circuit: "closed" })
      expect(sandbox.reason).toContain("no cgroup limits")
    })
  })
})
