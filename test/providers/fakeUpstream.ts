import { Effect } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

/**
 * A stand-in for an upstream HTTP API: a real server on 127.0.0.1 (port 0)
 * that records every request and answers as the test says.
 */

export interface Recorded {
  readonly method: string
  readonly path: string
  readonly query: URLSearchParams
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
}

export type Answer =
  | { readonly _tag: "json"; readonly status: number; readonly body: unknown }
  | { readonly _tag: "text"; readonly status: number; readonly text: string; readonly contentType?: string }
  /** Headers with a content-length, then nothing more. */
  | { readonly _tag: "declared"; readonly length: number }
  /** Never answers. */
  | { readonly _tag: "hang" }
  /** 200, then a body that does not end (until the client goes away, or 64 MiB). */
  | { readonly _tag: "endless" }
  /** 200 and part of a JSON body, then the connection is destroyed. */
  | { readonly _tag: "cut" }

export const json = (body: unknown, status = 200): Answer => ({ _tag: "json", status, body })
export const text = (status: number, body: string, contentType = "text/plain; charset=utf-8"): Answer => ({
  _tag: "text",
  status,
  text: body,
  contentType
})

export interface FakeUpstream {
  readonly url: string
  readonly requests: Array<Recorded>
  /** How the next requests are answered; may be replaced by the test. */
  answer: (request: Recorded) => Answer
}

const MAX_REQUEST_BODY_BYTES = 1024 * 1024

const send = (res: Http.ServerResponse, answer: Answer): void => {
  switch (answer._tag) {
    case "json":
      res.writeHead(answer.status, { "content-type": "application/json" }).end(JSON.stringify(answer.body))
      return
    case "text":
      res.writeHead(answer.status, { "content-type": answer.contentType ?? "text/plain" }).end(answer.text)
      return
    case "declared":
      res.writeHead(200, { "content-type": "application/json", "content-length": String(answer.length) })
      res.flushHeaders()
      return
    case "hang":
      return
    case "endless": {
      res.writeHead(200, { "content-type": "application/json" })
      res.write("{\"results\":[")
      const chunk = Buffer.from(`${JSON.stringify({ title: "t", url: "https://example.com/", content: "x".repeat(16_000) })},`)
      let sent = 0
      const pump = () => {
        while (!res.destroyed && sent < 64 * 1024 * 1024) {
          sent += chunk.length
          if (!res.write(chunk)) return void res.once("drain", pump)
        }
        if (!res.destroyed) res.end("{}]}")
      }
      pump()
      return
    }
    case "cut":
      res.writeHead(200, { "content-type": "application/json", "content-length": "100000" })
      res.write("{\"results\":[{\"title\":\"half")
      setTimeout(() => res.socket?.destroy(), 20)
      return
  }
}

export const startFake = (answer: (request: Recorded) => Answer) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ fake: FakeUpstream; server: Http.Server }>((resolve, reject) => {
        const fake: FakeUpstream = { url: "", requests: [], answer }
        const server = Http.createServer((req, res) => {
          res.on("error", () => {})
          const chunks: Array<Buffer> = []
          let size = 0
          req.on("data", (chunk: Buffer) => {
            size += chunk.length
            if (size <= MAX_REQUEST_BODY_BYTES) chunks.push(chunk)
          })
          req.on("end", () => {
            const url = new URL(req.url ?? "/", "http://127.0.0.1")
            const recorded: Recorded = {
              method: req.method ?? "",
              path: url.pathname,
              query: url.searchParams,
              headers: req.headers,
              body: Buffer.concat(chunks).toString("utf8")
            }
            fake.requests.push(recorded)
            let answer: Answer
            try {
              answer = fake.answer(recorded)
            } catch (error) {
              // A broken fake must fail its test at once, not leave the client waiting.
              answer = text(599, `the fake upstream failed: ${String(error)}`)
            }
            send(res, answer)
          })
        })
        server.on("error", reject)
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as AddressInfo
          resolve({ fake: Object.assign(fake, { url: `http://127.0.0.1:${port}` }), server })
        })
      })
    ),
    ({ server }) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() => resolve())
        })
      )
  ).pipe(Effect.map(({ fake }) => fake))

/** The URL of a 127.0.0.1 port that was just free: connecting to it is refused. */
export const refusedUrl: Effect.Effect<string> = Effect.promise(() =>
  new Promise<string>((resolve, reject) => {
    const server = Http.createServer()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(`http://127.0.0.1:${port}`))
    })
  })
)
