import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { client } from "../support/server.ts"
import { type ServerProcess, startServerProcess } from "../support/server-process.ts"
import { type Receiver, startReceiver } from "../support/webhookReceiver.ts"

/**
 * The real server process, killed with SIGKILL after an event committed and
 * before it could be delivered (the receiver is down), then started again on
 * the same data directory: the event is delivered, once, signed, when the
 * receiver is back.
 */

describe("webhook delivery across a kill -9", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "spendgate-webhooks-"))
  let server: ServerProcess | undefined
  let receiver: Receiver | undefined
  afterAll(async () => {
    await server?.kill9()
    await receiver?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it("an event committed before the crash is delivered after the restart", async () => {
    // A port for the receiver, which stays down until after the crash.
    const probe = await startReceiver()
    const port = probe.port
    await probe.close()
    const env = { DATA_DIR: dataDir, URL_ALLOW_HOSTS: `127.0.0.1:${port}`, SIGNUP: "open" }

    server = await startServerProcess(env, 60_000)
    let api = client(server.baseUrl)
    const owner = (await api.post("/v1/signup", { name: "owner" })).body.apiKey
    const endpoint = await api.call("POST", "/v1/webhooks", {
      key: owner,
      body: { url: `http://127.0.0.1:${port}/hooks`, events: ["agent.created", "agent.killed"] }
    })
    expect(endpoint.status, endpoint.text).toBe(201)
    const agent = await api.post("/v1/agents", { name: "survivor" }, owner)
    expect(agent.status).toBe(201)
    expect((await api.patch(`/v1/agents/${agent.body.id}`, { killed: true }, owner)).status).toBe(200)
    await server.kill9()
    server = undefined

    receiver = await startReceiver(port)
    receiver.secrets = [endpoint.body.secret]
    expect(receiver.received).toHaveLength(0)
    server = await startServerProcess(env, 60_000)
    api = client(server.baseUrl)
    // The first attempt (if the crashed process made one) failed against the closed port: the retry comes within its backoff.
    await receiver.waitFor((all) => new Set(all.map((r) => r.id)).size >= 2, 90_000)
    await new Promise((r) => setTimeout(r, 1_500))
    const types = receiver.received.map((r) => r.event.type).sort()
    expect(types).toEqual(["agent.created", "agent.killed"])
    expect(receiver.received.every((r) => r.verifiedWith.length === 1)).toBe(true)
    expect(receiver.received.find((r) => r.event.type === "agent.created")!.event.data.agentId).toBe(agent.body.id)
    const log = await api.get(`/v1/webhooks/${endpoint.body.id}/deliveries`, owner)
    expect(log.body.deliveries.map((d: any) => d.status)).toEqual(["succeeded", "succeeded"])
  }, 180_000)
})
