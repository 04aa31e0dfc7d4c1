import { isIP } from "node:net"
import { Result } from "effect"
import { UnsafeUrl } from "../../src/ports/Net.ts"
import { classifyAddress } from "./addresses.ts"

/**
 * The URL policy, before any resolution: `http:` and `https:` only, no
 * credentials in the URL, names that mean "this machine" or a metadata
 * service refused by name, IP literals classified, and the allow-list
 * (`allowHosts`) of hosts exempt from the address rules.
 */

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

export const parseAllowEntry = (entry: string): AllowEntry => {
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

export const unsafe = (url: string, reason: string) => new UnsafeUrl({ url, reason })

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
