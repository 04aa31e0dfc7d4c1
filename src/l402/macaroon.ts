import { hmac } from "@noble/hashes/hmac.js"
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex, hexToBytes } from "@noble/hashes/utils.js"
import { Data, Result } from "effect"

/**
 * Macaroons with first-party caveats, as L402 uses them.
 *
 * The signature is an HMAC-SHA256 chain: sig0 = HMAC(rootKey, identifier),
 * sig_i = HMAC(sig_{i-1}, caveat_i); the macaroon carries the last one. Only
 * the holder of the root key can compute sig0, and anyone can add a caveat
 * (attenuate) but nobody can remove one: the chain would no longer end in
 * the carried signature.
 *
 * Serialised in the binary V2 format of libmacaroons (what Lightning Labs'
 * Aperture sends, base64-encoded): a version byte 0x02, then sections of
 * fields, each section ended by an EOS field (type 0):
 *
 *   version(0x02)
 *   [location(1)] identifier(2) EOS            the macaroon's header
 *   { [location(1)] identifier(2) [vid(4)] EOS } per caveat
 *   EOS                                        end of the caveats
 *   signature(6)                               32 bytes
 *
 * A field is its type and its data length, both unsigned LEB128 varints,
 * then the data. Within a section the field types strictly increase. Only
 * first-party caveats (no location, no verification id) are accepted here.
 *
 * The identifier follows Aperture's layout, so that it commits to the
 * invoice: version (uint16, big-endian, 0), payment hash (32 bytes), token
 * id (32 bytes), 66 bytes in all.
 */

/** Anything that cannot be read as a macaroon, or an L402 identifier. */
export class MalformedMacaroon extends Data.TaggedError("MalformedMacaroon")<{ readonly reason: string }> {
  override get message(): string {
    return `Malformed macaroon: ${this.reason}`
  }
}

export interface Macaroon {
  readonly location: string
  readonly identifier: Uint8Array
  /** First-party caveats, usually `key=value`, in the order they were added. */
  readonly caveats: ReadonlyArray<string>
  /** 32 bytes: the end of the HMAC chain. */
  readonly signature: Uint8Array
}

const FIELD_EOS = 0
const FIELD_LOCATION = 1
const FIELD_IDENTIFIER = 2
const FIELD_VID = 4
const FIELD_SIGNATURE = 6
const VERSION_2 = 2
const SIGNATURE_BYTES = 32

/** Limits on what is parsed: a token is a header value, never large. */
export const MAX_MACAROON_BYTES = 8192
export const MAX_CAVEATS = 64

const encoder = new TextEncoder()
const decoder = new TextDecoder("utf-8", { fatal: true })

const mac = (key: Uint8Array, data: Uint8Array): Uint8Array => hmac(sha256, key, data)

/** The chain's end for this identifier and these caveats under `rootKey`. */
export const chainSignature = (rootKey: Uint8Array, identifier: Uint8Array, caveats: ReadonlyArray<string>): Uint8Array => {
  let signature = mac(rootKey, identifier)
  for (const caveat of caveats) signature = mac(signature, encoder.encode(caveat))
  return signature
}

/** A new macaroon signed with `rootKey`, with the given caveats already added. */
export const mint = (options: {
  readonly rootKey: Uint8Array
  readonly identifier: Uint8Array
  readonly location?: string
  readonly caveats?: ReadonlyArray<string>
}): Macaroon => {
  const caveats = options.caveats ?? []
  return {
    location: options.location ?? "",
    identifier: options.identifier,
    caveats,
    signature: chainSignature(options.rootKey, options.identifier, caveats)
  }
}

/** Adds a first-party caveat: anyone holding the macaroon can narrow it, nobody can widen it. */
export const addCaveat = (macaroon: Macaroon, caveat: string): Macaroon => ({
  ...macaroon,
  caveats: [...macaroon.caveats, caveat],
  signature: mac(macaroon.signature, encoder.encode(caveat))
})

/** Compares without stopping at the first difference. */
export const constantTimeEqual = (a: Uint8Array, b: Uint8Array): boolean => {
  if (a.length !== b.length) return false
  let difference = 0
  for (let i = 0; i < a.length; i++) difference |= a[i]! ^ b[i]!
  return difference === 0
}

/** Whether the macaroon's signature is the chain of its identifier and caveats under `rootKey`. */
export const verifySignature = (macaroon: Macaroon, rootKey: Uint8Array): boolean =>
  constantTimeEqual(chainSignature(rootKey, macaroon.identifier, macaroon.caveats), macaroon.signature)

// ---- binary V2 ---------------------------------------------------------------

const pushVarint = (out: Array<number>, value: number) => {
  let rest = value
  while (rest >= 0x80) {
    out.push((rest & 0x7f) | 0x80)
    rest = Math.floor(rest / 128)
  }
  out.push(rest)
}

const pushField = (out: Array<number>, type: number, data: Uint8Array) => {
  pushVarint(out, type)
  pushVarint(out, data.length)
  for (const byte of data) out.push(byte)
}

/** The binary V2 serialisation. */
export const serialize = (macaroon: Macaroon): Uint8Array => {
  const out: Array<number> = [VERSION_2]
  if (macaroon.location !== "") pushField(out, FIELD_LOCATION, encoder.encode(macaroon.location))
  pushField(out, FIELD_IDENTIFIER, macaroon.identifier)
  out.push(FIELD_EOS)
  for (const caveat of macaroon.caveats) {
    pushField(out, FIELD_IDENTIFIER, encoder.encode(caveat))
    out.push(FIELD_EOS)
  }
  out.push(FIELD_EOS)
  pushField(out, FIELD_SIGNATURE, macaroon.signature)
  return Uint8Array.from(out)
}

class Reader {
  position = 0
  readonly bytes: Uint8Array
  constructor(bytes: Uint8Array) {
    this.bytes = bytes
  }

  get done() {
    return this.position >= this.bytes.length
  }

  varint(): number {
    let value = 0
    let scale = 1
    for (let i = 0; i < 4; i++) {
      if (this.done) throw new MalformedMacaroon({ reason: "truncated field" })
      const byte = this.bytes[this.position++]!
      value += (byte & 0x7f) * scale
      if ((byte & 0x80) === 0) return value
      scale *= 128
    }
    throw new MalformedMacaroon({ reason: "field length too large" })
  }

  /** One field: its type and data; type 0 (EOS) has no length. */
  field(): { readonly type: number; readonly data: Uint8Array } {
    const type = this.varint()
    if (type === FIELD_EOS) return { type, data: new Uint8Array(0) }
    const length = this.varint()
    if (this.position + length > this.bytes.length) throw new MalformedMacaroon({ reason: "truncated field" })
    const data = this.bytes.subarray(this.position, this.position + length)
    this.position += length
    return { type, data }
  }

  /** Fields up to the next EOS, types strictly increasing. */
  section(): Map<number, Uint8Array> {
    const fields = new Map<number, Uint8Array>()
    let previous = FIELD_EOS
    for (;;) {
      const { data, type } = this.field()
      if (type === FIELD_EOS) return fields
      if (type <= previous) throw new MalformedMacaroon({ reason: "fields out of order" })
      if (type !== FIELD_LOCATION && type !== FIELD_IDENTIFIER && type !== FIELD_VID && type !== FIELD_SIGNATURE) {
        throw new MalformedMacaroon({ reason: `unknown field type ${type}` })
      }
      fields.set(type, data)
      previous = type
    }
  }
}

const utf8 = (bytes: Uint8Array, what: string): string => {
  try {
    return decoder.decode(bytes)
  } catch {
    throw new MalformedMacaroon({ reason: `${what} is not UTF-8` })
  }
}

const parseUnsafe = (bytes: Uint8Array): Macaroon => {
  if (bytes.length === 0) throw new MalformedMacaroon({ reason: "empty" })
  if (bytes.length > MAX_MACAROON_BYTES) throw new MalformedMacaroon({ reason: `longer than ${MAX_MACAROON_BYTES} bytes` })
  if (bytes[0] !== VERSION_2) throw new MalformedMacaroon({ reason: "not a version 2 binary macaroon" })
  const reader = new Reader(bytes)
  reader.position = 1
  const header = reader.section()
  const identifier = header.get(FIELD_IDENTIFIER)
  if (identifier === undefined) throw new MalformedMacaroon({ reason: "no identifier" })
  if (header.has(FIELD_VID) || header.has(FIELD_SIGNATURE)) throw new MalformedMacaroon({ reason: "unexpected field in the header" })
  const location = header.has(FIELD_LOCATION) ? utf8(header.get(FIELD_LOCATION)!, "location") : ""
  const caveats: Array<string> = []
  for (;;) {
    const section = reader.section()
    if (section.size === 0) break
    if (caveats.length >= MAX_CAVEATS) throw new MalformedMacaroon({ reason: `more than ${MAX_CAVEATS} caveats` })
    const id = section.get(FIELD_IDENTIFIER)
    if (id === undefined || section.has(FIELD_SIGNATURE)) throw new MalformedMacaroon({ reason: "caveat without identifier" })
    if (section.has(FIELD_LOCATION) || section.has(FIELD_VID)) {
      throw new MalformedMacaroon({ reason: "third-party caveats are not supported" })
    }
    caveats.push(utf8(id, "caveat"))
  }
  const signature = reader.field()
  if (signature.type !== FIELD_SIGNATURE || signature.data.length !== SIGNATURE_BYTES) {
    throw new MalformedMacaroon({ reason: "no 32-byte signature" })
  }
  if (!reader.done) throw new MalformedMacaroon({ reason: "trailing bytes" })
  return { location, identifier: Uint8Array.from(identifier), caveats, signature: Uint8Array.from(signature.data) }
}

/** Reads a binary V2 macaroon; anything else is a {@link MalformedMacaroon}. */
export const parse = (bytes: Uint8Array): Macaroon => parseUnsafe(bytes)

// ---- base64 ------------------------------------------------------------------

/** Standard base64 with padding, as Aperture sends it. */
export const toBase64 = (bytes: Uint8Array): string => {
  let binary = ""
  for (const byte of bytes) binary += String.fromCharCode(byte)
  return btoa(binary)
}

/** Standard or URL-safe base64, padding optional. */
export const fromBase64 = (text: string): Uint8Array => {
  if (text.length > MAX_MACAROON_BYTES * 2) throw new MalformedMacaroon({ reason: "too long" })
  const standard = text.replace(/-/g, "+").replace(/_/g, "/").replace(/=+$/, "")
  if (!/^[A-Za-z0-9+/]*$/.test(standard) || standard.length % 4 === 1) {
    throw new MalformedMacaroon({ reason: "not base64" })
  }
  const binary = atob(standard + "=".repeat((4 - (standard.length % 4)) % 4))
  return Uint8Array.from(binary, (c) => c.charCodeAt(0))
}

export const encodeBase64 = (macaroon: Macaroon): string => toBase64(serialize(macaroon))

/** Reads a base64 binary V2 macaroon; throws {@link MalformedMacaroon}. */
export const decodeBase64 = (text: string): Macaroon => parse(fromBase64(text.trim()))

/** {@link decodeBase64} as a result: the typed error, never an exception. */
export const decodeBase64Result = (text: string): Result.Result<Macaroon, MalformedMacaroon> => {
  try {
    return Result.succeed(decodeBase64(text))
  } catch (error) {
    if (error instanceof MalformedMacaroon) return Result.fail(error)
    return Result.fail(new MalformedMacaroon({ reason: "unreadable" }))
  }
}

// ---- the L402 identifier -------------------------------------------------------

export interface L402Identifier {
  readonly version: number
  /** 32 bytes, hex: the invoice's payment hash. */
  readonly paymentHash: string
  /** 32 bytes, hex: random, names the token. */
  readonly tokenId: string
}

export const IDENTIFIER_BYTES = 2 + 32 + 32

export const encodeIdentifier = (identifier: L402Identifier): Uint8Array => {
  if (!/^[0-9a-f]{64}$/.test(identifier.paymentHash) || !/^[0-9a-f]{64}$/.test(identifier.tokenId)) {
    throw new MalformedMacaroon({ reason: "payment hash and token id must be 32 bytes of lower-case hex" })
  }
  const out = new Uint8Array(IDENTIFIER_BYTES)
  out[0] = (identifier.version >> 8) & 0xff
  out[1] = identifier.version & 0xff
  out.set(hexToBytes(identifier.paymentHash), 2)
  out.set(hexToBytes(identifier.tokenId), 34)
  return out
}

export const decodeIdentifier = (bytes: Uint8Array): L402Identifier => {
  if (bytes.length !== IDENTIFIER_BYTES) throw new MalformedMacaroon({ reason: `identifier is not ${IDENTIFIER_BYTES} bytes` })
  const version = (bytes[0]! << 8) | bytes[1]!
  if (version !== 0) throw new MalformedMacaroon({ reason: `unknown identifier version ${version}` })
  return { version, paymentHash: bytesToHex(bytes.subarray(2, 34)), tokenId: bytesToHex(bytes.subarray(34, 66)) }
}

// ---- caveats -------------------------------------------------------------------

/** `key=value` caveats as a list of pairs (a caveat without `=` has an empty value). */
export const caveatPairs = (caveats: ReadonlyArray<string>): ReadonlyArray<readonly [string, string]> =>
  caveats.map((caveat) => {
    const at = caveat.indexOf("=")
    return at < 0 ? [caveat.trim(), ""] as const : [caveat.slice(0, at).trim(), caveat.slice(at + 1).trim()] as const
  })
