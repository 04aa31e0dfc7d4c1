/**
 * `OutboundHttp` for fetches whose address a caller chose (pages to read or
 * scrape, audio by URL, ...): the server-side request forgery guard.
 *
 * Rules, applied to the first URL and again to every redirect target:
 *
 * - `http:` and `https:` only; no user name or password in the URL; any port.
 * - Host names that always mean "this machine" or a cloud metadata service are
 *   refused by name (`localhost`, `*.localhost`, `*.internal`, `metadata`,
 *   `instance-data`, ...). IP literals are classified directly; the WHATWG URL
 *   parser has already turned decimal, octal and hex IPv4 spellings
 *   (`2130706433`, `0x7f.1`, `017700000001`) into dotted form and compressed
 *   IPv6, so one classifier sees every spelling.
 * - A name is resolved exactly once per hop (all A/AAAA answers). If any
 *   answer is not a public unicast address the URL is refused; otherwise the
 *   connection goes to the first answer, pinned: the socket is opened to that
 *   IP literal by a connector of our own, so neither undici nor the OS resolver
 *   ever sees the name again (no window for DNS rebinding). The `Host` header
 *   and, over TLS, the SNI name and the certificate check still use the name
 *   from the URL.
 * - `allowHosts` (local development, tests) lists hosts, optionally with a
 *   port, that skip the address rules. An entry with a port matches that port
 *   only; matching is on the URL's host, never on what a name resolves to.
 *
 * Limits: one deadline (`timeoutMs`) covers resolution, every hop and the
 * body; redirects (301, 302, 303, 307, 308) are followed by hand up to
 * `maxRedirects`; the body is streamed and cut at `maxBytes` of *decoded*
 * bytes (a small gzip or brotli body cannot expand past the cap), after which
 * the connection is dropped; response headers are bounded; HTTP/1.1 only.
 * Each hop uses a dispatcher of its own that is destroyed when the hop ends,
 * so no connection outlives the address check that allowed it.
 */
import { lookup as dnsLookup } from "node:dns/promises"
import { isIP } from "node:net"
import { Data, Duration, Effect, Layer, Result, type Scope } from "effect"
import { Agent, buildConnector, fetch } from "undici"
import { FetchFailed, type FetchedResponse, type FetchOptions, OutboundHttp, UnsafeUrl } from "../../src/ports/Net.ts"

// ---------------------------------------------------------------------------
// Address classification
// ---------------------------------------------------------------------------

export type Ipv4Refusal =
  | "this network"
  | "private"
  | "carrier-grade NAT"
  | "loopback"
  | "link-local"
  | "IETF protocol assignments"
  | "documentation"
  | "6to4 relay anycast"
  | "benchmarking"
  | "multicast"
  | "reserved"
  | "broadcast"

export type Ipv6Refusal =
  | "unspecified"
  | "loopback"
  | "IPv4-mapped"
  | "IPv4-compatible"
  | `NAT64 of ${Ipv4Refusal}`
  | "NAT64 local-use"
  | `6to4 of ${Ipv4Refusal}`
  | "IETF protocol assignments"
  | "documentation"
  | "unique local"
  | "link-local"
  | "site-local"
  | "multicast"
  | "discard-only"
  | "reserved"

/** "public", or why the address may not be connected to. */
export type AddressClass = "public" | Ipv4Refusal | Ipv6Refusal | "not an IP address"

/** Canonical dotted-decimal IPv4 to an unsigned 32-bit number; leading zeros and other spellings are refused. */
const parseIpv4 = (text: string): number | undefined => {
  const parts = text.split(".")
  if (parts.length !== 4) return undefined
  let value = 0
  for (const part of parts) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(part)) return undefined
    const octet = Number(part)
    if (octet > 255) return undefined
    value = value * 256 + octet
  }
  return value
}

/** IPv6 (with `::`, an optional dotted IPv4 tail and an optional zone) to a 128-bit number. */
const parseIpv6 = (input: string): bigint | undefined => {
  let text = input
  const zone = text.indexOf("%")
  if (zone !== -1) {
    if (zone === text.length - 1) return undefined
    text = text.slice(0, zone)
  }
  const halves = text.split("::")
  if (halves.length > 2) return undefined
  const groupsOf = (half: string): Array<number> | undefined => {
    if (half === "") return []
    const groups: Array<number> = []
    const pieces = half.split(":")
    for (let i = 0; i < pieces.length; i++) {
      const piece = pieces[i]!
      if (i === pieces.length - 1 && piece.includes(".")) {
        const v4 = parseIpv4(piece)
        if (v4 === undefined) return undefined
        groups.push(Math.floor(v4 / 65536), v4 % 65536)
      } else if (/^[0-9a-fA-F]{1,4}$/.test(piece)) {
        groups.push(parseInt(piece, 16))
      } else {
        return undefined
      }
    }
    return groups
  }
  const head = groupsOf(halves[0]!)
  const tail = halves.length === 2 ? groupsOf(halves[1]!) : []
  if (head === undefined || tail === undefined) return undefined
  // A dotted tail is only valid at the very end of the address.
  if (halves.length === 2 && halves[0]!.includes(".")) return undefined
  let groups: Array<number>
  if (halves.length === 2) {
    const missing = 8 - head.length - tail.length
    if (missing < 1) return undefined
    groups = [...head, ...new Array<number>(missing).fill(0), ...tail]
  } else {
    groups = head
  }
  if (groups.length !== 8) return undefined
  return groups.reduce((acc, group) => (acc << 16n) | BigInt(group), 0n)
}

const v4 = (cidr: string): { readonly base: number; readonly bits: number } => {
  const [address, bits] = cidr.split("/")
  return { base: parseIpv4(address!)!, bits: Number(bits) }
}

const IPV4_RANGES: ReadonlyArray<{ readonly base: number; readonly bits: number; readonly reason: Ipv4Refusal }> = [
  { ...v4("0.0.0.0/8"), reason: "this network" },
  { ...v4("10.0.0.0/8"), reason: "private" },
  { ...v4("100.64.0.0/10"), reason: "carrier-grade NAT" },
  { ...v4("127.0.0.0/8"), reason: "loopback" },
  // Includes 169.254.169.254, the metadata service of most clouds.
  { ...v4("169.254.0.0/16"), reason: "link-local" },
  { ...v4("172.16.0.0/12"), reason: "private" },
  { ...v4("192.0.0.0/24"), reason: "IETF protocol assignments" },
  { ...v4("192.0.2.0/24"), reason: "documentation" },
  { ...v4("192.88.99.0/24"), reason: "6to4 relay anycast" },
  { ...v4("192.168.0.0/16"), reason: "private" },
  { ...v4("198.18.0.0/15"), reason: "benchmarking" },
  { ...v4("198.51.100.0/24"), reason: "documentation" },
  { ...v4("203.0.113.0/24"), reason: "documentation" },
  { ...v4("224.0.0.0/4"), reason: "multicast" },
  { ...v4("255.255.255.255/32"), reason: "broadcast" },
  { ...v4("240.0.0.0/4"), reason: "reserved" }
]

const inIpv4Range = (address: number, base: number, bits: number): boolean =>
  bits === 0 || Math.floor(address / 2 ** (32 - bits)) === Math.floor(base / 2 ** (32 - bits))

const classifyIpv4 = (address: number): "public" | Ipv4Refusal =>
  IPV4_RANGES.find((range) => inIpv4Range(address, range.base, range.bits))?.reason ?? "public"

const v6 = (cidr: string): { readonly base: bigint; readonly bits: number } => {
  const [address, bits] = cidr.split("/")
  return { base: parseIpv6(address!)!, bits: Number(bits) }
}

const inIpv6Range = (address: bigint, range: { readonly base: bigint; readonly bits: number }): boolean => {
  const shift = BigInt(128 - range.bits)
  return address >> shift === range.base >> shift
}

const IPV6_UNSPECIFIED = v6("::/128")
const IPV6_LOOPBACK = v6("::1/128")
const IPV6_MAPPED = v6("::ffff:0:0/96")
const IPV6_COMPATIBLE = v6("::/96")
const IPV6_NAT64 = v6("64:ff9b::/96")
const IPV6_6TO4 = v6("2002::/16")
const IPV6_GLOBAL_UNICAST = v6("2000::/3")

/** Checked in order, after the ranges that embed an IPv4 address. */
const IPV6_RANGES: ReadonlyArray<{ readonly base: bigint; readonly bits: number; readonly reason: Ipv6Refusal }> = [
  { ...v6("64:ff9b:1::/48"), reason: "NAT64 local-use" },
  { ...v6("100::/64"), reason: "discard-only" },
  { ...v6("2001:db8::/32"), reason: "documentation" },
  // Teredo (2001::/32), benchmarking (2001:2::/48), ORCHID and friends.
  { ...v6("2001::/23"), reason: "IETF protocol assignments" },
  { ...v6("3fff::/20"), reason: "documentation" },
  { ...v6("fc00::/7"), reason: "unique local" },
  { ...v6("fe80::/10"), reason: "link-local" },
  { ...v6("fec0::/10"), reason: "site-local" },
  { ...v6("ff00::/8"), reason: "multicast" }
]

const classifyIpv6 = (address: bigint): "public" | Ipv6Refusal => {
  if (inIpv6Range(address, IPV6_UNSPECIFIED)) return "unspecified"
  if (inIpv6Range(address, IPV6_LOOPBACK)) return "loopback"
  // IPv4-mapped addresses are refused whatever they embed: a public service has
  // no reason to publish one, and the port contract refuses them outright.
  if (inIpv6Range(address, IPV6_MAPPED)) return "IPv4-mapped"
  if (inIpv6Range(address, IPV6_COMPATIBLE)) return "IPv4-compatible"
  if (inIpv6Range(address, IPV6_NAT64)) {
    // The well-known NAT64 prefix reaches the embedded IPv4 address, so that address decides.
    const embedded = classifyIpv4(Number(address & 0xffffffffn))
    return embedded === "public" ? "public" : `NAT64 of ${embedded}`
  }
  if (inIpv6Range(address, IPV6_6TO4)) {
    const embedded = classifyIpv4(Number((address >> 80n) & 0xffffffffn))
    return embedded === "public" ? "public" : `6to4 of ${embedded}`
  }
  const listed = IPV6_RANGES.find((range) => inIpv6Range(address, range))
  if (listed !== undefined) return listed.reason
  // Everything outside 2000::/3 is unassigned or special-purpose.
  return inIpv6Range(address, IPV6_GLOBAL_UNICAST) ? "public" : "reserved"
}

/**
 * Classifies one IP address: "public" for a public unicast address, otherwise
 * the reason it is refused. Accepts canonical dotted IPv4 and any valid IPv6
 * text (brackets and a zone are tolerated); anything else, including IPv4
 * spellings with leading zeros, is "not an IP address".
 */
export const classifyAddress = (ip: string): AddressClass => {
  const text = ip.startsWith("[") && ip.endsWith("]") ? ip.slice(1, -1) : ip
  const asV4 = parseIpv4(text)
  if (asV4 !== undefined) return classifyIpv4(asV4)
  if (text.includes(":")) {
    const asV6 = parseIpv6(text)
    if (asV6 !== undefined) return classifyIpv6(asV6)
  }
  return "not an IP address"
}

// ---------------------------------------------------------------------------
// URL checks
// ---------------------------------------------------------------------------

/** Names refused before any resolution. */
const REFUSED_NAMES: ReadonlySet<string> = new Set([
  "localhost",
  "metadata",
  "metadata.google.internal",
  "metadata.goog",
  "instance-data",
  "instance-data.ec2.internal"
])

const refusedName = (name: string): string | undefined => {
  if (REFUSED_NAMES.has(name)) return `${name} is a local or metadata host name`
  if (name.endsWith(".localhost")) return `${name} is a loopback name (*.localhost)`
  if (name.endsWith(".internal")) return `${name} is a private-use name (*.internal)`
  return undefined
}

interface AllowEntry {
  readonly host: string
  readonly port: number | undefined
}

/** The URL parser's form of a host (lower case, IPv4 dotted, IPv6 compressed), without brackets or a final dot. */
const canonicalHost = (hostname: string): string => {
  const bare = hostname.startsWith("[") && hostname.endsWith("]") ? hostname.slice(1, -1) : hostname
  return bare.endsWith(".") ? bare.slice(0, -1) : bare
}

const parseAllowEntry = (entry: string): AllowEntry => {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry)
  const colons = entry.split(":").length - 1
  const [host, port] = bracketed !== null
    ? [`[${bracketed[1]!}]`, bracketed[2]]
    : colons >= 2
    ? [`[${entry}]`, undefined]
    : (/^([^:]+)(?::(\d+))?$/.exec(entry)?.slice(1, 3) ?? [undefined, undefined])
  let parsed: URL | undefined
  try {
    parsed = host === undefined ? undefined : new URL(`http://${host}/`)
  } catch {
    parsed = undefined
  }
  const portNumber = port === undefined ? undefined : Number(port)
  if (parsed === undefined || parsed.hostname === "" || (portNumber !== undefined && portNumber > 65535)) {
    throw new RangeError(`SafeHttp: allowHosts entry "${entry}" is not a host name or IP literal with an optional :port`)
  }
  return { host: canonicalHost(parsed.hostname), port: portNumber }
}

/** A URL that passed the static rules; `address` is set when the host is an IP literal. */
export interface CheckedUrl {
  readonly url: URL
  /** Host without brackets or a trailing dot. */
  readonly host: string
  /** The port connected to (the scheme's default when the URL has none). */
  readonly port: number
  /** The IP literal of the URL, or undefined when the host is a name to resolve. */
  readonly address: string | undefined
  /** Matched an `allowHosts` entry: the address rules do not apply to it. */
  readonly allowListed: boolean
}

const unsafe = (url: string, reason: string) => new UnsafeUrl({ url, reason })

/**
 * The rules that need no resolution: scheme, credentials, refused names and
 * IP literals, and the allow-list. A name that passes must still have every
 * address it resolves to checked with `classifyAddress` (as `OutboundHttp`
 * does); callers that only store a URL (e.g. a service's base URL) can use
 * this alone and add their own requirements, such as `https:`.
 */
export const checkUrl = (
  url: string | URL,
  allowHosts: ReadonlyArray<string> = []
): Result.Result<CheckedUrl, UnsafeUrl> => {
  const text = typeof url === "string" ? url : url.href
  let parsed: URL
  try {
    parsed = new URL(text)
  } catch {
    return Result.fail(unsafe(text, "not a valid absolute URL"))
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    return Result.fail(unsafe(text, `the ${parsed.protocol} scheme is not allowed (http and https only)`))
  }
  if (parsed.username !== "" || parsed.password !== "") {
    return Result.fail(unsafe(text, "credentials in the URL are not allowed"))
  }
  const host = canonicalHost(parsed.hostname)
  if (host === "") return Result.fail(unsafe(text, "the URL has no host"))
  const port = parsed.port === "" ? (parsed.protocol === "https:" ? 443 : 80) : Number(parsed.port)
  const allowListed = allowHosts.some((raw) => {
    const entry = parseAllowEntry(raw)
    return entry.host === host && (entry.port === undefined || entry.port === port)
  })
  const address = isIP(host) === 0 ? undefined : host
  if (!allowListed) {
    if (address !== undefined) {
      const verdict = classifyAddress(address)
      if (verdict !== "public") return Result.fail(unsafe(text, `${address} is not a public address (${verdict})`))
    } else {
      const byName = refusedName(host)
      if (byName !== undefined) return Result.fail(unsafe(text, byName))
    }
  }
  return Result.succeed({ url: parsed, host, port, address, allowListed })
}

// ---------------------------------------------------------------------------
// Resolution
// ---------------------------------------------------------------------------

export type Lookup = (host: string) => Promise<ReadonlyArray<{ readonly address: string; readonly family: 4 | 6 }>>

/** All A and AAAA answers, in the resolver's order. */
const systemLookup: Lookup = async (host) => {
  const answers = await dnsLookup(host, { all: true, order: "verbatim" })
  return answers.map((answer) => ({ address: answer.address, family: answer.family === 6 ? 6 : 4 }))
}

/** Where one hop connects: the URL as sent, and the checked IP the socket goes to. */
interface Target {
  readonly url: URL
  readonly address: string
  /** Name for TLS SNI and certificate checks; undefined for IP-literal URLs. */
  readonly servername: string | undefined
}

class ResolveFailed extends Data.TaggedError("ResolveFailed")<{ readonly host: string; readonly message: string }> {}

const resolveTarget = (checked: CheckedUrl, lookup: Lookup): Effect.Effect<Target, UnsafeUrl | ResolveFailed> => {
  if (checked.address !== undefined) {
    return Effect.succeed({ url: checked.url, address: checked.address, servername: undefined })
  }
  return Effect.tryPromise({
    try: () => lookup(checked.host),
    catch: (cause) => new ResolveFailed({ host: checked.host, message: describeError(cause) })
  }).pipe(
    Effect.flatMap((answers): Effect.Effect<Target, UnsafeUrl | ResolveFailed> => {
      if (answers.length === 0) return Effect.fail(new ResolveFailed({ host: checked.host, message: "no addresses" }))
      for (const answer of answers) {
        const verdict = classifyAddress(answer.address)
        // Even an allow-listed name must resolve to IP literals: the connector
        // is handed the answer as is, and a name there would be resolved again.
        if (verdict === "not an IP address" || isIP(answer.address) === 0) {
          return Effect.fail(unsafe(checked.url.href, `${checked.host} resolved to "${answer.address}", not an IP address`))
        }
        if (!checked.allowListed && verdict !== "public") {
          return Effect.fail(
            unsafe(checked.url.href, `${checked.host} resolves to ${answer.address}, not a public address (${verdict})`)
          )
        }
      }
      return Effect.succeed({ url: checked.url, address: answers[0]!.address, servername: checked.host })
    })
  )
}

// ---------------------------------------------------------------------------
// One hop
// ---------------------------------------------------------------------------

/** Response header block limit (status line and all headers). */
const MAX_HEADER_BYTES = 32 * 1024
const REDIRECT_STATUSES: ReadonlySet<number> = new Set([301, 302, 303, 307, 308])
/** Never taken from the caller: the transport owns them. */
const TRANSPORT_HEADERS: ReadonlySet<string> = new Set([
  "host",
  "connection",
  "keep-alive",
  "content-length",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "expect",
  "proxy-connection"
])
/** Dropped when a redirect leaves the origin they were meant for. */
const CREDENTIAL_HEADERS: ReadonlySet<string> = new Set(["authorization", "cookie", "proxy-authorization"])

export const DEFAULT_USER_AGENT = "Spendgate/0.1 (+outbound fetch for agents)"
const DEFAULT_MAX_REDIRECTS = 5

type HopOutcome =
  | { readonly _tag: "Redirect"; readonly location: string }
  | { readonly _tag: "TooLarge" }
  | { readonly _tag: "Response"; readonly response: FetchedResponse }

/**
 * A connector that opens the socket to the checked address whatever host the
 * dispatcher asks for; over TLS the SNI name (and so the certificate check)
 * is the URL's host name.
 */
const pinnedConnector = (target: Target, timeoutMs: number): buildConnector.connector => {
  const connect = buildConnector({ allowH2: false, maxCachedSessions: 0, timeout: timeoutMs })
  return (options, callback) =>
    connect({
      ...options,
      hostname: target.address,
      ...(options.protocol === "https:" && target.servername !== undefined ? { servername: target.servername } : {})
    }, callback)
}

const exchange = async (
  target: Target,
  headers: Record<string, string>,
  options: FetchOptions,
  signal: AbortSignal
): Promise<HopOutcome> => {
  // Undici's own timers are a backstop only; the caller's deadline fires first.
  const backstopMs = options.timeoutMs + 1_000
  const agent = new Agent({
    connect: pinnedConnector(target, backstopMs),
    allowH2: false,
    maxHeaderSize: MAX_HEADER_BYTES,
    headersTimeout: backstopMs,
    bodyTimeout: backstopMs,
    connections: 1
  })
  try {
    const response = await fetch(target.url.href, { dispatcher: agent, redirect: "manual", headers, signal })
    const location = response.headers.get("location")
    if (REDIRECT_STATUSES.has(response.status) && location !== null) {
      void response.body?.cancel().catch(() => undefined)
      return { _tag: "Redirect", location }
    }
    const encoded = (response.headers.get("content-encoding") ?? "identity").trim().toLowerCase() !== "identity"
    const declared = Number(response.headers.get("content-length") ?? Number.NaN)
    if (options.failIfLarger === true && !encoded && declared > options.maxBytes) {
      void response.body?.cancel().catch(() => undefined)
      return { _tag: "TooLarge" }
    }
    const chunks: Array<Uint8Array> = []
    let received = 0
    let truncated = false
    if (response.body !== null) {
      const reader = response.body.getReader()
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        const chunk = value as Uint8Array
        if (received + chunk.byteLength > options.maxBytes) {
          // Past the cap: stop reading; the agent is destroyed below, which drops the connection.
          void reader.cancel().catch(() => undefined)
          if (options.failIfLarger === true) return { _tag: "TooLarge" }
          chunks.push(chunk.subarray(0, options.maxBytes - received))
          received = options.maxBytes
          truncated = true
          break
        }
        chunks.push(chunk)
        received += chunk.byteLength
      }
    }
    const body = new Uint8Array(received)
    let offset = 0
    for (const chunk of chunks) {
      body.set(chunk, offset)
      offset += chunk.byteLength
    }
    return {
      _tag: "Response",
      response: {
        url: target.url.href,
        status: response.status,
        contentType: response.headers.get("content-type") ?? "",
        body,
        truncated
      }
    }
  } finally {
    void agent.destroy().catch(() => undefined)
  }
}

/** A readable account of a Node/undici failure, following `cause` links. */
const describeError = (error: unknown): string => {
  const parts: Array<string> = []
  let current: unknown = error
  for (let depth = 0; depth < 4 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code
    const text = typeof code === "string" && !current.message.includes(code) ? `${code}: ${current.message}` : current.message
    if (!parts.includes(text)) parts.push(text)
    current = (current as { cause?: unknown }).cause
  }
  return parts.length === 0 ? String(error) : parts.join(" (") + ")".repeat(parts.length - 1)
}

// ---------------------------------------------------------------------------
// The service
// ---------------------------------------------------------------------------

export interface Options {
  /** Hosts (names or IP literals, optionally `:port`) exempt from the address rules; for development and tests. */
  readonly allowHosts?: ReadonlyArray<string> | undefined
  /** Resolver returning every A/AAAA answer; default `node:dns/promises` `lookup(host, { all: true })`, unsorted. */
  readonly lookup?: ((host: string) => Promise<ReadonlyArray<{ address: string; family: 4 | 6 }>>) | undefined
  /** Default `DEFAULT_USER_AGENT`. */
  readonly userAgent?: string | undefined
}

const requestHeaders = (
  userAgent: string,
  extra: Readonly<Record<string, string>> | undefined,
  sameOrigin: boolean
): Record<string, string> => {
  const headers: Record<string, string> = { "user-agent": userAgent, accept: "*/*" }
  for (const [name, value] of Object.entries(extra ?? {})) {
    const key = name.toLowerCase()
    if (TRANSPORT_HEADERS.has(key)) continue
    if (!sameOrigin && CREDENTIAL_HEADERS.has(key)) continue
    headers[key] = value
  }
  return headers
}

const validateLimits = (options: FetchOptions): string | undefined => {
  if (!Number.isSafeInteger(options.maxBytes) || options.maxBytes < 0) return "maxBytes must be a non-negative integer"
  if (!Number.isFinite(options.timeoutMs) || options.timeoutMs <= 0) return "timeoutMs must be a positive number"
  const redirects = options.maxRedirects
  if (redirects !== undefined && (!Number.isSafeInteger(redirects) || redirects < 0)) {
    return "maxRedirects must be a non-negative integer"
  }
  return undefined
}

export const make = (options: Options = {}): OutboundHttp["Service"] => {
  const allowHosts = [...(options.allowHosts ?? [])]
  // Fail at construction on a malformed entry rather than on the first request.
  allowHosts.forEach(parseAllowEntry)
  const lookup: Lookup = options.lookup ?? systemLookup
  const userAgent = options.userAgent ?? DEFAULT_USER_AGENT

  const check = (url: string): Effect.Effect<void, UnsafeUrl> =>
    Effect.fromResult(checkUrl(url, allowHosts)).pipe(
      Effect.flatMap((checked) => resolveTarget(checked, lookup)),
      Effect.catchTag("ResolveFailed", (failure) =>
        Effect.fail(unsafe(url, `${failure.host} does not resolve (${failure.message})`))),
      Effect.asVoid,
      Effect.withSpan("OutboundHttp.check")
    )

  const get = (url: string, fetchOptions: FetchOptions): Effect.Effect<FetchedResponse, UnsafeUrl | FetchFailed> =>
    Effect.suspend(() => {
      const invalid = validateLimits(fetchOptions)
      if (invalid !== undefined) return Effect.die(new RangeError(`OutboundHttp.get: ${invalid}`))
      const maxRedirects = fetchOptions.maxRedirects ?? DEFAULT_MAX_REDIRECTS
      // The hop in progress, for the timeout's error.
      let current = url

      const hops = Effect.gen(function*() {
        let checked = yield* Effect.fromResult(checkUrl(url, allowHosts))
        const origin = checked.url.origin
        let redirects = 0
        for (;;) {
          current = checked.url.href
          const target = yield* resolveTarget(checked, lookup).pipe(
            Effect.catchTag("ResolveFailed", (failure) =>
              Effect.fail(
                new FetchFailed({
                  url: checked.url.href,
                  reason: "network",
                  message: `${failure.host} does not resolve (${failure.message})`
                })
              ))
          )
          const headers = requestHeaders(userAgent, fetchOptions.headers, checked.url.origin === origin)
          const outcome = yield* Effect.tryPromise({
            try: (signal) => exchange(target, headers, fetchOptions, signal),
            catch: (cause) =>
              new FetchFailed({ url: target.url.href, reason: "network", message: describeError(cause) })
          })
          switch (outcome._tag) {
            case "Response":
              return outcome.response
            case "TooLarge":
              return yield* new FetchFailed({
                url: target.url.href,
                reason: "too_large",
                message: `The response body is larger than ${fetchOptions.maxBytes} bytes`
              })
            case "Redirect": {
              if (redirects >= maxRedirects) {
                return yield* new FetchFailed({
                  url: target.url.href,
                  reason: "too_many_redirects",
                  message: `More than ${maxRedirects} redirects`
                })
              }
              redirects++
              let next: URL
              try {
                next = new URL(outcome.location, target.url)
              } catch {
                return yield* unsafe(outcome.location, `redirect from ${target.url.href} to an invalid URL`)
              }
              checked = yield* Effect.fromResult(checkUrl(next, allowHosts))
            }
          }
        }
      })

      return hops.pipe(
        Effect.timeoutOrElse({
          duration: Duration.millis(fetchOptions.timeoutMs),
          orElse: () =>
            Effect.fail(
              new FetchFailed({
                url: current,
                reason: "timeout",
                message: `No complete response within ${fetchOptions.timeoutMs} ms`
              })
            )
        })
      )
    }).pipe(Effect.withSpan("OutboundHttp.get"))

  return OutboundHttp.of({ check, get })
}

// ---------------------------------------------------------------------------
// One pinned request (the proxy's registry services)
// ---------------------------------------------------------------------------

export interface PinnedRequest {
  readonly url: string
  readonly method: string
  /** Transport headers (`host`, `connection`, `content-length`, ...) are dropped; the URL's host is the `Host`. */
  readonly headers: Readonly<Record<string, string>>
  readonly body?: string | undefined
  /** Undici's connect, headers and body-idle backstop; the caller's own deadline should fire first. */
  readonly timeoutMs: number
}

export interface PinnedResponse {
  readonly url: string
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  /** The body as it arrives (not decoded, not bounded: the caller bounds it); null when there is none. */
  readonly body: ReadableStream<Uint8Array> | null
}

/**
 * One request of any method, under the same rules as `get`: the URL is
 * checked, its name resolved exactly once, every answer classified, and the
 * socket opened to the checked address by the pinned connector (the `Host`
 * header and, over TLS, the SNI name and certificate check keep the URL's
 * name). Redirects are not followed: a 3xx is the answer, so no unchecked
 * address is ever reached. The connection lives until the scope closes (the
 * caller streams the body meanwhile). For callers that forward requests
 * elsewhere than to pages, such as the proxy to registry services.
 */
export const makePinnedRequest = (options: Options = {}) => {
  const allowHosts = [...(options.allowHosts ?? [])]
  allowHosts.forEach(parseAllowEntry)
  const lookup: Lookup = options.lookup ?? systemLookup
  const userAgent = options.userAgent ?? DEFAULT_USER_AGENT
  return (request: PinnedRequest): Effect.Effect<PinnedResponse, UnsafeUrl | FetchFailed, Scope.Scope> =>
    Effect.gen(function*() {
      const checked = yield* Effect.fromResult(checkUrl(request.url, allowHosts))
      const target = yield* resolveTarget(checked, lookup).pipe(
        Effect.catchTag("ResolveFailed", (failure) =>
          Effect.fail(
            new FetchFailed({
              url: checked.url.href,
              reason: "network",
              message: `${failure.host} does not resolve (${failure.message})`
            })
          ))
      )
      const backstopMs = request.timeoutMs + 1_000
      const agent = yield* Effect.acquireRelease(
        Effect.sync(() =>
          new Agent({
            connect: pinnedConnector(target, backstopMs),
            allowH2: false,
            maxHeaderSize: MAX_HEADER_BYTES,
            headersTimeout: backstopMs,
            bodyTimeout: backstopMs,
            connections: 1
          })
        ),
        (dispatcher) => Effect.promise(() => dispatcher.destroy().catch(() => undefined))
      )
      const response = yield* Effect.tryPromise({
        try: (signal) =>
          fetch(target.url.href, {
            dispatcher: agent,
            method: request.method,
            redirect: "manual",
            headers: requestHeaders(userAgent, request.headers, true),
            ...(request.body === undefined ? {} : { body: request.body }),
            signal
          }),
        catch: (cause) => new FetchFailed({ url: target.url.href, reason: "network", message: describeError(cause) })
      })
      const headers: Record<string, string> = {}
      response.headers.forEach((value, name) => {
        headers[name] = value
      })
      return {
        url: target.url.href,
        status: response.status,
        headers,
        body: response.body as ReadableStream<Uint8Array> | null
      }
    }).pipe(Effect.withSpan("SafeHttp.pinnedRequest"))
}

/** `OutboundHttp` with the URL-safety rules, over undici. */
export const layer = (options: Options = {}): Layer.Layer<OutboundHttp> => Layer.sync(OutboundHttp, () => make(options))
