import { secp256k1 } from "@noble/curves/secp256k1.js"
import { sha256 } from "@noble/hashes/sha2.js"
import { bech32 } from "@scure/base"

/**
 * A BOLT #11 invoice encoder: the human-readable part (currency and amount),
 * a 35-bit timestamp, tagged fields, and a recoverable secp256k1 signature
 * over all of it. Only what the gateway issues is built in; `bytesField`
 * and `wordsField` cover any other tag.
 *
 * Everything here is pure and synchronous; invalid input throws.
 */

/** BIP-0173 currency prefixes: mainnet, testnet (and signet), regtest. */
export type Bolt11Network = "bc" | "tb" | "bcrt"

/** One tagged field: its 5-bit type and its data as 5-bit words. */
export interface TaggedField {
  readonly tag: number
  readonly words: ReadonlyArray<number>
}

/** Tag numbers from BOLT #11 (the bech32 character in comments). */
export const TAG = {
  paymentHash: 1, // p
  routing: 3, // r
  features: 5, // 9
  expiry: 6, // x
  fallback: 9, // f
  description: 13, // d
  paymentSecret: 16, // s
  payeeNodeKey: 19, // n
  descriptionHash: 23, // h
  minFinalCltvExpiry: 24 // c
} as const

/** Feature bits set on every invoice: both features required (even bits). */
export const FEATURE_VAR_ONION_OPTIN = 8
export const FEATURE_PAYMENT_SECRET = 14

/** What BOLT #11 assumes when `c` is absent; also what this encoder writes. */
export const DEFAULT_MIN_FINAL_CLTV_EXPIRY = 18

/** `data_length` is 10 bits. */
const MAX_FIELD_WORDS = 1023
const TIMESTAMP_WORDS = 7
const MAX_TIMESTAMP = 2 ** 35 - 1

// ---------------------------------------------------------------------------
// 5-bit word helpers

/** Bytes to 5-bit words, the last word padded with zero bits. */
export const bytesToWords = (bytes: Uint8Array): Array<number> => bech32.toWords(bytes)

/**
 * 5-bit words to bytes, padded with zero bits to the next byte boundary:
 * the form the signature covers. (`bech32.fromWords` refuses incomplete
 * trailing groups, which the signed data usually has.)
 */
export const wordsToBytesPadded = (words: ReadonlyArray<number>): Uint8Array => {
  const out = new Uint8Array(Math.ceil((words.length * 5) / 8))
  let accumulator = 0
  let bits = 0
  let index = 0
  for (const word of words) {
    if (!Number.isInteger(word) || word < 0 || word > 31) throw new Error(`not a 5-bit word: ${word}`)
    accumulator = ((accumulator << 5) | word) & 0xfff
    bits += 5
    if (bits >= 8) {
      bits -= 8
      out[index++] = (accumulator >> bits) & 0xff
    }
  }
  if (bits > 0) out[index++] = (accumulator << (8 - bits)) & 0xff
  return out
}

/** A non-negative integer as big-endian 5-bit words with no leading zero word (0 is no words). */
export const intToWords = (value: number | bigint): Array<number> => {
  let n = BigInt(value)
  if (n < 0n) throw new Error(`cannot encode a negative integer: ${n}`)
  const words: Array<number> = []
  while (n > 0n) {
    words.unshift(Number(n & 31n))
    n >>= 5n
  }
  return words
}

const fixedWords = (value: number, count: number): Array<number> => {
  const words = intToWords(value)
  if (words.length > count) throw new Error(`${value} does not fit in ${count * 5} bits`)
  return [...new Array<number>(count - words.length).fill(0), ...words]
}

// ---------------------------------------------------------------------------
// Tagged fields

export const wordsField = (tag: number, words: ReadonlyArray<number>): TaggedField => {
  if (!Number.isInteger(tag) || tag < 0 || tag > 31) throw new Error(`not a tag: ${tag}`)
  if (words.length > MAX_FIELD_WORDS) {
    throw new Error(`tagged field ${tag} is ${words.length} words long; at most ${MAX_FIELD_WORDS} fit`)
  }
  return { tag, words: [...words] }
}

export const bytesField = (tag: number, bytes: Uint8Array): TaggedField => wordsField(tag, bytesToWords(bytes))

const hash256Field = (tag: number, what: string, bytes: Uint8Array): TaggedField => {
  if (bytes.length !== 32) throw new Error(`${what} must be 32 bytes, got ${bytes.length}`)
  return bytesField(tag, bytes)
}

/** `p`: the SHA-256 of the payment preimage (52 words). */
export const paymentHashField = (hash: Uint8Array) => hash256Field(TAG.paymentHash, "payment hash", hash)

/** `s`: the payment secret (52 words). */
export const paymentSecretField = (secret: Uint8Array) => hash256Field(TAG.paymentSecret, "payment secret", secret)

/** `h`: the SHA-256 of a description too long for `d` (52 words). */
export const descriptionHashField = (hash: Uint8Array) => hash256Field(TAG.descriptionHash, "description hash", hash)

/**
 * `d`: a UTF-8 description; at most 639 bytes fit in one field. (A lone
 * surrogate in the string becomes U+FFFD, so the bytes are always UTF-8.)
 */
export const descriptionField = (description: string): TaggedField =>
  bytesField(TAG.description, new TextEncoder().encode(description))

const integerField = (tag: number, what: string, value: number): TaggedField => {
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`${what} must be a non-negative integer, got ${value}`)
  return wordsField(tag, intToWords(value))
}

/** `x`: seconds after the timestamp the invoice stays payable. */
export const expiryField = (seconds: number) => integerField(TAG.expiry, "expiry", seconds)

/** `c`: min_final_cltv_expiry_delta, in blocks. */
export const minFinalCltvExpiryField = (blocks: number) => integerField(TAG.minFinalCltvExpiry, "min_final_cltv_expiry", blocks)

/** `n`: the payee's 33-byte compressed public key (53 words). */
export const payeeNodeKeyField = (publicKey: Uint8Array): TaggedField => {
  if (publicKey.length !== 33) throw new Error(`payee node key must be 33 bytes, got ${publicKey.length}`)
  return bytesField(TAG.payeeNodeKey, publicKey)
}

/**
 * `9`: a feature vector, given as the numbers of the bits to set. Bit 0 is
 * the least significant bit of the last word; the field is as short as the
 * highest bit allows.
 */
export const featuresField = (bits: Iterable<number>): TaggedField => {
  let vector = 0n
  for (const bit of bits) {
    if (!Number.isSafeInteger(bit) || bit < 0) throw new Error(`not a feature bit: ${bit}`)
    vector |= 1n << BigInt(bit)
  }
  return wordsField(TAG.features, intToWords(vector))
}

const fieldWords = (field: TaggedField): Array<number> => [
  field.tag,
  field.words.length >> 5,
  field.words.length & 31,
  ...field.words
]

// ---------------------------------------------------------------------------
// Human-readable part

const MULTIPLIERS: ReadonlyArray<readonly [suffix: string, picoBtc: bigint]> = [
  ["", 1_000_000_000_000n],
  ["m", 1_000_000_000n],
  ["u", 1_000_000n],
  ["n", 1_000n],
  ["p", 1n]
]

/**
 * The amount part of the human-readable part, in the shortest exact form:
 * the largest multiplier that divides the amount (none for whole bitcoin).
 * One msat is ten pico-bitcoin, so a `p` amount always ends in 0.
 */
export const encodeAmount = (amountMsat: bigint): string => {
  if (amountMsat <= 0n) throw new Error(`an invoice amount must be positive, got ${amountMsat} msat`)
  const picoBtc = amountMsat * 10n
  for (const [suffix, unit] of MULTIPLIERS) {
    if (picoBtc % unit === 0n) return `${picoBtc / unit}${suffix}`
  }
  // Unreachable: the pico unit divides everything.
  throw new Error("no multiplier fits")
}

/** `ln` + currency prefix + optional amount. */
export const humanReadablePart = (network: Bolt11Network, amountMsat: bigint | undefined): string =>
  `ln${network}${amountMsat === undefined ? "" : encodeAmount(amountMsat)}`

// ---------------------------------------------------------------------------
// Keys and signing

export const isValidPrivateKey = (privateKey: Uint8Array): boolean =>
  privateKey.length === 32 && secp256k1.utils.isValidSecretKey(privateKey)

/** The node id: the 33-byte compressed public key of a node's private key. */
export const nodePublicKey = (privateKey: Uint8Array): Uint8Array => secp256k1.getPublicKey(privateKey, true)

/**
 * The 65-byte BOLT #11 signature (r || s || recovery id) of the
 * human-readable part and the data words. RFC 6979 nonces, low-S: the same
 * bytes as libsecp256k1, so the specification's examples reproduce exactly.
 */
export const signInvoice = (
  hrp: string,
  dataWords: ReadonlyArray<number>,
  privateKey: Uint8Array
): Uint8Array => {
  const hrpBytes = new TextEncoder().encode(hrp)
  const dataBytes = wordsToBytesPadded(dataWords)
  const message = new Uint8Array(hrpBytes.length + dataBytes.length)
  message.set(hrpBytes, 0)
  message.set(dataBytes, hrpBytes.length)
  const digest = sha256(message)
  // The digest is already SHA-256: no second hashing inside `sign`.
  // noble's "recovered" form is recovery id || r || s; BOLT #11 wants it last.
  const recovered = secp256k1.sign(digest, privateKey, { prehash: false, format: "recovered", lowS: true })
  const signature = new Uint8Array(65)
  signature.set(recovered.subarray(1, 65), 0)
  signature[64] = recovered[0]
  return signature
}

export interface RawInvoice {
  readonly network: Bolt11Network
  /** Omitted for "any amount" invoices. */
  readonly amountMsat?: bigint | undefined
  readonly timestampSeconds: number
  /** Written in this order. */
  readonly fields: ReadonlyArray<TaggedField>
  readonly privateKey: Uint8Array
}

/** Signs and encodes an invoice made of exactly the given fields, in order. */
export const encodeRawInvoice = (invoice: RawInvoice): string => {
  const { timestampSeconds } = invoice
  if (!Number.isSafeInteger(timestampSeconds) || timestampSeconds < 0 || timestampSeconds > MAX_TIMESTAMP) {
    throw new Error(`timestamp must be a whole number of seconds in [0, 2^35), got ${timestampSeconds}`)
  }
  if (!isValidPrivateKey(invoice.privateKey)) throw new Error("not a valid secp256k1 private key")
  const hrp = humanReadablePart(invoice.network, invoice.amountMsat)
  const data = [...fixedWords(timestampSeconds, TIMESTAMP_WORDS), ...invoice.fields.flatMap(fieldWords)]
  const signature = signInvoice(hrp, data, invoice.privateKey)
  // BOLT #11 invoices are longer than BIP-0173's 90 characters.
  return bech32.encode(hrp, [...data, ...bytesToWords(signature)], false)
}

export interface InvoiceOptions {
  readonly network: Bolt11Network
  readonly amountMsat: bigint
  readonly paymentHash: Uint8Array
  readonly paymentSecret: Uint8Array
  /** UTF-8, at most 639 bytes. */
  readonly description: string
  readonly expirySeconds: number
  readonly timestampSeconds: number
  readonly privateKey: Uint8Array
  /** Defaults to 18. */
  readonly minFinalCltvExpiry?: number
}

/**
 * A modern invoice for an exact amount: `p`, `s`, `d`, `x`, `c` and `9`
 * (var_onion_optin and payment_secret, both required), signed by
 * `privateKey`; the payee is recovered from the signature.
 */
export const encodeInvoice = (options: InvoiceOptions): string =>
  encodeRawInvoice({
    network: options.network,
    amountMsat: options.amountMsat,
    timestampSeconds: options.timestampSeconds,
    privateKey: options.privateKey,
    fields: [
      paymentHashField(options.paymentHash),
      paymentSecretField(options.paymentSecret),
      descriptionField(options.description),
      expiryField(options.expirySeconds),
      minFinalCltvExpiryField(options.minFinalCltvExpiry ?? DEFAULT_MIN_FINAL_CLTV_EXPIRY),
      featuresField([FEATURE_VAR_ONION_OPTIN, FEATURE_PAYMENT_SECRET])
    ]
  })

// ---------------------------------------------------------------------------
// Decoding

/** Why a payment request could not be read; never thrown, always returned. */
export class InvalidInvoice extends Error {
  readonly _tag = "InvalidInvoice"
}

/** What a BOLT #11 invoice says, checked: the signature verified, the payee recovered from it. */
export interface DecodedInvoice {
  readonly paymentRequest: string
  readonly network: Bolt11Network
  /** Undefined for an "any amount" invoice. */
  readonly amountMsat: bigint | undefined
  readonly timestampSeconds: number
  /** `x`, or BOLT #11's default of 3600. */
  readonly expirySeconds: number
  /** 64 lower-case hex characters. */
  readonly paymentHash: string
  readonly paymentSecret: string | undefined
  /** The payee's node id (66 hex), recovered from the signature (equal to `n` when present). */
  readonly payeeNodeKey: string
  readonly description: string | undefined
  readonly descriptionHash: string | undefined
  readonly minFinalCltvExpiry: number
}

/** BOLT #11: an invoice without `x` expires an hour after its timestamp. */
export const DEFAULT_EXPIRY_SECONDS = 3600

/** Longest payment request read (LND's own limit is 7089 characters). */
export const MAX_PAYMENT_REQUEST_LENGTH = 7089

const SIGNATURE_WORDS = 104

const NETWORKS: ReadonlyArray<Bolt11Network> = ["bcrt", "bc", "tb"]

/** The amount part of the human-readable part, in msat; throws InvalidInvoice. */
export const decodeAmount = (text: string): bigint => {
  const match = /^([0-9]+)([munp]?)$/.exec(text)
  if (match === null) throw new InvalidInvoice(`the amount ${JSON.stringify(text.slice(0, 40))} is not a number with an optional multiplier`)
  const digits = match[1]!
  if (digits.length > 1 && digits.startsWith("0")) throw new InvalidInvoice("the amount has a leading zero")
  if (digits.length > 20) throw new InvalidInvoice("the amount is too large")
  const unit = MULTIPLIERS.find(([suffix]) => suffix === match[2])![1]
  const picoBtc = BigInt(digits) * unit
  if (picoBtc % 10n !== 0n) throw new InvalidInvoice("a pico-bitcoin amount must be a whole number of millisatoshis")
  const msat = picoBtc / 10n
  if (msat <= 0n) throw new InvalidInvoice("the amount must be positive")
  return msat
}

const wordsToInt = (words: ReadonlyArray<number>): number => {
  let n = 0
  for (const word of words) n = n * 32 + word
  return n
}

/** Whole bytes of a field; a field whose length does not give them exactly is skipped by BOLT #11's rules. */
const exactBytes = (words: ReadonlyArray<number>, length: number): Uint8Array | undefined => {
  if (words.length !== Math.ceil((length * 8) / 5)) return undefined
  return wordsToBytesPadded(words).subarray(0, length)
}

const toHex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex")

/**
 * Reads a BOLT #11 payment request: bech32 checksum, currency and amount,
 * timestamp, tagged fields, and the signature, which must verify; the payee
 * is the key recovered from it, and must equal `n` when `n` is present.
 * Any fault is an `InvalidInvoice`, returned, never thrown.
 */
export const decodeInvoice = (paymentRequest: string): DecodedInvoice | InvalidInvoice => {
  try {
    return decodeOrThrow(paymentRequest)
  } catch (cause) {
    return cause instanceof InvalidInvoice
      ? cause
      : new InvalidInvoice(cause instanceof Error ? cause.message : String(cause))
  }
}

const decodeOrThrow = (input: string): DecodedInvoice => {
  if (typeof input !== "string") throw new InvalidInvoice("a payment request is a string")
  let text = input.trim()
  if (text.length > MAX_PAYMENT_REQUEST_LENGTH) throw new InvalidInvoice(`longer than ${MAX_PAYMENT_REQUEST_LENGTH} characters`)
  if (/^lightning:/i.test(text)) text = text.slice("lightning:".length)
  if (text !== text.toLowerCase() && text !== text.toUpperCase()) throw new InvalidInvoice("mixed case")
  text = text.toLowerCase()
  let decoded: { prefix: string; words: Array<number> }
  try {
    decoded = bech32.decode(text as `${string}1${string}`, MAX_PAYMENT_REQUEST_LENGTH)
  } catch (cause) {
    throw new InvalidInvoice(`not bech32: ${cause instanceof Error ? cause.message : String(cause)}`)
  }
  const hrp = decoded.prefix
  if (!hrp.startsWith("ln")) throw new InvalidInvoice("the prefix does not start with ln")
  const rest = hrp.slice(2)
  const network = NETWORKS.find((n) => rest.startsWith(n) && !/^[a-z]/.test(rest.slice(n.length)))
  if (network === undefined) throw new InvalidInvoice(`unknown currency prefix ${JSON.stringify(hrp.slice(0, 20))}`)
  const amountText = rest.slice(network.length)
  const amountMsat = amountText === "" ? undefined : decodeAmount(amountText)

  const words = decoded.words
  if (words.length < TIMESTAMP_WORDS + SIGNATURE_WORDS) throw new InvalidInvoice("too short to hold a timestamp and a signature")
  const data = words.slice(0, words.length - SIGNATURE_WORDS)
  const signature = wordsToBytesPadded(words.slice(words.length - SIGNATURE_WORDS)).subarray(0, 65)
  const timestampSeconds = wordsToInt(data.slice(0, TIMESTAMP_WORDS))

  let paymentHash: string | undefined
  let paymentSecret: string | undefined
  let description: string | undefined
  let descriptionHash: string | undefined
  let payeeField: string | undefined
  let expirySeconds = DEFAULT_EXPIRY_SECONDS
  let minFinalCltvExpiry = DEFAULT_MIN_FINAL_CLTV_EXPIRY
  let seenHash = false
  let index = TIMESTAMP_WORDS
  while (index < data.length) {
    if (index + 3 > data.length) throw new InvalidInvoice("a tagged field is cut short")
    const tag = data[index]!
    const length = data[index + 1]! * 32 + data[index + 2]!
    const fieldWords = data.slice(index + 3, index + 3 + length)
    if (fieldWords.length !== length) throw new InvalidInvoice("a tagged field runs past the end of the data")
    index += 3 + length
    switch (tag) {
      case TAG.paymentHash: {
        const bytes = exactBytes(fieldWords, 32)
        // BOLT #11: a `p` of the wrong length is skipped; the first good one counts.
        if (bytes !== undefined && !seenHash) {
          paymentHash = toHex(bytes)
          seenHash = true
        }
        break
      }
      case TAG.paymentSecret: {
        const bytes = exactBytes(fieldWords, 32)
        if (bytes !== undefined && paymentSecret === undefined) paymentSecret = toHex(bytes)
        break
      }
      case TAG.descriptionHash: {
        const bytes = exactBytes(fieldWords, 32)
        if (bytes !== undefined && descriptionHash === undefined) descriptionHash = toHex(bytes)
        break
      }
      case TAG.payeeNodeKey: {
        const bytes = exactBytes(fieldWords, 33)
        if (bytes !== undefined && payeeField === undefined) payeeField = toHex(bytes)
        break
      }
      case TAG.description: {
        if (description === undefined) {
          const bytes = wordsToBytesPadded(fieldWords).subarray(0, Math.floor((length * 5) / 8))
          try {
            description = new TextDecoder("utf-8", { fatal: true }).decode(bytes)
          } catch {
            throw new InvalidInvoice("the description is not UTF-8")
          }
        }
        break
      }
      case TAG.expiry:
        if (length > 7) throw new InvalidInvoice("the expiry is too large")
        expirySeconds = wordsToInt(fieldWords)
        break
      case TAG.minFinalCltvExpiry:
        if (length > 7) throw new InvalidInvoice("min_final_cltv_expiry is too large")
        minFinalCltvExpiry = wordsToInt(fieldWords)
        break
      default:
        break // routing hints, features, fallback addresses and unknown tags are not needed here
    }
  }
  if (paymentHash === undefined) throw new InvalidInvoice("no payment hash (p)")
  if (description === undefined && descriptionHash === undefined) {
    throw new InvalidInvoice("neither a description (d) nor a description hash (h)")
  }

  const recoveryId = signature[64]!
  if (recoveryId > 3) throw new InvalidInvoice("the signature's recovery id is not 0 to 3")
  const hrpBytes = new TextEncoder().encode(hrp)
  const dataBytes = wordsToBytesPadded(data)
  const message = new Uint8Array(hrpBytes.length + dataBytes.length)
  message.set(hrpBytes, 0)
  message.set(dataBytes, hrpBytes.length)
  const digest = sha256(message)
  const compact = signature.subarray(0, 64)
  let payee: Uint8Array
  try {
    const recovered = new Uint8Array(65)
    recovered[0] = recoveryId
    recovered.set(compact, 1)
    payee = secp256k1.recoverPublicKey(recovered, digest, { prehash: false })
  } catch (cause) {
    throw new InvalidInvoice(`the signature does not recover a key: ${cause instanceof Error ? cause.message : String(cause)}`)
  }
  if (!secp256k1.verify(compact, digest, payee, { prehash: false, lowS: false })) {
    throw new InvalidInvoice("the signature does not verify")
  }
  const payeeNodeKey = toHex(payee)
  if (payeeField !== undefined && payeeField !== payeeNodeKey) {
    throw new InvalidInvoice("the signature is not the payee's (n)")
  }
  return {
    paymentRequest: text,
    network,
    amountMsat,
    timestampSeconds,
    expirySeconds,
    paymentHash,
    paymentSecret,
    payeeNodeKey,
    description,
    descriptionHash,
    minFinalCltvExpiry
  }
}

/** When the invoice stops being payable, in ms since the epoch. */
export const invoiceExpiresAtMs = (invoice: Pick<DecodedInvoice, "timestampSeconds" | "expirySeconds">): number =>
  (invoice.timestampSeconds + invoice.expirySeconds) * 1000
