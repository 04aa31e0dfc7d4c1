import { NodeHttpClient } from "@effect/platform-node"
import { UpstreamClient } from "../../adapters/net/upstreamClient.ts"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, type Scope, Stream } from "effect"
import * as Http from "node:http"
import type { AddressInfo, LookupFunction } from "node:net"
import * as SafeHttp from "../../adapters/net/SafeHttp.ts"
import * as Transport from "../../adapters/services/transport.ts"
import { ProviderFailure } from "../../src/capabilities/Provider.ts"
import { UnsafeUrl } from "../../src/ports/Net.ts"
import { ServiceTransport } from "../../src/ports/ServiceTransport.ts"
import type { Service } from "../../src/services/Service.ts"

/**
 * The proxy's transport for registry services reaches exactly the address it
 * checked: one resolution, the socket pinned to its answer. The resolver here
 * is scripted and shared by everything that could resolve a name (SafeHttp's
 * check, the transport, and the HTTP client's own connector, standing for the
 * system resolver), so a second resolution anywhere would see its later answer.
 */

type Answers = ReadonlyArray<{ address: string; family: 4 | 6 }>

const scripted = (answers: (call: number) => Answers) => {
  const calls: Array<string> = []
  const lookup = (host: string) => {
    calls.push(host)
    return Promise.resolve(answers(calls.length - 1))
  }
  /** The same resolver in the shape `net.connect` takes. */
  const nodeLookup = ((hostname: string, options: { all?: boolean }, callback: (...args: Array<unknown>) => void) => {
    void lookup(hostname).then((list) =>
      options.all === true ? callback(null, list) : callback(null, list[0]!.address, list[0]!.family)
    )
  }) as unknown as LookupFunction
  return { calls, lookup, nodeLookup }
}

interface Local {
  readonly port: number
  readonly seen: Array<{ readonly url: string; readonly host: string | undefined; readonly body: string }>
}

const startServer = (): Effect.Effect<Local, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ local: Local; server: Http.Server }>((resolve) => {
        const seen: Local["seen"] = []
        const server = Http.createServer((req, res) => {
          let body = ""
          req.on("data", (c) => (body += c))
          req.on("end", () => {
            seen.push({ url: req.url ?? "", host: req.headers.host, body })
            if (req.url === "/redirect") {
              res.writeHead(302, { location: `http://127.0.0.1:${local.port}/echo` }).end()
              return
            }
            res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ echoed: body }))
          })
        })
        let local: Local
        server.listen(0, "127.0.0.1", () => {
          local = { port: (server.address() as AddressInfo).port, seen }
          resolve({ local, server })
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
  ).pipe(Effect.map(({ local }) => local))

const registryService = (baseUrl: string): Service => ({
  slug: "community",
  name: "Community",
  description: "test",
  baseUrl,
  capabilities: ["search"],
  origin: "registry",
  endpoints: []
})

const transportWith = (resolver: ReturnType<typeof scripted>, allowHosts: ReadonlyArray<string> = []) =>
  Transport.layer({ operatorServices: [], registry: { lookup: resolver.lookup, allowHosts }, timeoutMs: 1_500 }).pipe(
    Layer.provide(Layer.mergeAll(
      NodeHttpClient.layerUndiciOptions({ connect: { lookup: resolver.nodeLookup } }),
      UpstreamClient.layer,
      SafeHttp.layer({ lookup: resolver.lookup, allowHosts })
    ))
  )

const withTransport = <A, E, R>(f: (transport: ServiceTransport["Service"]) => Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    return yield* f(yield* ServiceTransport)
  })

const post = (path: string) => ({ method: "POST", path, query: {}, headers: {}, body: { q: "hi" } })

describe("the registry proxy's transport", () => {
  it.live("a name answering public on the check and loopback afterwards never reaches loopback", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      // First answer: a public address (unreachable from here). Any later answer: the local server.
      const rebinding = () =>
        scripted((call) =>
          call === 0 ? [{ address: "93.184.216.34", family: 4 }] : [{ address: "127.0.0.1", family: 4 }]
        )
      const resolver = rebinding()
      const streamResolver = rebinding()
      const service = registryService(`http://rebind.example:${server.port}`)
      const failed = yield* Effect.flip(
        withTransport((transport) => transport.send(service, post("/echo"))).pipe(
          Effect.provide(transportWith(resolver))
        )
      )
      assert.instanceOf(failed, ProviderFailure)
      // The socket went to the checked public address (refused here: no network), not to the later answer.
      assert.match((failed as ProviderFailure).message, /93\.184\.216\.34/)
      const streamed = yield* Effect.flip(
        withTransport((transport) =>
          Effect.scoped(Effect.flatMap(transport.stream(service, post("/echo")), (r) => Stream.runDrain(r.body))))
          .pipe(Effect.provide(transportWith(streamResolver)))
      )
      assert.instanceOf(streamed, ProviderFailure)
      assert.deepStrictEqual(server.seen, [])
      // One resolution per request, answered with the public address.
      assert.deepStrictEqual(resolver.calls, ["rebind.example"])
      assert.deepStrictEqual(streamResolver.calls, ["rebind.example"])
    }))

  it.live("a name answering loopback first is refused before any connection", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const resolver = scripted(() => [{ address: "127.0.0.1", family: 4 }])
      const failed = yield* Effect.flip(
        withTransport((transport) =>
          transport.send(registryService(`http://loop.example:${server.port}`), post("/echo"))).pipe(
            Effect.provide(transportWith(resolver))
          )
      )
      assert.instanceOf(failed, UnsafeUrl)
      assert.match((failed as UnsafeUrl).reason, /127\.0\.0\.1, not a public address \(loopback\)/)
      assert.deepStrictEqual(server.seen, [])
    }))

  it.live("an allowed host is reached at its one checked answer, with its name as Host; redirects are not followed", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      // Later answers point where nothing listens: only the first, checked answer works.
      const resolver = scripted((call) =>
        call === 0 ? [{ address: "127.0.0.1", family: 4 }] : [{ address: "127.0.0.2", family: 4 }]
      )
      const service = registryService(`http://fixture.test:${server.port}`)
      const transport = transportWith(resolver, ["fixture.test"])
      const answer = yield* withTransport((t) => t.send(service, post("/echo"))).pipe(
        Effect.provide(transport)
      )
      assert.strictEqual(answer.status, 200)
      assert.deepStrictEqual(answer.body, { echoed: JSON.stringify({ q: "hi" }) })
      assert.strictEqual(server.seen[0]!.host, `fixture.test:${server.port}`)
      assert.deepStrictEqual(resolver.calls, ["fixture.test"])

      resolver.calls.length = 0
      const redirected = yield* withTransport((t) => t.send(service, post("/redirect"))).pipe(
        Effect.provide(transportWith(scripted(() => [{ address: "127.0.0.1", family: 4 }]), ["fixture.test"]))
      )
      assert.strictEqual(redirected.status, 302)
      assert.deepStrictEqual(server.seen.map((s) => s.url), ["/echo", "/redirect"])
    }))
})
