import * as Net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
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
    const socket = Net.connect({ port, host: "127.0.0.1" })
    await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject))
    let text = ""
    let ended = false
    socket.on("data", (chunk) => (text += chunk.toString()))
    socket.on("end", () => (ended = true))
    const answer = async () => {
      for (let waited = 0; !/\r\n\r\n[\s\S]*\}/.test(text); waited += 10) {
        if (ended || waited > 10_000) throw new Error(`no answer (connection ended: ${ended}): ${text}`)
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      const got = text
      text = ""
      return got
    }
    const request = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n"
    socket.write(request)
    const first = await answer()
    expect(first).toMatch(/^HTTP\/1\.1 200/)
    expect(first.toLowerCase()).toContain("keep-alive: timeout=65")
    // Longer than Node's default keep-alive timeout (5 s): the server has not closed it.
    await new Promise((resolve) => setTimeout(resolve, 6_000))
    expect(ended).toBe(false)
    socket.write(request)
    expect(await answer()).toMatch(/^HTTP\/1\.1 200/)
    socket.destroy()
  }, 30_000)
})
