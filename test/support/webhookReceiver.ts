import { createServer, type IncomingHttpHeaders } from "node:http"
import type { AddressInfo } from "node:net"
import { Webhook } from "standardwebhooks"

/**
 * A webhook receiver on 127.0.0.1, as an integrator would write one: every
 * request is verified with the maintained `standardwebhooks` library against
 * the secrets the test gives it, and recorded. `respond` decides the status
 * (or leaves the request hanging with `"hang"`).
 */

export interface Received {
  readonly id: string
  readonly timestamp: string
  readonly signature: string
  readonly body: string
  readonly headers: IncomingHttpHeaders
  /** The secrets (by index in `secrets`) that verified it. */
  readonly verifiedWith: ReadonlyArray<number>
  readonly event: any
}

export interface Receiver {
  readonly url: string
  readonly port: number
  readonly received: Array<Received>
  secrets: Array<string>
  respond: (received: Received) => number | "hang"
  readonly close: () => Promise<void>
  /** Resolves once `count` requests verified with some secret have arrived (or rejects after `timeoutMs`). */
  readonly waitFor: (predicate: (all: ReadonlyArray<Received>) => boolean, timeoutMs?: number) => Promise<void>
}

export const verifyWith = (secret: string, body: string, headers: Record<string, string>) =>
  new Webhook(secret).verify(body, headers)

export const startReceiver = async (port = 0): Promise<Receiver> => {
  const received: Array<Received> = []
  const hanging: Array<() => void> = []
  const receiver: Receiver = {
    url: "",
    port: 0,
    received,
    secrets: [],
    respond: () => 204,
    close: () =>
      new Promise((done) => {
        for (const release of hanging) release()
        server.closeAllConnections()
        server.close(() => done())
      }),
    waitFor: async (predicate, timeoutMs = 15_000) => {
      const deadline = Date.now() + timeoutMs
      while (!predicate(received)) {
        if (Date.now() > deadline) throw new Error(`receiver: condition not met; received ${received.length}`)
        await new Promise((r) => setTimeout(r, 25))
      }
    }
  }
  const server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8")
      const headers = {
        "webhook-id": String(request.headers["webhook-id"] ?? ""),
        "webhook-timestamp": String(request.headers["webhook-timestamp"] ?? ""),
        "webhook-signature": String(request.headers["webhook-signature"] ?? "")
      }
      const verifiedWith = receiver.secrets.flatMap((secret, index) => {
        try {
          verifyWith(secret, body, headers)
          return [index]
        } catch {
          return []
        }
      })
      let event: unknown = undefined
      try {
        event = JSON.parse(body)
      } catch {
        event = undefined
      }
      const entry: Received = {
        id: headers["webhook-id"],
        timestamp: headers["webhook-timestamp"],
        signature: headers["webhook-signature"],
        body,
        headers: request.headers,
        verifiedWith,
        event
      }
      received.push(entry)
      const answer = receiver.respond(entry)
      if (answer === "hang") {
        hanging.push(() => response.destroy())
        return
      }
      response.writeHead(answer, { "content-type": "text/plain" }).end("ok")
    })
  })
  await new Promise<void>((ready) => server.listen(port, "127.0.0.1", () => ready()))
  const bound = (server.address() as AddressInfo).port
  Object.assign(receiver, { url: `http://127.0.0.1:${bound}/hooks`, port: bound })
  return receiver
}
