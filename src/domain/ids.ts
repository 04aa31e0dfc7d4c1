import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { Effect, Schema } from "effect"

/**
 * Identifiers and secrets. Everything random comes from the Web Crypto CSPRNG
 * (`globalThis.crypto`), available in Node, Deno, Bun and browsers, so the core
 * needs no `node:` import.
 */

/**
 * CSPRNG bytes drawn 4 KiB at a time and handed out once each, in order: one
 * `getRandomValues` call per ~150 ids instead of one per id (each call is a
 * trip into the runtime's CSPRNG, several microseconds, for 26 bytes).
 */
const POOL_BYTES = 4096
const pool = new Uint8Array(POOL_BYTES)
let poolOffset = POOL_BYTES

const nextRandomByte = (): number => {
  if (poolOffset === POOL_BYTES) {
    globalThis.crypto.getRandomValues(pool)
    poolOffset = 0
  }
  return pool[poolOffset++]!
}

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/**
 * `length` characters drawn uniformly from [A-Za-z0-9]. Bytes >= 248 are
 * rejected so that every character has probability exactly 1/62
 * (248 = 4 * 62), i.e. no modulo bias.
 */
export const randomBase62 = (length: number): string => {
  let out = ""
  while (out.length < length) {
    const byte = nextRandomByte()
    if (byte < 248) out += BASE62[byte % 62]
  }
  return out
}

const ID_CHARS = 24

let lastMs = 0
let counter = 0

/**
 * 24 characters of [0-9A-Za-z] that sort (in byte order) by creation: 8
 * characters of wall-clock milliseconds, 3 of a per-millisecond counter, 13
 * random (≈77 bits). Lists break `createdAt` ties by id, so ids made in the
 * same millisecond still list in the order they were made. The time here is
 * the host's, not the Clock service's: it only orders, it never bills.
 */
export const sortableRandomId = (): string => {
  const now = Date.now()
  if (now > lastMs) {
    lastMs = now
    counter = 0
  } else {
    counter++
  }
  const base62 = (value: number, width: number) => {
    let out = ""
    for (let i = 0; i < width; i++) {
      out = BASE62[value % 62] + out
      value = Math.floor(value / 62)
    }
    return out
  }
  return base62(lastMs, 8) + base62(counter % 238_328, 3) + randomBase62(ID_CHARS - 11)
}

export const AccountId = Schema.String.check(Schema.isPattern(/^acc_[A-Za-z0-9]{24}$/)).pipe(
  Schema.brand("AccountId")
)
export type AccountId = typeof AccountId.Type

export const AgentId = Schema.String.check(Schema.isPattern(/^agt_[A-Za-z0-9]{24}$/)).pipe(
  Schema.brand("AgentId")
)
export type AgentId = typeof AgentId.Type

export const newAccountId = (): AccountId => `acc_${sortableRandomId()}` as AccountId
export const newAgentId = (): AgentId => `agt_${sortableRandomId()}` as AgentId

export const isAgentId = Schema.is(AgentId)

/**
 * API keys: `sk_agt_` + 32 characters of [A-Za-z0-9] from the CSPRNG
 * (32 * log2(62) ≈ 190.5 bits). Only the SHA-256 of a key is ever stored.
 */
export const API_KEY_PREFIX = "sk_agt_"
const API_KEY_PATTERN = /^sk_agt_[A-Za-z0-9]{32}$/

export const isApiKeyFormat = (candidate: string): boolean => API_KEY_PATTERN.test(candidate)

export const newApiKey = (): string => `${API_KEY_PREFIX}${randomBase62(32)}`

const utf8 = new TextEncoder()

/** The runtime's native synchronous SHA-256, where it has one (Node's, asked for without an import). */
interface NativeHash {
  readonly createHash: (algorithm: "sha256") => {
    update(data: string): { digest(encoding: "hex"): string }
  }
}
const nativeHash = (globalThis as { readonly process?: { readonly getBuiltinModule?: (id: string) => unknown } })
  .process?.getBuiltinModule?.("node:crypto") as NativeHash | undefined

/** Lower-case hex SHA-256 of a string's UTF-8 bytes, in JavaScript: for runtimes without a native hash. */
export const portableSha256Hex = (text: string): string => bytesToHex(sha256(utf8.encode(text)))

/** Lower-case hex SHA-256 of a string's UTF-8 bytes: the runtime's native hash, or the portable one. */
export const sha256Hex: (text: string) => string = nativeHash === undefined
  ? portableSha256Hex
  : (text) => nativeHash.createHash("sha256").update(text).digest("hex")

/**
 * Lower-case hex SHA-256 of the key: the only form in which a key is stored.
 * Computed in place (a key is a few dozen bytes): every authenticated request
 * hashes its key, and Web Crypto's `subtle.digest` costs a round trip through
 * the runtime's worker pool and a promise each. Node's own hash where it runs
 * on Node (`process.getBuiltinModule`, so the core still imports no `node:`
 * module), about half the time of the portable one (docs/performance.md,
 * "Less work per call in the server").
 */
export const hashApiKey = (apiKey: string): Effect.Effect<string> => Effect.sync(() => sha256Hex(apiKey))
