/**
 * IP address classes: whether an address is public unicast, and if not, which
 * special-purpose range it is in (IANA's IPv4 and IPv6 special-purpose
 * registries). The one classifier every URL and every resolved answer goes
 * through.
 */

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
