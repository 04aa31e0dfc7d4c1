import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { type CallerKind, expectedOutcome, type TargetKind } from "../../src/access/doc.ts"
import { type MatrixEntry, matrixEntries } from "../../src/access/matrix.ts"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { client, errorCode, type RunningServer, startServer } from "../support/server.ts"

/**
 * The access matrix again, with every caller signed in by a dashboard
 * session (cookie + CSRF token) instead of sending its key: a session is its
 * key (or the admin token) on every endpoint, cell for cell.
 */

const ADMIN = "admin-token-for-session-matrix-tests"

interface Session {
  readonly cookie: string
  readonly csrf: string
}

interface Caller {
  readonly label: string
  readonly kind: CallerKind
  readonly session: Session | undefined
  readonly agents: Record<Exclude<TargetKind, "none">, string>
}

const foreignResourcePath = (entry: MatrixEntry & { group: string; endpoint: string }) =>
  entry.path.includes(":slug") || (entry.group === "capabilities" && (entry.endpoint === "other" || entry.endpoint === "estimateOther")) ||
  (entry.group === "admin" && entry.path.includes(":id")) || (entry.group === "webhooks" && entry.path.includes(":id"))

describe("every endpoint × caller × target over memory, signed in by a dashboard session", () => {
  let server: RunningServer
  let api: ReturnType<typeof client>
  let callers: ReadonlyArray<Caller>
  const auditOf = new Map<string, string>()
  /** A transaction of each agent, by agent id. */
  const transactionOf = new Map<string, string>()

  const signIn = async (credentials: Record<string, string>): Promise<Session> => {
    const res = await api.call("POST", "/session", { body: credentials, headers: { origin: server.baseUrl } })
    expect(res.status, res.text).toBe(200)
    return { cookie: (res.headers.get("set-cookie") ?? "").split(";")[0]!, csrf: res.body.csrfToken }
  }

  const setup = async () => {
    const account = async () => {
      const owner = (await api.post("/v1/signup", { name: "owner" })).body as { apiKey: string; agentId: string; accountId: string }
      const worker = (await api.post("/v1/agents", { name: "worker" }, owner.apiKey)).body as { apiKey: string; id: string }
      const killed = (await api.post("/v1/agents", { name: "killed" }, owner.apiKey)).body as { apiKey: string; id: string }
      // Signed in before the kill: the session outlives it, refused as the key is.
      const killedSession = await signIn({ key: killed.apiKey })
      expect((await api.patch(`/v1/agents/${killed.id}`, { killed: true }, owner.apiKey)).status).toBe(200)
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
      return {
        owner: { id: owner.agentId, session: await signIn({ key: owner.apiKey }) },
        worker: { id: worker.id, session: await signIn({ key: worker.apiKey }) },
        killed: { id: killed.id, session: killedSession }
      }
    }
    const a = await account()
    const b = await account()
    return [
      { label: "owner", kind: "owner", session: a.owner.session, agents: { self: a.owner.id, sibling: a.worker.id, foreign: b.worker.id } },
      { label: "worker", kind: "agent", session: a.worker.session, agents: { self: a.worker.id, sibling: a.owner.id, foreign: b.owner.id } },
      { label: "killed agent", kind: "killed", session: a.killed.session, agents: { self: a.killed.id, sibling: a.owner.id, foreign: b.owner.id } },
      { label: "no session", kind: "none", session: undefined, agents: { self: a.owner.id, sibling: a.worker.id, foreign: b.owner.id } },
      {
        label: "operator session",
        kind: "admin",
        session: await signIn({ adminToken: ADMIN }),
        agents: { self: a.owner.id, sibling: a.worker.id, foreign: b.owner.id }
      }
    ] satisfies ReadonlyArray<Caller>
  }

  beforeAll(async () => {
    server = await startServer(MemoryStore.layer, {
      adminToken: ADMIN,
      rateLimits: { agentPerMinute: 1_000_000, accountPerMinute: 1_000_000 },
      // The matrix signs in as each caller again and again (POST /session is one of its routes):
      // no credential's sessions may push out the callers' own.
      sessions: { signinPer15Minutes: 1_000_000, maxPerCredential: 1_000_000 }
    })
    api = client(server.baseUrl)
    callers = await setup()
  })
  afterAll(() => server?.close())

  const destructive = new Set(["DELETE /v1/agents/:id", "POST /v1/agents/:id/rotate-key"])
  const wholePolicy = { maxPerCallUsdCents: null, maxPerDayUsdCents: null, allowedCapabilities: null }

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
    const headers: Record<string, string> = caller.session === undefined
      ? {}
      : entry.method === "GET"
      ? { cookie: caller.session.cookie }
      : { cookie: caller.session.cookie, "x-csrf-token": caller.session.csrf, origin: server.baseUrl }
    return api.call(entry.method, path, {
      headers,
      ...(entry.method === "GET" ? {} : { body: entry.method === "PUT" ? wholePolicy : {} })
    })
  }

  it.each(matrixEntries().map((e) => [`${e.group}.${e.endpoint}`, e] as const))("%s", async (_label, entry) => {
    const where = "target" in entry.rule ? entry.rule.target?.in : undefined
    const targets: ReadonlyArray<TargetKind> = where === undefined
      ? ["none"]
      : where === "query"
      ? ["none", "self", "sibling", "foreign"]
      : ["self", "sibling", "foreign"]
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
          if (expected === 403) {
            expect(errorCode(res), context).toBe(caller.kind === "killed" && entry.rule.access !== "admin" ? "AGENT_KILLED" : "FORBIDDEN")
          }
          if (expected === 404) expect(errorCode(res), context).toBe("NOT_FOUND")
        }
      }
    }
  })
})
