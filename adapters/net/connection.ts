import { Agent, buildConnector } from "undici"
import { type Lookup, systemLookup, type Target } from "./resolve.ts"
import { parseAllowEntry } from "./urlPolicy.ts"

/**
 * The pinned connection: a dispatcher of its own per hop whose connector
 * opens the socket to the checked address whatever host it is asked for
 * (over TLS the SNI name and certificate check keep the URL's name), bounded
 * response headers, HTTP/1.1 only; and the request headers the caller may
 * set.
 */

/** Response header block limit (status line and all headers). */
const MAX_HEADER_BYTES = 32 * 1024
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

export interface Options {
  /** Hosts (names or IP literals, optionally `:port`) exempt from the address rules; for development and tests. */
  readonly allowHosts?: ReadonlyArray<string> | undefined
  /** Resolver returning every A/AAAA answer; default `node:dns/promises` `lookup(host, { all: true })`, unsorted. */
  readonly lookup?: ((host: string) => Promise<ReadonlyArray<{ address: string; family: 4 | 6 }>>) | undefined
  /** Default `DEFAULT_USER_AGENT`. */
  readonly userAgent?: string | undefined
}

/** The options checked once, when a client is made: a malformed allow-list entry fails then, not on the first request. */
export const settingsOf = (options: Options) => {
  const allowHosts = [...(options.allowHosts ?? [])]
  allowHosts.forEach(parseAllowEntry)
  return {
    allowHosts,
    lookup: (options.lookup ?? systemLookup) satisfies Lookup,
    userAgent: options.userAgent ?? DEFAULT_USER_AGENT
  }
}

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

/**
 * The dispatcher of one hop, connected to the checked address only. Undici's
 * own timers are a backstop: the caller's deadline should fire first.
 */
export const pinnedAgent = (target: Target, backstopMs: number): Agent =>
  new Agent({
    connect: pinnedConnector(target, backstopMs),
    allowH2: false,
    maxHeaderSize: MAX_HEADER_BYTES,
    headersTimeout: backstopMs,
    bodyTimeout: backstopMs,
    connections: 1
  })

export const requestHeaders = (
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
