import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { connectRaw as connect } from "../support/rawClient.ts"
import { type RunningServer, startServer } from "../support/server.ts"

/**
 * MAX_CONNECTIONS (adapters/http/server.ts): past the cap a new connection is
 * closed at once, and the idle keep-alive connections are closed to make
 * room; a request being answered is never cut.
 */

const until = async (condition: () => boolean, what: string) => {
  for (let waited = 0; !condition(); waited += 10) {
    if (waited > 5_000) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

const health = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n"

describe("MAX_CONNECTIONS", () => {
  let server: RunningServer
  let port: number
  beforeAll(async () => {
    server = await startServer(MemoryStore.layer, { maxConnections: 2 })
    port = Number(new URL(server.baseUrl).port)
  })
  afterAll(() => server.close())

  it("closes a connection past the cap, sheds the idle keep-alive ones, and then serves a new one", async () => {
    const first = await connect(port)
    const second = await connect(port)
    expect(await first.ask(health)).toMatch(/^HTTP\/1\.1 200/)
    expect(await second.ask(health)).toMatch(/^HTTP\/1\.1 200/)
    // Both are idle keep-alive connections now (held 65 s): a third is past the cap.
    const third = await connect(port)
    await until(() => third.closed(), "the third connection to be closed")
    // ...and the idle ones were closed to make room.
    await until(() => first.closed() && second.closed(), "the idle connections to be closed")
    const fourth = await connect(port)
    expect(await fourth.ask(health)).toMatch(/^HTTP\/1\.1 200/)
    fourth.socket.destroy()
  }, 30_000)

  it("never cuts a request being read: a connection with a request half sent stays open and is answered", async () => {
    const idle = await connect(port)
    expect(await idle.ask(health)).toMatch(/^HTTP\/1\.1 200/)
    const busy = await connect(port)
    // Headers not yet finished: the connection is not idle.
    busy.socket.write("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    await new Promise((resolve) => setTimeout(resolve, 50))
    const extra = await connect(port)
    await until(() => extra.closed() && idle.closed(), "the connection past the cap and the idle one to be closed")
    expect(busy.closed()).toBe(false)
    const answer = await busy.ask("Connection: keep-alive\r\n\r\n")
    expect(answer).toMatch(/^HTTP\/1\.1 200/)
    busy.socket.destroy()
  }, 30_000)
})
