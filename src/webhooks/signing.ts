import { Effect } from "effect"
import { randomBase62 } from "../domain/ids.ts"

/**
 * Standard Webhooks signing (https://www.standardwebhooks.com): the signed
 * content is `${webhook-id}.${webhook-timestamp}.${body}`, the signature is
 * HMAC-SHA256 keyed with the base64-decoded part of the `whsec_…` secret,
 * sent as `v1,<base64>`; several signatures are separated by spaces (during
 * a secret rotation's overlap, one per live secret). Web Crypto only, so the
 * core needs no `node:` import.
 */

export const SECRET_PREFIX = "whsec_"
/** 32 random bytes: 256 bits of key. */
const SECRET_BYTES = 32

const toBase64 = (bytes: Uint8Array): string => {
  let binary = ""
  for (const byte of bytes) binary += String.fromCharCode(byte)
  return btoa(binary)
}

const fromBase64 = (text: string): Uint8Array => {
  const binary = atob(text)
  const bytes = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i)
  return bytes
}

export const newWebhookSecret = (): string => {
  const bytes = new Uint8Array(SECRET_BYTES)
  globalThis.crypto.getRandomValues(bytes)
  return `${SECRET_PREFIX}${toBase64(bytes)}`
}

/** `msg_…`-style ids are the event ids (`evt_…`); this one is only for tests that need a fresh id. */
export const randomMessageId = () => `msg_${randomBase62(24)}`

const keyBytes = (secret: string): Uint8Array =>
  fromBase64(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret)

/** One `v1,<base64>` signature of the message with one secret. */
export const signOne = (secret: string, messageId: string, timestampSeconds: number, body: string): Effect.Effect<string> =>
  Effect.promise(async () => {
    const key = await globalThis.crypto.subtle.importKey(
      "raw",
      keyBytes(secret) as Uint8Array<ArrayBuffer>,
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign"]
    )
    const content = new TextEncoder().encode(`${messageId}.${timestampSeconds}.${body}`)
    const mac = await globalThis.crypto.subtle.sign("HMAC", key, content)
    return `v1,${toBase64(new Uint8Array(mac))}`
  })

/** The three Standard Webhooks headers for a message, signed with every given secret. */
export const signedHeaders = (
  secrets: ReadonlyArray<string>,
  messageId: string,
  timestampSeconds: number,
  body: string
): Effect.Effect<Record<string, string>> =>
  Effect.map(
    Effect.forEach(secrets, (secret) => signOne(secret, messageId, timestampSeconds, body)),
    (signatures) => ({
      "webhook-id": messageId,
      "webhook-timestamp": String(timestampSeconds),
      "webhook-signature": signatures.join(" "),
      "content-type": "application/json"
    })
  )
