import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { connectRaw } from "../support/rawClient.ts"
import { type RunningServer, startServer } from "../support/server.ts"

/**
 * An idle keep-alive connection outlives what clients keep one idle for
 * (adapters/http/server.ts KEEP_ALIVE_TIMEOUT_MS), so the client, not the
 * server, closes it: a client reusing it never races the server's close.
 */

describe("keep-alive connections", () => {
  let server: RunningServer
  let port: number
  beforeAll(async () => {
    server = await startServer(MemoryStore.layer)
    port = Number(new URL(server.baseUrl).port)
  })
  afterAll(() => server.close())

  it("announce 65 s and serve a second request after 6 s idle on the same connection", async () => {
    const client = await connectRaw(port)
    const request = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n"
    const first = await client.ask(request)
    expect(first).toMatch(/^HTTP\/1\.1 200/)
    expect(first.toLowerCase()).toContain("keep-alive: timeout=65")
    // Longer than Node's default keep-alive timeout (5 s): the server has not closed it.
    await new Promise((resolve) => setTimeout(resolve, 6_000))
    expect(client.closed()).toBe(false)
    expect(await client.ask(request)).toMatch(/^HTTP\/1\.1 200/)
    client.socket.destroy()
  }, 30_000)
})
