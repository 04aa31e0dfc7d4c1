import { Effect, Exit, Layer } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { readFileSync, writeFileSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { accessControlFor, accessMatrixProblems } from "../../adapters/http/access.ts"
import { Api } from "../../adapters/http/Api.ts"
import { AccessControl, Authentication, IdempotencyKeys } from "../../adapters/http/middleware.ts"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { type CallerKind, expectedOutcome, renderAccessDoc, type TargetKind } from "../../src/access/doc.ts"
import { lookupAccess, type MatrixEntry, matrixEntries } from "../../src/access/matrix.ts"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { client, errorCode, type RunningServer, startServer, storeBackends } from "../support/server.ts"

/**
 * The access matrix (src/access/matrix.ts) against the API itself: every
 * endpoint of `Api` is in the matrix, docs/access.md is the matrix, and over
 * HTTP every endpoint answers every kind of caller, for every kind of agent
 * it may name, as the matrix predicts (src/access/doc.ts).
 */

const DOC = new URL("../../docs/access.md", import.meta.url)
const ADMIN = "admin-token-for-access-matrix-tests"

/** Every endpoint of the API, by reflection. */
const apiEndpoints = () => {
  const found: Array<{ group: string; endpoint: string; method: string; path: string }> = []
  HttpApi.reflect(Api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, group }) =>
      found.push({ group: group.identifier, endpoint: endpoint.identifier, method: endpoint.method, path: endpoint.path })
  })
  return found
}

describe("the access matrix and the API", () => {
  it("lists every endpoint of the API, with its method and path, and nothing else", () => {
    const endpoints = apiEndpoints()
    expect(endpoints.length).toBeGreaterThan(40)
    for (const { group, endpoint, method, path } of endpoints) {
      const entry = lookupAccess(group, endpoint)
      expect(entry, `${group}.${endpoint} is missing from src/access/matrix.ts`).toBeDefined()
      expect(`${entry!.method} ${entry!.path}`, `${group}.${endpoint}`).toBe(`${method} ${path}`)
    }
    expect(matrixEntries().map((e) => `${e.group}.${e.endpoint}`).sort()).toEqual(
      endpoints.map((e) => `${e.group}.${e.endpoint}`).sort()
    )
    expect(accessMatrixProblems(Api)).toEqual([])
  })

  it("refuses to start when an endpoint is missing from the matrix or declared around it", async () => {
    class Unlisted extends HttpApiGroup.make("agents")
      .add(HttpApiEndpoint.get("secret", "/v1/secret"))
      .middleware(AccessControl)
      .middleware(Authentication)
    {}
    class NoAccess extends HttpApiGroup.make("wallet")
      .add(HttpApiEndpoint.get("wallet", "/v1/wallet"))
      .middleware(Authentication)
    {}
    class AccessFirst extends HttpApiGroup.make("funding")
      .add(HttpApiEndpoint.post("fund", "/v1/wallet/fund").middleware(IdempotencyKeys))
      .middleware(Authentication)
      .middleware(AccessControl)
    {}
    class Bad extends HttpApi.make("bad").add(Unlisted).add(NoAccess).add(AccessFirst) {}
    const problems = accessMatrixProblems(Bad)
    expect(problems).toContain("agents.secret (GET /v1/secret) is not in the access matrix")
    expect(problems).toContain("wallet.wallet has no AccessControl middleware")
    expect(problems).toContain("funding.fund: AccessControl runs before authentication")
    const built = await Effect.runPromise(Effect.exit(Effect.scoped(Layer.build(
      accessControlFor(Bad).pipe(Layer.provide(MemoryStore.layer))
    ))))
    expect(Exit.isFailure(built)).toBe(true)
    expect(String(Exit.isFailure(built) ? built.cause : "")).toContain("not in the access matrix")
  })

  it("docs/access.md is generated from the matrix", () => {
    const rendered = renderAccessDoc()
    if (process.env["UPDATE_ACCESS_DOC"] === "1") writeFileSync(DOC, rendered)
    expect(readFileSync(DOC, "utf8")).toBe(rendered)
  })
})

// ---- over HTTP ------------------------------------------------------------------

interface Caller {
  readonly label: string
  readonly kind: CallerKind
  readonly key: string | undefined
  /** Agent ids by target kind, relative to this caller. */
  readonly agents: Record<Exclude<TargetKind, "none">, string>
}

/** Path parameters that name something other than an agent, which these tests do not create: 404 is the endpoint's own answer. */
const foreignResourcePath = (entry: MatrixEntry & { group: string; endpoint: string }) =>
  entry.path.includes(":slug") || (entry.group === "capabilities" && (entry.endpoint === "other" || entry.endpoint === "estimateOther")) ||
  (entry.group === "admin" && entry.path.includes(":id")) || (entry.group === "webhooks" && entry.path.includes(":id"))

describe.each(storeBackends)("every endpoint × caller × target over %s", (_name, store) => {
  let server: RunningServer
  let api: ReturnType<typeof client>
  let callers: ReadonlyArray<Caller>
  let speakOnlyKey: string
  /** An audit record of each agent, by agent id. */
  const auditOf = new Map<string, string>()
  /** A transaction of each agent, by agent id. */
  const transactionOf = new Map<string, string>()

  /**
   * Two accounts, each with an owner, a worker and a killed agent, and the
   * callers over them. Run again before each request of an endpoint that
   * changes its target for good (deleting an agent, rotating its key).
   */
  const setup = async () => {
    const account = async () => {
      const owner = (await api.post("/v1/signup", { name: "owner" })).body as { apiKey: string; agentId: string; accountId: string }
      const worker = (await api.post("/v1/agents", { name: "worker" }, owner.apiKey)).body as { apiKey: string; id: string }
      const killed = (await api.post("/v1/agents", { name: "killed" }, owner.apiKey)).body as { apiKey: string; id: string }
      expect((await api.patch(`/v1/agents/${killed.id}`, { killed: true }, owner.apiKey)).status).toBe(200)
      // One wallet credit attributed to each agent: an audit record per agent.
      await server.run(Effect.gen(function*() {
        const wallets = yield* Wallets
        for (const agentId of [owner.agentId, worker.id, killed.id]) {
          yield* wallets.credit({
            accountId: owner.accountId as AccountId,
            agentId: agentId as AgentId,
            key: `seed-${agentId}`,
            pocket: "usd",
            amount: 1_000_000n,
            description: "seed"
          })
        }
      }))
      const listed = await api.get("/v1/wallet/transactions", owner.apiKey)
      for (const t of listed.body.transactions as ReadonlyArray<{ agentId: string; auditId: string; id: string }>) {
        auditOf.set(t.agentId, t.auditId)
        transactionOf.set(t.agentId, t.id)
      }
      return { owner: { key: owner.apiKey, id: owner.agentId }, worker, killed }
    }
    const a = await account()
    const b = await account()
    const speakOnly = (await api.post("/v1/agents", { name: "speaker" }, a.owner.key)).body as { apiKey: string; id: string }
    expect((await api.patch(`/v1/agents/${speakOnly.id}/policy`, { allowedCapabilities: ["speak"] }, a.owner.key)).status)
      .toBe(200)
    speakOnlyKey = speakOnly.apiKey
    return [
      { label: "owner", kind: "owner", key: a.owner.key, agents: { self: a.owner.id, sibling: a.worker.id, foreign: b.worker.id } },
      { label: "worker", kind: "agent", key: a.worker.apiKey, agents: { self: a.worker.id, sibling: a.owner.id, foreign: b.owner.id } },
      {
        label: "other account's owner",
        kind: "owner",
        key: b.owner.key,
        agents: { self: b.owner.id, sibling: b.worker.id, foreign: a.owner.id }
      },
      { label: "killed agent", kind: "killed", key: a.killed.apiKey, agents: { self: a.killed.id, sibling: a.owner.id, foreign: b.owner.id } },
      { label: "no key", kind: "none", key: undefined, agents: { self: a.owner.id, sibling: a.worker.id, foreign: b.owner.id } },
      { label: "admin token", kind: "admin", key: ADMIN, agents: { self: a.owner.id, sibling: a.worker.id, foreign: b.owner.id } }
    ] satisfies ReadonlyArray<Caller>
  }

  beforeAll(async () => {
    server = await startServer(store(), {
      adminToken: ADMIN,
      rateLimits: { agentPerMinute: 1_000_000, accountPerMinute: 1_000_000 }
    })
    api = client(server.baseUrl)
    callers = await setup()
  })
  afterAll(() => server?.close())

  /** Endpoints whose allowed calls change their target for good: each request gets fresh agents. */
  const destructive = new Set(["DELETE /v1/agents/:id", "POST /v1/agents/:id/rotate-key"])

  const request = (entry: MatrixEntry, caller: Caller, target: TargetKind) => {
    const agentId = target === "none" ? caller.agents.self : caller.agents[target]
    const rule = entry.rule
    const where = "target" in rule ? rule.target?.in : undefined
    let path = entry.path
      .replace(":auditId", auditOf.get(agentId) ?? "aud_missing")
      .replace(":transactionId", transactionOf.get(agentId) ?? "txn_missing")
      .replace(":capability", entry.method === "GET" ? "reason" : "nope")
      .replace(":slug", "nope")
      .replace(":id", where === "path" ? agentId : "sub_missing")
    if (where === "query" && target !== "none") path += `?${"target" in rule ? rule.target!.name : ""}=${agentId}`
    return api.call(entry.method, path, {
      ...(caller.key === undefined ? {} : { key: caller.key }),
      ...(entry.method === "GET" ? {} : { body: entry.method === "PUT" ? wholePolicy : {} })
    })
  }

  /** PUT replaces the whole policy: a body that passes validation, so that access decides. */
  const wholePolicy = { maxPerCallUsdCents: null, maxPerDayUsdCents: null, allowedCapabilities: null }

  it.each(matrixEntries().map((e) => [`${e.group}.${e.endpoint}`, e] as const))("%s", async (_label, entry) => {
    const where = "target" in entry.rule ? entry.rule.target?.in : undefined
    const targets: ReadonlyArray<TargetKind> = where === undefined
      ? ["none"]
      : where === "query"
      ? ["none", "self", "sibling", "foreign"]
      : ["self", "sibling", "foreign"]
    let checked = 0
    const fresh = destructive.has(`${entry.method} ${entry.path}`)
    for (const [index] of callers.entries()) {
      for (const target of targets) {
        const caller = fresh ? (await setup())[index]! : callers[index]!
        const expected = expectedOutcome(entry.rule, caller.kind, target)
        const res = await request(entry, caller, target)
        const context = `${entry.method} ${entry.path} as ${caller.label}, target ${target}: ${res.status} ${res.text.slice(0, 200)}`
        expect(res.status, context).toBeLessThan(500)
        if (expected === "ok") {
          expect([401, 403], context).not.toContain(res.status)
          if (!foreignResourcePath(entry)) expect(res.status, context).not.toBe(404)
        } else {
          expect(res.status, context).toBe(expected)
          const code = errorCode(res)
          if (expected === 403) {
            expect(code, context).toBe(caller.kind === "killed" && entry.rule.access !== "admin" ? "AGENT_KILLED" : "FORBIDDEN")
          }
          if (expected === 404) expect(code, context).toBe("NOT_FOUND")
        }
        checked++
      }
    }
    expect(checked).toBe(callers.length * targets.length)
  })

  it("refuses a capability route outside the caller's allowedCapabilities before anything else", async () => {
    for (const entry of matrixEntries()) {
      if (!("capability" in entry.rule) || entry.rule.capability === undefined || entry.rule.capability === "service") continue
      const res = await api.call(entry.method, entry.path, { key: speakOnlyKey, body: {}, headers: { "idempotency-key": "k" } })
      if (entry.rule.capability === "speak") {
        // Allowed: the body is checked next.
        expect(res.status, entry.path).toBe(400)
      } else {
        expect(res.status, entry.path).toBe(403)
        expect(errorCode(res), entry.path).toBe("CAPABILITY_NOT_ALLOWED")
      }
    }
  })
})
