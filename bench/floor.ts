/**
 * The floor of the stack, for `npm run bench:http`: a bare forwarder built
 * from the same parts as the server (Node's HTTP server under Effect's
 * router, the undici HTTP client, the PostgreSQL driver) that, for each
 * `POST /v1/proxy/openai`, commits one UPDATE of one row and then forwards
 * the request's `body` to the upstream's `/chat/completions` and answers
 * with the upstream's answer. No key, no policy, no ledger: what a metered
 * call costs above it is Spendgate's own work.
 *
 *   DATABASE_URL=postgres://… UPSTREAM=http://127.0.0.1:PORT/v1 PORT=0 node bench/floor.ts
 *
 * Prints `listening <port>` once it serves.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import { HttpClient, HttpClientRequest, HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "effect/http"
import { SqlClient } from "effect/sql"
import { createServer } from "node:http"

const upstream = process.env["UPSTREAM"] ?? "http://127.0.0.1:9301/v1"

const Forward = HttpRouter.use((router) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE IF NOT EXISTS bench_floor (id int PRIMARY KEY, n bigint NOT NULL)`
    yield* sql`INSERT INTO bench_floor VALUES (1, 0) ON CONFLICT (id) DO NOTHING`
    yield* router.add(
      "POST",
      "/v1/proxy/openai",
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const { body } = (yield* request.json) as { readonly body: unknown }
        yield* sql`UPDATE bench_floor SET n = n + 1 WHERE id = 1`
        const response = yield* client.execute(
          HttpClientRequest.bodyJsonUnsafe(HttpClientRequest.post(`${upstream}/chat/completions`), body)
        )
        return HttpServerResponse.jsonUnsafe(yield* response.json, { status: response.status })
      }).pipe(Effect.orDie)
    )
  })
)

const Announce = Layer.effectDiscard(
  Effect.gen(function*() {
    const server = yield* HttpServer.HttpServer
    if (server.address._tag !== "UnixPathAddress") console.log(`listening ${server.address.port}`)
  })
)

const Main = Layer.mergeAll(HttpRouter.serve(Forward, { disableLogger: true, disableListenLog: true }), Announce).pipe(
  Layer.provide(NodeHttpServer.layer(() => createServer(), { port: Number(process.env["PORT"] ?? 0), host: "127.0.0.1" })),
  Layer.provide(NodeHttpClient.layerUndici),
  Layer.provide(PgClient.layer({ url: Redacted.make(process.env["DATABASE_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres") }))
)

NodeRuntime.runMain(Layer.launch(Main))
