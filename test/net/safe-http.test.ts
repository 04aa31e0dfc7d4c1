import { assert, describe, it } from "@effect/vitest"
import { Effect, Result, type Scope } from "effect"
import { execFileSync } from "node:child_process"
import * as diagnostics from "node:diagnostics_channel"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import * as Http from "node:http"
import type { AddressInfo, Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Tls from "node:tls"
import { gzipSync } from "node:zlib"
import * as SafeHttp from "../../adapters/net/SafeHttp.ts"
import { FetchFailed, OutboundHttp, UnsafeUrl } from "../../src/ports/Net.ts"

// ---------------------------------------------------------------------------
// Observing every outbound connection attempt of this process
// ---------------------------------------------------------------------------

interface Attempt {
  readonly via: "net" | "undici"
  /** Filled in once the socket has connected. */
  remote?: { readonly address: string; readonly port: number }
}

const attempts: Array<Attempt> = []

diagnostics.subscribe("net.client.socket", (message) => {
  const socket = (message as { socket: Socket }).socket
  const attempt: Attempt = { via: "net" }
  attempts.push(attempt)
  socket.once("connect", () => {
    attempt.remote = { address: socket.remoteAddress ?? "", port: socket.remotePort ?? 0 }
  })
})
diagnostics.subscribe("undici:client:beforeConnect", () => {
  attempts.push({ via: "undici" })
})

/** Runs `effect` and reports the connection attempts it made. */
const counting = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const before = attempts.length
    const exit = yield* Effect.exit(effect)
    return { exit, attempts: attempts.slice(before) }
  })

// ---------------------------------------------------------------------------
// Local servers (127.0.0.1 only)
// ---------------------------------------------------------------------------

interface Seen {
  readonly method: string
  readonly url: string
  readonly headers: Http.IncomingHttpHeaders
}

interface Local {
  readonly port: number
  /** `127.0.0.1:port`, as an allow-list entry. */
  readonly hostPort: string
  readonly origin: string
  readonly seen: Array<Seen>
}

const startServer = (
  handler: (req: Http.IncomingMessage, res: Http.ServerResponse, local: Local) => void
): Effect.Effect<Local, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ local: Local; server: Http.Server }>((resolve) => {
        const seen: Array<Seen> = []
        let local: Local | undefined
        const server = Http.createServer((req, res) => {
          seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers })
          res.on("error", () => {})
          handler(req, res, local!)
        })
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as AddressInfo
          local = { port, hostPort: `127.0.0.1:${port}`, origin: `http://127.0.0.1:${port}`, seen }
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

/** A lookup that records its calls; `answers` gives the answer for the n-th call (0-based). */
const scriptedLookup = (
  answers: (host: string, call: number) => ReadonlyArray<{ address: string; family: 4 | 6 }>
) => {
  const calls: Array<string> = []
  const lookup = (host: string) => {
    calls.push(host)
    return Promise.resolve(answers(host, calls.length - 1))
  }
  return { calls, lookup }
}

/** Never to be called: proves a URL was refused before any resolution. */
const noLookup = () => scriptedLookup((host) => {
  throw new Error(`unexpected lookup of ${host}`)
})

const text = (body: Uint8Array) => new TextDecoder().decode(body)

/**
 * Asserts that `check` refuses the URL, making no connection, and returns the
 * reason. Tests call it before `get` so that a regression in the rules fails
 * here instead of opening a connection to a public address.
 */
const refusedByCheck = (http: OutboundHttp["Service"], url: string) =>
  Effect.gen(function*() {
    const got = yield* counting(Effect.flip(http.check(url)))
    assert.deepStrictEqual(got.attempts, [])
    if (got.exit._tag === "Failure") return assert.fail(`check(${url}) passed; not fetching it`)
    assert.instanceOf(got.exit.value, UnsafeUrl)
    return got.exit.value.reason
  })

const failureOf = <A, E>(effect: Effect.Effect<A, E>) => Effect.flip(effect)

const limits = { maxBytes: 1024 * 1024, timeoutMs: 5_000 }

// ---------------------------------------------------------------------------
// classifyAddress
// ---------------------------------------------------------------------------

describe("classifyAddress", () => {
  const cases: ReadonlyArray<readonly [string, SafeHttp.AddressClass]> = [
    // Public IPv4, including the addresses right next to refused ranges.
    ["8.8.8.8", "public"],
    ["1.1.1.1", "public"],
    ["93.184.216.34", "public"],
    ["9.255.255.255", "public"],
    ["11.0.0.0", "public"],
    ["100.63.255.255", "public"],
    ["100.128.0.0", "public"],
    ["126.255.255.255", "public"],
    ["128.0.0.0", "public"],
    ["169.253.255.255", "public"],
    ["169.255.0.0", "public"],
    ["172.15.255.255", "public"],
    ["172.32.0.0", "public"],
    ["192.0.1.1", "public"],
    ["192.167.255.255", "public"],
    ["192.169.0.0", "public"],
    ["198.17.255.255", "public"],
    ["198.20.0.0", "public"],
    ["223.255.255.255", "public"],
    // Refused IPv4 ranges.
    ["0.0.0.0", "this network"],
    ["0.1.2.3", "this network"],
    ["10.0.0.1", "private"],
    ["10.255.255.255", "private"],
    ["100.64.0.1", "carrier-grade NAT"],
    ["100.100.100.200", "carrier-grade NAT"],
    ["100.127.255.254", "carrier-grade NAT"],
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["169.254.169.254", "link-local"],
    ["169.254.0.1", "link-local"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.0.0.8", "IETF protocol assignments"],
    ["192.0.2.1", "documentation"],
    ["192.88.99.1", "6to4 relay anycast"],
    ["192.168.1.1", "private"],
    ["198.18.0.1", "benchmarking"],
    ["198.19.255.255", "benchmarking"],
    ["198.51.100.7", "documentation"],
    ["203.0.113.9", "documentation"],
    ["224.0.0.1", "multicast"],
    ["239.255.255.250", "multicast"],
    ["240.0.0.1", "reserved"],
    ["255.255.255.254", "reserved"],
    ["255.255.255.255", "broadcast"],
    // Public IPv6, and the IPv4-embedding forms that reach a public address.
    ["2606:4700::1111", "public"],
    ["2001:4860:4860::8888", "public"],
    ["2a00:1450:4001:80b::200e", "public"],
    ["64:ff9b::808:808", "public"],
    ["64:ff9b::8.8.8.8", "public"],
    ["2002:808:808::1", "public"],
    // Refused IPv6.
    ["::", "unspecified"],
    ["0:0:0:0:0:0:0:0", "unspecified"],
    ["::1", "loopback"],
    ["0:0:0:0:0:0:0:1", "loopback"],
    ["[::1]", "loopback"],
    ["::ffff:127.0.0.1", "IPv4-mapped"],
    ["::ffff:7f00:1", "IPv4-mapped"],
    ["::ffff:169.254.169.254", "IPv4-mapped"],
    ["::ffff:10.0.0.1", "IPv4-mapped"],
    ["::ffff:8.8.8.8", "IPv4-mapped"],
    ["0:0:0:0:0:ffff:7f00:0001", "IPv4-mapped"],
    ["::127.0.0.1", "IPv4-compatible"],
    ["64:ff9b::7f00:1", "NAT64 of loopback"],
    ["64:ff9b::127.0.0.1", "NAT64 of loopback"],
    ["64:ff9b::a9fe:a9fe", "NAT64 of link-local"],
    ["64:ff9b::10.0.0.1", "NAT64 of private"],
    ["64:ff9b::100.64.0.1", "NAT64 of carrier-grade NAT"],
    ["64:ff9b:1::1", "NAT64 local-use"],
    ["2002:7f00:1::1", "6to4 of loopback"],
    ["2002:a9fe:a9fe::", "6to4 of link-local"],
    ["fc00::1", "unique local"],
    ["fd00:ec2::254", "unique local"],
    ["fdff:ffff::1", "unique local"],
    ["fe80::1", "link-local"],
    ["fe80::1%eth0", "link-local"],
    ["febf:ffff::1", "link-local"],
    ["fec0::1", "site-local"],
    ["ff02::1", "multicast"],
    ["ff05::1:3", "multicast"],
    ["2001:db8::1", "documentation"],
    ["2001:db8:ffff::1", "documentation"],
    ["3fff::1", "documentation"],
    ["2001::1", "IETF protocol assignments"],
    ["2001:2::1", "IETF protocol assignments"],
    ["100::1", "discard-only"],
    ["4000::1", "reserved"],
    ["::2", "IPv4-compatible"],
    // Not canonical addresses: never connected to.
    ["localhost", "not an IP address"],
    ["", "not an IP address"],
    ["127.1", "not an IP address"],
    ["0x7f.0.0.1", "not an IP address"],
    ["017700000001", "not an IP address"],
    ["2130706433", "not an IP address"],
    ["127.000.000.001", "not an IP address"],
    ["1.2.3.256", "not an IP address"],
    [" 8.8.8.8", "not an IP address"],
    ["::g", "not an IP address"],
    ["1::2::3", "not an IP address"],
    ["1:2:3:4:5:6:7:8:9", "not an IP address"],
    ["1:2:3:4:5:6:7::8", "not an IP address"],
    ["12345::", "not an IP address"],
    ["::1.2.3.4:1", "not an IP address"],
    ["fe80::1%", "not an IP address"]
  ]

  it("classifies every case of the table", () => {
    const wrong = cases
      .map(([ip, expected]) => ({ ip, expected, actual: SafeHttp.classifyAddress(ip) }))
      .filter(({ actual, expected }) => actual !== expected)
    assert.deepStrictEqual(wrong, [])
  })
})

// ---------------------------------------------------------------------------
// checkUrl (no resolution)
// ---------------------------------------------------------------------------

describe("checkUrl", () => {
  const ok = (url: string, allowHosts: ReadonlyArray<string> = []) => {
    const result = SafeHttp.checkUrl(url, allowHosts)
    if (Result.isFailure(result)) assert.fail(`${url} refused: ${result.failure.reason}`)
    return result.success
  }
  const refused = (url: string, allowHosts: ReadonlyArray<string> = []) => {
    const result = SafeHttp.checkUrl(url, allowHosts)
    if (Result.isSuccess(result)) assert.fail(`${url} was accepted`)
    assert.instanceOf(result.failure, UnsafeUrl)
    return result.failure.reason
  }

  it("normalises scheme and host case and fills in the default port", () => {
    const checked = ok("HTTP://EXAMPLE.COM/Some/Path?Q=1")
    assert.strictEqual(checked.url.href, "http://example.com/Some/Path?Q=1")
    assert.strictEqual(checked.host, "example.com")
    assert.strictEqual(checked.port, 80)
    assert.strictEqual(checked.address, undefined)
    assert.strictEqual(ok("HTTPS://Example.com").port, 443)
    assert.strictEqual(ok("https://example.com:8443/").port, 8443)
    assert.strictEqual(ok("http://8.8.8.8/").address, "8.8.8.8")
    assert.strictEqual(ok("http://[2606:4700::1111]/").address, "2606:4700::1111")
  })

  it("refuses every spelling of loopback and the other refused hosts", () => {
    assert.match(refused("http://127.0.0.1/"), /loopback/)
    assert.match(refused("http://2130706433/"), /127\.0\.0\.1 is not a public address \(loopback\)/)
    assert.match(refused("http://0x7f.1/"), /127\.0\.0\.1 is not a public address \(loopback\)/)
    assert.match(refused("http://017700000001/"), /127\.0\.0\.1 is not a public address \(loopback\)/)
    assert.match(refused("http://127.1/"), /loopback/)
    assert.match(refused("http://0/"), /this network/)
    assert.match(refused("http://[::1]/"), /loopback/)
    assert.match(refused("http://[::ffff:127.0.0.1]/"), /IPv4-mapped/)
    assert.match(refused("http://[0:0:0:0:0:ffff:a9fe:a9fe]/"), /IPv4-mapped/)
    assert.match(refused("http://[64:ff9b::169.254.169.254]/"), /NAT64 of link-local/)
    assert.match(refused("http://[fe80::1%25eth0]/"), /not a valid absolute URL/)
    assert.match(refused("http://localhost/"), /local or metadata host name/)
    assert.match(refused("http://localhost./"), /local or metadata host name/)
    assert.match(refused("http://LOCALHOST:8080/"), /local or metadata host name/)
    assert.match(refused("http://api.localhost/"), /loopback name/)
    assert.match(refused("http://metadata.google.internal/computeMetadata/v1/"), /metadata host name/)
    assert.match(refused("http://metadata/"), /metadata host name/)
    assert.match(refused("http://instance-data/latest/"), /metadata host name/)
    assert.match(refused("http://foo.internal/"), /private-use name/)
    assert.match(refused("file:///etc/passwd"), /file: scheme/)
    assert.match(refused("gopher://127.0.0.1:70/"), /gopher: scheme/)
    assert.match(refused("ftp://example.com/"), /ftp: scheme/)
    assert.match(refused("data:text/plain,hello"), /data: scheme/)
    assert.match(refused("javascript:alert(1)"), /javascript: scheme/)
    assert.match(refused("http://user:pass@example.com/"), /credentials/)
    assert.match(refused("http://user@example.com/"), /credentials/)
    assert.match(refused("http://:pass@example.com/"), /credentials/)
    assert.match(refused("not a url"), /not a valid absolute URL/)
    assert.match(refused("/relative/path"), /not a valid absolute URL/)
  })

  it("matches allow-list entries on host, and on port when the entry has one", () => {
    assert.isTrue(ok("http://127.0.0.1:8089/", ["127.0.0.1:8089"]).allowListed)
    assert.match(refused("http://127.0.0.1:8090/", ["127.0.0.1:8089"]), /loopback/)
    assert.isTrue(ok("http://127.0.0.1:1234/", ["127.0.0.1"]).allowListed)
    assert.isTrue(ok("http://127.0.0.1/", ["127.0.0.1:80"]).allowListed)
    assert.isTrue(ok("http://LocalHost:8089/x", ["localhost:8089"]).allowListed)
    assert.isTrue(ok("http://localhost.:8089/x", ["localhost:8089"]).allowListed)
    assert.match(refused("http://localhost:8088/", ["localhost:8089"]), /local or metadata/)
    assert.isTrue(ok("http://[::1]:9000/", ["[::1]:9000"]).allowListed)
    assert.isTrue(ok("http://[::1]:9000/", ["::1"]).allowListed)
    // The entry names a host, not an address: another spelling of the same IP is the same host...
    assert.isTrue(ok("http://2130706433:8089/", ["127.0.0.1:8089"]).allowListed)
    // ...but a name is not its address, nor the other way round.
    assert.match(refused("http://localhost:8089/", ["127.0.0.1:8089"]), /local or metadata/)
    assert.match(refused("http://127.0.0.1:8089/", ["localhost:8089"]), /loopback/)
    // Scheme and credential rules apply to allow-listed hosts too.
    assert.match(refused("ftp://127.0.0.1:8089/", ["127.0.0.1:8089"]), /scheme/)
    assert.match(refused("http://a:b@127.0.0.1:8089/", ["127.0.0.1:8089"]), /credentials/)
    assert.isFalse(ok("https://example.com/", ["127.0.0.1"]).allowListed)
  })

  it("refuses a malformed allow-list entry when the service is made", () => {
    assert.throws(() => SafeHttp.make({ allowHosts: ["http://127.0.0.1/"] }), /allowHosts entry/)
    assert.throws(() => SafeHttp.make({ allowHosts: ["127.0.0.1:99999"] }), /allowHosts entry/)
  })
})

// ---------------------------------------------------------------------------
// The SSRF table: refused, nothing resolved, nothing sent
// ---------------------------------------------------------------------------

describe("refused URLs", () => {
  const table = [
    "http://127.0.0.1/",
    "http://localhost/",
    "http://localhost./",
    "http://LOCALHOST/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://2130706433/",
    "http://0x7f.1/",
    "http://017700000001/",
    "http://0177.0.0.1/",
    "http://127.1/",
    "http://①②⑦.0.0.1/",
    "http://ｌｏｃａｌｈｏｓｔ/",
    "http://0.0.0.0:8080/",
    "http://10.0.0.1/",
    "http://100.64.0.1/",
    "http://192.168.0.1/",
    "http://172.16.0.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "https://127.0.0.1/",
    "file:///etc/passwd",
    "gopher://127.0.0.1:70/",
    "ftp://127.0.0.1/",
    "data:text/html,<h1>hi</h1>",
    "http://user:pass@example.com/",
    "http://[::]/"
  ]

  for (const url of table) {
    it.live(url, () =>
      Effect.gen(function*() {
        const { calls, lookup } = noLookup()
        const http = SafeHttp.make({ lookup })
        yield* refusedByCheck(http, url)
        const got = yield* counting(failureOf(http.get(url, limits)))
        const error = got.exit._tag === "Success" ? got.exit.value : assert.fail("expected an UnsafeUrl")
        assert.instanceOf(error, UnsafeUrl)
        assert.strictEqual(error.url, url)
        assert.deepStrictEqual(calls, [])
        assert.deepStrictEqual(got.attempts, [])
      }))
  }

  it.live("a name with one loopback answer among public ones", () =>
    Effect.gen(function*() {
      const { calls, lookup } = scriptedLookup(() => [
        { address: "93.184.216.34", family: 4 },
        { address: "127.0.0.1", family: 4 }
      ])
      const http = SafeHttp.make({ lookup })
      yield* refusedByCheck(http, "http://mixed.example/")
      calls.length = 0
      const got = yield* counting(Effect.flip(http.get("http://mixed.example/", limits)))
      assert.strictEqual(got.exit._tag, "Success")
      const error = got.exit._tag === "Success" ? got.exit.value : undefined
      assert.instanceOf(error, UnsafeUrl)
      assert.match((error as UnsafeUrl).reason, /mixed\.example resolves to 127\.0\.0\.1, not a public address \(loopback\)/)
      assert.deepStrictEqual(calls, ["mixed.example"])
      assert.deepStrictEqual(got.attempts, [])
    }))

  it.live("names answering IPv6 loopback, IPv4-mapped, ULA, or something that is not an address", () =>
    Effect.gen(function*() {
      const answers: Record<string, ReadonlyArray<{ address: string; family: 4 | 6 }>> = {
        "v6.example": [{ address: "2606:4700::1111", family: 6 }, { address: "::1", family: 6 }],
        "mapped.example": [{ address: "::ffff:127.0.0.1", family: 6 }],
        "ula.example": [{ address: "fd12:3456::1", family: 6 }],
        "meta.example": [{ address: "169.254.169.254", family: 4 }],
        "odd.example": [{ address: "0x7f000001", family: 4 }]
      }
      const { calls, lookup } = scriptedLookup((host) => answers[host] ?? [])
      const http = SafeHttp.make({ lookup })
      const before = attempts.length
      for (const [host, reason] of [
        ["v6.example", /::1, not a public address \(loopback\)/],
        ["mapped.example", /IPv4-mapped/],
        ["ula.example", /unique local/],
        ["meta.example", /169\.254\.169\.254, not a public address \(link-local\)/],
        ["odd.example", /not an IP address/]
      ] as const) {
        assert.match(yield* refusedByCheck(http, `https://${host}/`), reason)
        const error = yield* failureOf(http.get(`https://${host}/`, limits))
        assert.instanceOf(error, UnsafeUrl)
        assert.match((error as UnsafeUrl).reason, reason)
      }
      assert.strictEqual(calls.length, 10)
      assert.strictEqual(attempts.length, before)
    }))

  it.live("a name that does not resolve: FetchFailed for get, UnsafeUrl for check", () =>
    Effect.gen(function*() {
      const http = SafeHttp.make({
        lookup: (host) =>
          host === "empty.example"
            ? Promise.resolve([])
            : Promise.reject(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" }))
      })
      const missing = yield* failureOf(http.get("http://missing.example/", limits))
      assert.instanceOf(missing, FetchFailed)
      assert.strictEqual((missing as FetchFailed).reason, "network")
      assert.match((missing as FetchFailed).message, /missing\.example does not resolve.*ENOTFOUND/)
      const empty = yield* failureOf(http.get("http://empty.example/", limits))
      assert.strictEqual((empty as FetchFailed).reason, "network")
      const checked = yield* failureOf(http.check("http://missing.example/"))
      assert.instanceOf(checked, UnsafeUrl)
      assert.match(checked.reason, /does not resolve/)
    }))

  it.live("the system resolver: localhost resolves only when allow-listed", () =>
    Effect.gen(function*() {
      yield* SafeHttp.make({ allowHosts: ["localhost"] }).check("http://localhost/")
      const refused = yield* failureOf(SafeHttp.make().check("http://localhost/"))
      assert.instanceOf(refused, UnsafeUrl)
    }))
})

// ---------------------------------------------------------------------------
// Pinning: one resolution per hop, the socket goes to the checked address
// ---------------------------------------------------------------------------

describe("resolve once, connect to the checked address", () => {
  it.live("a name whose later answers change is connected to its first, checked answer", () =>
    Effect.gen(function*() {
      const server = yield* startServer((_req, res) => {
        res.writeHead(200, { "content-type": "text/plain" }).end("pinned")
      })
      // First answer: the local server. Any later answer would point elsewhere.
      const { calls, lookup } = scriptedLookup((_host, call) =>
        call === 0 ? [{ address: "127.0.0.1", family: 4 }] : [{ address: "127.0.0.2", family: 4 }]
      )
      const http = SafeHttp.make({ allowHosts: ["fixture.test"], lookup })
      const got = yield* counting(http.get(`http://fixture.test:${server.port}/page`, limits))
      assert.strictEqual(got.exit._tag, "Success")
      const response = got.exit._tag === "Success" ? got.exit.value : undefined
      assert.strictEqual(response?.status, 200)
      assert.strictEqual(text(response!.body), "pinned")
      assert.strictEqual(response?.url, `http://fixture.test:${server.port}/page`)
      assert.deepStrictEqual(calls, ["fixture.test"])
      assert.strictEqual(server.seen.length, 1)
      assert.strictEqual(server.seen[0]!.headers.host, `fixture.test:${server.port}`)
      // Exactly one socket, opened to the address the single lookup returned.
      const sockets = got.attempts.filter((attempt) => attempt.via === "net")
      assert.strictEqual(sockets.length, 1)
      assert.strictEqual(got.attempts.filter((attempt) => attempt.via === "undici").length, 1)
      assert.deepStrictEqual(sockets[0]!.remote, { address: "127.0.0.1", port: server.port })
    }))

  it.live("each hop of a redirect chain resolves its own host once", () =>
    Effect.gen(function*() {
      const target = yield* startServer((_req, res) => {
        res.writeHead(200, { "content-type": "text/plain" }).end("second")
      })
      const first = yield* startServer((_req, res) => {
        res.writeHead(302, { location: `http://second.test:${target.port}/landing` }).end()
      })
      const { calls, lookup } = scriptedLookup((_host, call) =>
        call < 2 ? [{ address: "127.0.0.1", family: 4 }] : [{ address: "127.0.0.2", family: 4 }]
      )
      const http = SafeHttp.make({ allowHosts: ["first.test", "second.test"], lookup })
      const got = yield* counting(http.get(`http://first.test:${first.port}/`, limits))
      const response = got.exit._tag === "Success" ? got.exit.value : assert.fail("expected a response")
      assert.strictEqual(text(response.body), "second")
      assert.strictEqual(response.url, `http://second.test:${target.port}/landing`)
      assert.deepStrictEqual(calls, ["first.test", "second.test"])
      assert.strictEqual(target.seen[0]!.headers.host, `second.test:${target.port}`)
      assert.deepStrictEqual(
        got.attempts.filter((attempt) => attempt.via === "net").map((attempt) => attempt.remote),
        [{ address: "127.0.0.1", port: first.port }, { address: "127.0.0.1", port: target.port }]
      )
    }))

  const credentials = selfSigned()
  it.live.skipIf(credentials === undefined)(
    "TLS goes to the pinned address with the URL's name as SNI, and the certificate is still checked",
    () =>
    Effect.gen(function*() {
      if (credentials === undefined) return
      const servernames: Array<string | undefined> = []
      const server = yield* Effect.acquireRelease(
        Effect.promise(() =>
          new Promise<Tls.Server>((resolve) => {
            const tlsServer = Tls.createServer({
              ...credentials,
              SNICallback: (name, callback) => {
                servernames.push(name)
                callback(null, Tls.createSecureContext(credentials))
              }
            })
            tlsServer.on("tlsClientError", () => {})
            tlsServer.listen(0, "127.0.0.1", () => resolve(tlsServer))
          })
        ),
        (tlsServer) => Effect.promise(() => new Promise<void>((resolve) => tlsServer.close(() => resolve())))
      )
      const port = (server.address() as AddressInfo).port
      const { calls, lookup } = scriptedLookup(() => [{ address: "127.0.0.1", family: 4 }])
      const http = SafeHttp.make({ allowHosts: ["fixture.test"], lookup })
      const error = yield* failureOf(http.get(`https://fixture.test:${port}/`, limits))
      assert.instanceOf(error, FetchFailed)
      assert.strictEqual((error as FetchFailed).reason, "network")
      assert.match((error as FetchFailed).message, /self-signed|certificate/i)
      assert.deepStrictEqual(servernames, ["fixture.test"])
      assert.deepStrictEqual(calls, ["fixture.test"])
    })
  )
})

/** A throwaway self-signed certificate for `fixture.test`, or undefined without openssl. */
const selfSigned = (): { key: string; cert: string } | undefined => {
  let dir: string | undefined
  try {
    dir = mkdtempSync(join(tmpdir(), "spendgate-safehttp-"))
    execFileSync("openssl", [
      "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
      "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"), "-days", "1",
      "-subj", "/CN=fixture.test", "-addext", "subjectAltName=DNS:fixture.test"
    ], { stdio: "ignore", timeout: 10_000 })
    return { key: readFileSync(join(dir, "key.pem"), "utf8"), cert: readFileSync(join(dir, "cert.pem"), "utf8") }
  } catch {
    return undefined
  } finally {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  }
}

// ---------------------------------------------------------------------------
// Fetching allow-listed local pages
// ---------------------------------------------------------------------------

describe("fetching", () => {
  it.live("an allow-listed local page: status, content type, body and request headers", () =>
    Effect.gen(function*() {
      const server = yield* startServer((req, res) => {
        if (req.url === "/missing") return void res.writeHead(404, { "content-type": "text/plain" }).end("nope")
        res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end("<h1>Hello</h1>")
      })
      const http = yield* Effect.gen(function*() {
        return yield* OutboundHttp
      }).pipe(
        Effect.provide(SafeHttp.layer({ allowHosts: [server.hostPort], lookup: noLookup().lookup }))
      )
      const response = yield* http.get(`${server.origin}/page?x=1`, {
        ...limits,
        headers: { Accept: "text/html", "X-Trace": "abc", Host: "evil.example" }
      })
      assert.deepStrictEqual(
        { ...response, body: text(response.body) },
        {
          url: `${server.origin}/page?x=1`,
          status: 200,
          contentType: "text/html; charset=utf-8",
          body: "<h1>Hello</h1>",
          truncated: false
        }
      )
      const seen = server.seen[0]!
      assert.strictEqual(seen.method, "GET")
      assert.strictEqual(seen.url, "/page?x=1")
      assert.strictEqual(seen.headers.accept, "text/html")
      assert.strictEqual(seen.headers["x-trace"], "abc")
      assert.strictEqual(seen.headers.host, server.hostPort)
      assert.strictEqual(seen.headers["user-agent"], SafeHttp.DEFAULT_USER_AGENT)
      // Any status is a response.
      const missing = yield* http.get(`${server.origin}/missing`, limits)
      assert.strictEqual(missing.status, 404)
      assert.strictEqual(text(missing.body), "nope")
      yield* http.check(`${server.origin}/anything`)
    }))

  it.live("upper-case scheme and host are normalised", () =>
    Effect.gen(function*() {
      const server = yield* startServer((_req, res) => void res.writeHead(200).end("ok"))
      const { calls, lookup } = scriptedLookup(() => [{ address: "127.0.0.1", family: 4 }])
      const http = SafeHttp.make({ allowHosts: ["fixture.test"], lookup, userAgent: "Test/1.0" })
      const response = yield* http.get(`HTTP://FIXTURE.TEST:${server.port}/Mixed/Case`, limits)
      assert.strictEqual(response.url, `http://fixture.test:${server.port}/Mixed/Case`)
      assert.deepStrictEqual(calls, ["fixture.test"])
      assert.strictEqual(server.seen[0]!.url, "/Mixed/Case")
      assert.strictEqual(server.seen[0]!.headers["user-agent"], "Test/1.0")
      const direct = yield* SafeHttp.make({ allowHosts: [server.hostPort] }).get(
        `HTTP://127.0.0.1:${server.port}/`,
        limits
      )
      assert.strictEqual(direct.status, 200)
    }))

  it.live("a gzip body is decoded", () =>
    Effect.gen(function*() {
      const server = yield* startServer((_req, res) => {
        res.writeHead(200, { "content-type": "text/plain", "content-encoding": "gzip" })
        res.end(gzipSync(Buffer.from("compressed hello")))
      })
      const response = yield* SafeHttp.make({ allowHosts: [server.hostPort] }).get(`${server.origin}/`, limits)
      assert.strictEqual(text(response.body), "compressed hello")
      assert.isFalse(response.truncated)
    }))

  it.live("response headers are bounded", () =>
    Effect.gen(function*() {
      const server = yield* startServer((_req, res) => {
        res.writeHead(200, { "x-huge": "a".repeat(100 * 1024) }).end("body")
      })
      const error = yield* failureOf(SafeHttp.make({ allowHosts: [server.hostPort] }).get(`${server.origin}/`, limits))
      assert.instanceOf(error, FetchFailed)
      assert.strictEqual((error as FetchFailed).reason, "network")
      assert.match((error as FetchFailed).message, /header/i)
    }))

  it.live("a connection refused is a network failure", () =>
    Effect.gen(function*() {
      // Bind and close a port so nothing listens there.
      const closed = yield* Effect.scoped(startServer(() => {}))
      const error = yield* failureOf(
        SafeHttp.make({ allowHosts: [closed.hostPort] }).get(`${closed.origin}/`, limits)
      )
      assert.instanceOf(error, FetchFailed)
      assert.strictEqual((error as FetchFailed).reason, "network")
      assert.match((error as FetchFailed).message, /ECONNREFUSED/)
    }))
})

// ---------------------------------------------------------------------------
// Redirects
// ---------------------------------------------------------------------------

describe("redirects", () => {
  it.live("a redirect to loopback on another port is refused: allow-list entries match host and port", () =>
    Effect.gen(function*() {
      const other = yield* startServer((_req, res) => void res.writeHead(200).end("must not be reached"))
      const first = yield* startServer((req, res) => {
        const location = req.url === "/to-private" ? "http://10.0.0.1/" : `http://127.0.0.1:${other.port}/secret`
        res.writeHead(302, { location }).end()
      })
      const { calls, lookup } = noLookup()
      const http = SafeHttp.make({ allowHosts: [first.hostPort], lookup })

      const toLoopback = yield* counting(failureOf(http.get(`${first.origin}/`, limits)))
      const error = toLoopback.exit._tag === "Success" ? toLoopback.exit.value : assert.fail("expected an error")
      assert.instanceOf(error, UnsafeUrl)
      assert.strictEqual(error.url, `http://127.0.0.1:${other.port}/secret`)
      assert.match((error as UnsafeUrl).reason, /loopback/)

      const toPrivate = yield* counting(failureOf(http.get(`${first.origin}/to-private`, limits)))
      const privateError = toPrivate.exit._tag === "Success" ? toPrivate.exit.value : assert.fail("expected an error")
      assert.instanceOf(privateError, UnsafeUrl)
      assert.strictEqual(privateError.url, "http://10.0.0.1/")

      assert.strictEqual(first.seen.length, 2)
      assert.strictEqual(other.seen.length, 0)
      assert.deepStrictEqual(calls, [])
      // One connection each, both to the allow-listed first hop.
      for (const got of [toLoopback, toPrivate]) {
        assert.deepStrictEqual(
          got.attempts.filter((attempt) => attempt.via === "net").map((attempt) => attempt.remote?.port),
          [first.port]
        )
      }
    }))

  it.live("a redirect to a name that resolves to loopback is refused after one lookup", () =>
    Effect.gen(function*() {
      const first = yield* startServer((_req, res) => void res.writeHead(307, { location: "http://rebound.example/" }).end())
      const { calls, lookup } = scriptedLookup(() => [{ address: "127.0.0.1", family: 4 }])
      const http = SafeHttp.make({ allowHosts: [first.hostPort], lookup })
      const error = yield* failureOf(http.get(`${first.origin}/`, limits))
      assert.instanceOf(error, UnsafeUrl)
      assert.match((error as UnsafeUrl).reason, /rebound\.example resolves to 127\.0\.0\.1, not a public address \(loopback\)/)
      assert.deepStrictEqual(calls, ["rebound.example"])
    }))

  it.live("a redirect to another scheme or to credentials is refused", () =>
    Effect.gen(function*() {
      const first = yield* startServer((req, res) => {
        const location = req.url === "/file" ? "file:///etc/passwd" : `http://u:p@127.0.0.1:${first.port}/`
        res.writeHead(301, { location }).end()
      })
      const http = SafeHttp.make({ allowHosts: [first.hostPort] })
      const file = yield* failureOf(http.get(`${first.origin}/file`, limits))
      assert.match((file as UnsafeUrl).reason, /file: scheme/)
      const creds = yield* failureOf(http.get(`${first.origin}/creds`, limits))
      assert.match((creds as UnsafeUrl).reason, /credentials/)
    }))

  it.live("relative redirects are followed with every redirect status; other 3xx are responses", () =>
    Effect.gen(function*() {
      const server = yield* startServer((req, res) => {
        const url = new URL(req.url ?? "/", "http://x")
        const status = Number(url.searchParams.get("status") ?? "0")
        if (url.pathname === "/dir/start") return void res.writeHead(status, { location: "next?from=start" }).end()
        if (url.pathname === "/dir/next") return void res.writeHead(200, { "content-type": "text/plain" }).end("landed")
        if (url.pathname === "/multiple") return void res.writeHead(300, { location: "/dir/next" }).end("choices")
        if (url.pathname === "/nowhere") return void res.writeHead(302).end("no location")
        res.writeHead(500).end()
      })
      const http = SafeHttp.make({ allowHosts: [server.hostPort] })
      for (const status of [301, 302, 303, 307, 308]) {
        const response = yield* http.get(`${server.origin}/dir/start?status=${status}`, limits)
        assert.strictEqual(response.status, 200, `after a ${status}`)
        assert.strictEqual(response.url, `${server.origin}/dir/next?from=start`)
        assert.strictEqual(text(response.body), "landed")
      }
      const multiple = yield* http.get(`${server.origin}/multiple`, limits)
      assert.strictEqual(multiple.status, 300)
      assert.strictEqual(text(multiple.body), "choices")
      const nowhere = yield* http.get(`${server.origin}/nowhere`, limits)
      assert.strictEqual(nowhere.status, 302)
    }))

  it.live("more than maxRedirects fails with too_many_redirects", () =>
    Effect.gen(function*() {
      const server = yield* startServer((req, res) => {
        const n = Number(req.url?.slice(1) ?? "0")
        if (n >= 5) return void res.writeHead(200).end(`end at ${n}`)
        res.writeHead(302, { location: `/${n + 1}` }).end()
      })
      const http = SafeHttp.make({ allowHosts: [server.hostPort] })
      // The default allows five redirects: /0 → … → /5.
      const five = yield* http.get(`${server.origin}/0`, limits)
      assert.strictEqual(text(five.body), "end at 5")
      const tooMany = yield* failureOf(http.get(`${server.origin}/0`, { ...limits, maxRedirects: 4 }))
      assert.instanceOf(tooMany, FetchFailed)
      assert.strictEqual((tooMany as FetchFailed).reason, "too_many_redirects")
      assert.strictEqual(tooMany.url, `${server.origin}/4`)
      const none = yield* failureOf(http.get(`${server.origin}/3`, { ...limits, maxRedirects: 0 }))
      assert.strictEqual((none as FetchFailed).reason, "too_many_redirects")
      // 6 + 5 + 1 requests.
      assert.strictEqual(server.seen.length, 12)
    }))

  it.live("credential headers are kept on the same origin and dropped across origins", () =>
    Effect.gen(function*() {
      const second = yield* startServer((_req, res) => void res.writeHead(200).end("second"))
      const first = yield* startServer((req, res) => {
        if (req.url === "/same") return void res.writeHead(302, { location: "/landing" }).end()
        if (req.url === "/landing") return void res.writeHead(200).end("first")
        res.writeHead(302, { location: `${second.origin}/` }).end()
      })
      const http = SafeHttp.make({ allowHosts: [first.hostPort, second.hostPort] })
      const headers = { Authorization: "Bearer t", Cookie: "a=b", "X-Keep": "1" }
      yield* http.get(`${first.origin}/same`, { ...limits, headers })
      yield* http.get(`${first.origin}/cross`, { ...limits, headers })
      assert.strictEqual(first.seen[1]!.headers.authorization, "Bearer t")
      assert.strictEqual(first.seen[1]!.headers.cookie, "a=b")
      const crossed = second.seen[0]!.headers
      assert.strictEqual(crossed.authorization, undefined)
      assert.strictEqual(crossed.cookie, undefined)
      assert.strictEqual(crossed["x-keep"], "1")
    }))
})

// ---------------------------------------------------------------------------
// Size and time
// ---------------------------------------------------------------------------

const FIVE_MB = 5 * 1024 * 1024

/** Serves `total` bytes of 'x' in 64 KiB writes, pausing briefly between them; records how it ended. */
const bigBody = (total: number, options: { readonly declareLength: boolean }) => {
  const outcome = { sent: 0, finished: false, closed: false }
  const handler = (_req: Http.IncomingMessage, res: Http.ServerResponse) => {
    res.writeHead(200, {
      "content-type": "application/octet-stream",
      ...(options.declareLength ? { "content-length": String(total) } : {})
    })
    const chunk = Buffer.alloc(64 * 1024, "x")
    res.on("finish", () => void (outcome.finished = true))
    res.on("close", () => void (outcome.closed = true))
    const pump = () => {
      if (res.destroyed) return
      if (outcome.sent >= total) return void res.end()
      const piece = chunk.subarray(0, Math.min(chunk.length, total - outcome.sent))
      outcome.sent += piece.length
      if (res.write(piece)) setTimeout(pump, 2)
      else res.once("drain", pump)
    }
    pump()
  }
  return { outcome, handler }
}

const waitUntil = (condition: () => boolean, ms = 3_000) =>
  Effect.gen(function*() {
    const deadline = Date.now() + ms
    while (!condition() && Date.now() < deadline) yield* Effect.sleep("10 millis")
    return condition()
  })

describe("limits", () => {
  it.live("a 5 MB body is cut at maxBytes and the connection dropped", () =>
    Effect.gen(function*() {
      const big = bigBody(FIVE_MB, { declareLength: true })
      const server = yield* startServer(big.handler)
      const http = SafeHttp.make({ allowHosts: [server.hostPort] })
      const response = yield* http.get(`${server.origin}/`, { maxBytes: 100_000, timeoutMs: 10_000 })
      assert.isTrue(response.truncated)
      assert.strictEqual(response.body.byteLength, 100_000)
      assert.isTrue(response.body.every((byte) => byte === 0x78))
      assert.isTrue(yield* waitUntil(() => big.outcome.closed), "the server saw the connection close")
      assert.isFalse(big.outcome.finished, "the server never got to send the whole body")
      assert.isBelow(big.outcome.sent, FIVE_MB)
    }))

  it.live("failIfLarger fails with too_large, by content-length or while streaming", () =>
    Effect.gen(function*() {
      const declared = bigBody(FIVE_MB, { declareLength: true })
      const chunked = bigBody(FIVE_MB, { declareLength: false })
      const server = yield* startServer((req, res) =>
        req.url === "/declared" ? declared.handler(req, res) : chunked.handler(req, res)
      )
      const http = SafeHttp.make({ allowHosts: [server.hostPort] })
      const options = { maxBytes: 100_000, timeoutMs: 10_000, failIfLarger: true }
      for (const path of ["/declared", "/chunked"]) {
        const error = yield* failureOf(http.get(`${server.origin}${path}`, options))
        assert.instanceOf(error, FetchFailed)
        assert.strictEqual((error as FetchFailed).reason, "too_large", path)
      }
      assert.isTrue(yield* waitUntil(() => declared.outcome.closed && chunked.outcome.closed))
      assert.isFalse(declared.outcome.finished || chunked.outcome.finished)
    }))

  it.live("a body of exactly maxBytes is complete, one byte more is truncated", () =>
    Effect.gen(function*() {
      const server = yield* startServer((req, res) => void res.writeHead(200).end("y".repeat(Number(req.url?.slice(1)))))
      const http = SafeHttp.make({ allowHosts: [server.hostPort] })
      const exact = yield* http.get(`${server.origin}/1000`, { maxBytes: 1000, timeoutMs: 5_000, failIfLarger: true })
      assert.strictEqual(exact.body.byteLength, 1000)
      assert.isFalse(exact.truncated)
      const over = yield* http.get(`${server.origin}/1001`, { maxBytes: 1000, timeoutMs: 5_000 })
      assert.strictEqual(over.body.byteLength, 1000)
      assert.isTrue(over.truncated)
      const empty = yield* http.get(`${server.origin}/0`, { maxBytes: 0, timeoutMs: 5_000 })
      assert.strictEqual(empty.body.byteLength, 0)
      assert.isFalse(empty.truncated)
    }))

  it.live("the cap counts decoded bytes: a gzip bomb stops at maxBytes", () =>
    Effect.gen(function*() {
      const bomb = gzipSync(Buffer.alloc(32 * 1024 * 1024))
      const server = yield* startServer((_req, res) => {
        res.writeHead(200, { "content-encoding": "gzip", "content-length": String(bomb.length) }).end(bomb)
      })
      assert.isBelow(bomb.length, 100 * 1024)
      const http = SafeHttp.make({ allowHosts: [server.hostPort] })
      const response = yield* http.get(`${server.origin}/`, { maxBytes: 1024 * 1024, timeoutMs: 10_000 })
      assert.isTrue(response.truncated)
      assert.strictEqual(response.body.byteLength, 1024 * 1024)
      const strict = yield* failureOf(
        http.get(`${server.origin}/`, { maxBytes: 1024 * 1024, timeoutMs: 10_000, failIfLarger: true })
      )
      assert.strictEqual((strict as FetchFailed).reason, "too_large")
    }))

  it.live("timeoutMs: a server that never answers", () =>
    Effect.gen(function*() {
      let closed = false
      const server = yield* startServer((req) => void req.socket.once("close", () => void (closed = true)))
      const http = SafeHttp.make({ allowHosts: [server.hostPort] })
      const started = Date.now()
      const error = yield* failureOf(http.get(`${server.origin}/`, { maxBytes: 1000, timeoutMs: 300 }))
      const elapsed = Date.now() - started
      assert.instanceOf(error, FetchFailed)
      assert.strictEqual((error as FetchFailed).reason, "timeout")
      assert.strictEqual(error.url, `${server.origin}/`)
      assert.isAtLeast(elapsed, 280)
      assert.isBelow(elapsed, 2_000)
      assert.isTrue(yield* waitUntil(() => closed), "the connection was dropped")
    }))

  it.live("timeoutMs: a body that trickles in", () =>
    Effect.gen(function*() {
      let closed = false
      const server = yield* startServer((_req, res) => {
        res.writeHead(200, { "content-length": "10000" })
        res.on("close", () => void (closed = true))
        const timer = setInterval(() => (res.destroyed ? clearInterval(timer) : res.write("z")), 50)
      })
      const http = SafeHttp.make({ allowHosts: [server.hostPort] })
      const started = Date.now()
      const error = yield* failureOf(http.get(`${server.origin}/`, { maxBytes: 100_000, timeoutMs: 400 }))
      const elapsed = Date.now() - started
      assert.strictEqual((error as FetchFailed).reason, "timeout")
      assert.isAtLeast(elapsed, 380)
      assert.isBelow(elapsed, 2_000)
      assert.isTrue(yield* waitUntil(() => closed), "the connection was dropped")
    }))

  it.live("timeoutMs covers the whole redirect chain", () =>
    Effect.gen(function*() {
      const server = yield* startServer((req, res) => {
        const n = Number(req.url?.slice(1) ?? "0")
        setTimeout(() => res.writeHead(302, { location: `/${n + 1}` }).end(), 100)
      })
      const http = SafeHttp.make({ allowHosts: [server.hostPort] })
      const error = yield* failureOf(http.get(`${server.origin}/0`, { maxBytes: 1000, timeoutMs: 350, maxRedirects: 20 }))
      assert.strictEqual((error as FetchFailed).reason, "timeout")
      assert.isAtMost(server.seen.length, 5)
    }))

  it.live("invalid limits are a defect, not a request", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(SafeHttp.make().get("https://example.com/", { maxBytes: -1, timeoutMs: 100 }))
      assert.strictEqual(exit._tag, "Failure")
    }))
})
