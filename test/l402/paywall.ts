import { createHash, createHmac, randomBytes } from "node:crypto"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

/**
 * A local L402 paywall, written from the protocol's text: an unauthenticated
 * request is answered `402` with `WWW-Authenticate: L402 macaroon="…",
 * invoice="…"`, the invoice asked from an LND node over its REST interface
 * (`POST /v1/invoices`, AddInvoice), the macaroon a binary V2 macaroon whose
 * identifier commits to the invoice's payment hash, with first-party
 * caveats; a request with `Authorization: L402 <macaroon>:<preimage>` is
 * served when the macaroon's HMAC chain verifies under the root key, its
 * caveats hold, and sha256(preimage) is the payment hash.
 */

// ---- macaroons (libmacaroons V2 binary format) --------------------------------

const varint = (n: number): Buffer => {
  const out: Array<number> = []
  let value = n
  while (value >= 0x80) {
    out.push((value & 0x7f) | 0x80)
    value >>>= 7
  }
  out.push(value)
  return Buffer.from(out)
}
const field = (type: number, data: Buffer) => Buffer.concat([varint(type), varint(data.length), data])
const EOS = Buffer.from([0])
const hmac = (key: Buffer, data: Buffer) => createHmac("sha256", key).update(data).digest()

export interface Macaroon {
  readonly location: string
  readonly identifier: Buffer
  readonly caveats: ReadonlyArray<string>
  readonly signature: Buffer
}

export const mintMacaroon = (rootKey: Buffer, location: string, identifier: Buffer, caveats: ReadonlyArray<string>): Macaroon => {
  let signature = hmac(rootKey, identifier)
  for (const caveat of caveats) signature = hmac(signature, Buffer.from(caveat))
  return { location, identifier, caveats, signature }
}

export const serializeMacaroon = (m: Macaroon): string =>
  Buffer.concat([
    Buffer.from([2]),
    field(1, Buffer.from(m.location)),
    field(2, m.identifier),
    EOS,
    ...m.caveats.flatMap((c) => [field(2, Buffer.from(c)), EOS]),
    EOS,
    field(6, m.signature)
  ]).toString("base64")

export const parseMacaroon = (base64: string): Macaroon | undefined => {
  const bytes = Buffer.from(base64, "base64")
  let i = 0
  const readVarint = () => {
    let shift = 0
    let value = 0
    for (;;) {
      const b = bytes[i++]
      if (b === undefined) throw new Error("truncated")
      value |= (b & 0x7f) << shift
      if ((b & 0x80) === 0) return value
      shift += 7
    }
  }
  const readField = () => {
    const type = readVarint()
    if (type === 0) return { type, data: Buffer.alloc(0) }
    const length = readVarint()
    const data = bytes.subarray(i, i + length)
    i += length
    return { type, data }
  }
  try {
    if (bytes[i++] !== 2) return undefined
    let location = ""
    let identifier = Buffer.alloc(0)
    for (let f = readField(); f.type !== 0; f = readField()) {
      if (f.type === 1) location = f.data.toString()
      if (f.type === 2) identifier = Buffer.from(f.data)
    }
    const caveats: Array<string> = []
    for (;;) {
      const f = readField()
      if (f.type === 0) break
      if (f.type === 2) caveats.push(f.data.toString())
      for (let g = readField(); g.type !== 0; g = readField()) { /* vid, location of a third-party caveat */ }
    }
    const sig = readField()
    if (sig.type !== 6 || sig.data.length !== 32) return undefined
    return { location, identifier, caveats, signature: Buffer.from(sig.data) }
  } catch {
    return undefined
  }
}

// ---- the paywall ---------------------------------------------------------------

export interface PaywallOptions {
  /** The LND REST endpoint invoices are asked from, and its macaroon (hex). */
  readonly lndUrl?: string
  readonly lndMacaroonHex?: string
  /** Or another node: an invoice for `valueMsat` (payment hash in hex). */
  readonly issue?: (valueMsat: bigint, memo: string) => Promise<{ readonly paymentHash: string; readonly paymentRequest: string }>
  readonly priceSats: number
  /** The challenge's spelling: the scheme, and `macaroon=` or `token=`. */
  scheme?: "L402" | "LSAT"
  paramName?: "macaroon" | "token"
  /** A refused token is answered 402 with no new challenge (as some servers do; a request without one gets it). */
  bareRefusal?: boolean
  /** A request with a valid token has its connection cut before any answer (the paid request fails). */
  dropPaid?: boolean
}

export interface Paywall {
  readonly url: string
  readonly host: string
  /** Challenges issued (with their payment hashes), tokens accepted, tokens refused. */
  readonly challenges: Array<string>
  readonly accepted: Array<string>
  readonly refusedTokens: Array<string>
  /** What requests carried, in order. */
  readonly seen: Array<{ readonly path: string; readonly authorization: string | undefined; readonly body: string }>
  options: PaywallOptions
  /** Forgets every paid token: the next use of one is answered with a new challenge. */
  revokeAll(): void
  close(): Promise<void>
}

const readBody = (request: IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    const chunks: Array<Buffer> = []
    request.on("data", (c: Buffer) => chunks.push(c))
    request.on("end", () => resolve(Buffer.concat(chunks).toString()))
    request.on("error", reject)
  })

export const startPaywall = async (options: PaywallOptions): Promise<Paywall> => {
  const rootKey = randomBytes(32)
  const revoked = new Set<string>()
  const issue = async (valueMsat: bigint, memo: string) => {
    if (options.issue !== undefined) return options.issue(valueMsat, memo)
    const answer = await fetch(`${options.lndUrl}/v1/invoices`, {
      method: "POST",
      headers: { "Grpc-Metadata-macaroon": options.lndMacaroonHex ?? "", "content-type": "application/json" },
      body: JSON.stringify({ value_msat: valueMsat.toString(), memo, expiry: "600" })
    })
    const invoice = await answer.json() as { r_hash: string; payment_request: string }
    return { paymentHash: Buffer.from(invoice.r_hash, "base64").toString("hex"), paymentRequest: invoice.payment_request }
  }
  const challenge = async (path: string): Promise<string> => {
    const invoice = await issue(BigInt(paywall.options.priceSats) * 1000n, `L402 ${path}`)
    const paymentHash = Buffer.from(invoice.paymentHash, "hex")
    // Aperture's identifier: version (uint16), payment hash, token id.
    const identifier = Buffer.concat([Buffer.from([0, 0]), paymentHash, randomBytes(32)])
    const macaroon = mintMacaroon(rootKey, "paywall.test", identifier, [
      "services=data:0",
      `data_capabilities=read`,
      `valid_until=${Math.floor(Date.now() / 1000) + 3600}`
    ])
    paywall.challenges.push(paymentHash.toString("hex"))
    const scheme = paywall.options.scheme ?? "L402"
    const name = paywall.options.paramName ?? "macaroon"
    return `${scheme} ${name}="${serializeMacaroon(macaroon)}", invoice="${invoice.paymentRequest}"`
  }
  const verify = (authorization: string | undefined): string | undefined => {
    const match = /^(?:L402|LSAT) ([A-Za-z0-9+/=_-]+):([0-9a-f]{64})$/i.exec(authorization ?? "")
    if (match === null) return undefined
    const macaroon = parseMacaroon(match[1]!)
    if (macaroon === undefined) return undefined
    let signature = hmac(rootKey, macaroon.identifier)
    for (const caveat of macaroon.caveats) signature = hmac(signature, Buffer.from(caveat))
    if (!signature.equals(macaroon.signature)) return undefined
    for (const caveat of macaroon.caveats) {
      const [key, value] = caveat.split("=")
      if (key === "valid_until" && Number(value) < Date.now() / 1000) return undefined
    }
    const paymentHash = macaroon.identifier.subarray(2, 34).toString("hex")
    if (createHash("sha256").update(Buffer.from(match[2]!, "hex")).digest("hex") !== paymentHash) return undefined
    if (revoked.has(paymentHash)) return undefined
    return paymentHash
  }
  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const body = await readBody(request)
    const authorization = request.headers["authorization"]
    paywall.seen.push({ path: request.url ?? "", authorization, body })
    const paid = verify(authorization)
    if (paid !== undefined && paywall.options.dropPaid === true) {
      response.socket?.destroy()
      return
    }
    if (paid !== undefined) {
      paywall.accepted.push(paid)
      response.writeHead(200, { "content-type": "application/json", "set-cookie": "session=secret" })
        .end(JSON.stringify({ data: "the paid answer", path: request.url, echo: body }))
      return
    }
    if (authorization !== undefined) paywall.refusedTokens.push(authorization)
    if (authorization !== undefined && paywall.options.bareRefusal === true) {
      response.writeHead(402, { "content-type": "application/json" }).end(JSON.stringify({ error: "token spent" }))
      return
    }
    response.writeHead(402, {
      "content-type": "application/json",
      "www-authenticate": await challenge(request.url ?? "/")
    }).end(JSON.stringify({ error: "payment required" }))
  }
  const server: Server = createServer((request, response) => {
    handle(request, response).catch((error) => response.destroy(error as Error))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const { port } = server.address() as AddressInfo
  const paywall: Paywall = {
    url: `http://127.0.0.1:${port}`,
    host: `127.0.0.1:${port}`,
    challenges: [],
    accepted: [],
    refusedTokens: [],
    seen: [],
    options,
    revokeAll() {
      for (const hash of paywall.accepted) revoked.add(hash)
    },
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  }
  return paywall
}
