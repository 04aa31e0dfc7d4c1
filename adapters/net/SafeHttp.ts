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
 *
 * The parts, one job each: address classes (addresses.ts), the URL policy
 * (urlPolicy.ts), resolution (resolve.ts), the pinned connection
 * (connection.ts), the `OutboundHttp` service (fetch.ts) and one pinned
 * request for the proxy (pinnedRequest.ts).
 */
export { type AddressClass, classifyAddress, type Ipv4Refusal, type Ipv6Refusal } from "./addresses.ts"
export { DEFAULT_USER_AGENT, type Options } from "./connection.ts"
export { layer, make } from "./fetch.ts"
export { makePinnedRequest, type PinnedRequest, type PinnedResponse } from "./pinnedRequest.ts"
export type { Lookup } from "./resolve.ts"
export { type CheckedUrl, checkUrl } from "./urlPolicy.ts"
