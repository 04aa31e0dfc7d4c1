/**
 * A local OpenAI-format upstream for the HTTP benchmark (bench/http.ts):
 * `POST /v1/chat/completions` answers at once with one fixed, documented
 * chat.completion (usage included: 12 prompt + 7 completion tokens), or its
 * server-sent stream when the request asks `"stream": true`;
 * `GET /v1/models` lists the model. Anything else is 404.
 *
 *   node bench/upstream.ts            # prints `listening <port>` on stdout (PORT=0: any free port)
 *
 * It runs as its own process, so that neither the load generator nor the
 * gateway shares its event loop.
 */
import { createServer } from "node:http"

const port = Number(process.env["PORT"] ?? 0)
let served = 0

const completion = (model: string): string =>
  JSON.stringify({
    id: `chatcmpl-bench-${++served}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message: { role: "assistant", content: "Hello from the benchmark upstream." }, finish_reason: "stop" }],
    usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 }
  })

const chunk = (model: string, delta: Record<string, unknown>, extra: Record<string, unknown> = {}): string =>
  `data: ${JSON.stringify({ id: "chatcmpl-bench", object: "chat.completion.chunk", model, choices: [{ index: 0, delta, ...extra }] })}\n\n`

const server = createServer((request, response) => {
  const parts: Array<Buffer> = []
  request.on("data", (part: Buffer) => parts.push(part))
  request.on("end", () => {
    const path = (request.url ?? "").split("?")[0]
    if (request.method === "GET" && path === "/v1/models") {
      response.writeHead(200, { "content-type": "application/json" })
      response.end(JSON.stringify({ object: "list", data: [{ id: "gpt-4o-mini", object: "model" }] }))
      return
    }
    if (request.method !== "POST" || path !== "/v1/chat/completions") {
      response.writeHead(404, { "content-type": "application/json" })
      response.end(JSON.stringify({ error: { message: "not found", type: "invalid_request_error" } }))
      return
    }
    let body: { model?: unknown; stream?: unknown } = {}
    try {
      body = JSON.parse(Buffer.concat(parts).toString("utf8") || "{}")
    } catch {
      // An unreadable body still gets the fixed answer: the benchmark measures the path, not the parser.
    }
    const model = typeof body.model === "string" ? body.model : "gpt-4o-mini"
    if (body.stream === true) {
      response.writeHead(200, { "content-type": "text/event-stream" })
      for (const word of ["Hello", " from", " the", " benchmark", "."]) response.write(chunk(model, { content: word }))
      response.write(
        `data: ${
          JSON.stringify({
            id: "chatcmpl-bench",
            object: "chat.completion.chunk",
            model,
            choices: [{ index: 0, delta: {}, finish_reason: "stop" }],
            usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 }
          })
        }\n\n`
      )
      response.end("data: [DONE]\n\n")
      return
    }
    response.writeHead(200, { "content-type": "application/json" })
    response.end(completion(model))
  })
})

server.keepAliveTimeout = 60_000
server.listen(port, "127.0.0.1", () => {
  const address = server.address()
  process.stdout.write(`listening ${typeof address === "object" && address !== null ? address.port : port}\n`)
})
const stop = () => server.close(() => process.exit(0))
process.on("SIGTERM", stop)
process.on("SIGINT", stop)
// The parent's end is this process's end: never outlive the benchmark.
process.on("disconnect", stop)
