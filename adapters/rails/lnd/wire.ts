import type { LightningInvoiceCreated } from "../../../src/ports/Rails.ts"
import { clip } from "./messages.ts"

/**
 * Reading LND's JSON (grpc-gateway, protobuf field names): int64/uint64
 * fields are JSON strings, `bytes` fields are base64, enums are their names.
 * Pure: each reader answers a checked value or what is wrong with the input.
 */

export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * LND's error body: `{ code, message, details }` (gRPC status through
 * grpc-gateway); older gateways also sent `error`.
 */
export const lndErrorText = (value: unknown): string | undefined => {
  if (!isRecord(value)) return undefined
  const message = typeof value.message === "string" && value.message !== ""
    ? value.message
    : typeof value.error === "string" && value.error !== ""
    ? value.error
    : undefined
  return message === undefined ? undefined : clip(message)
}

export const statusMessage = (status: number, body: Uint8Array): string => {
  const text = new TextDecoder().decode(body)
  let detail: string | undefined
  try {
    detail = lndErrorText(JSON.parse(text))
  } catch {
    detail = undefined
  }
  if (detail !== undefined) return `LND refused the request (HTTP ${status}): ${detail}`
  return text.trim() === ""
    ? `LND answered HTTP ${status}`
    : `LND answered HTTP ${status}: ${clip(text)}`
}

// ---------------------------------------------------------------------------
// Wire values

const UINT = /^\d{1,20}$/

/** An int64/uint64 field: a decimal string, or a plain number from lenient encoders. */
export const uintField = (value: unknown): bigint | undefined => {
  if (typeof value === "string" && UINT.test(value)) return BigInt(value)
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return BigInt(value)
  return undefined
}

export const MALFORMED = Symbol("malformed")

/** An optional int64 field: absent (or null) is undefined, present but not a number is MALFORMED. */
export const optionalUint = (value: unknown): bigint | undefined | typeof MALFORMED =>
  value === undefined || value === null ? undefined : uintField(value) ?? MALFORMED

const BASE64 = /^(?:[A-Za-z0-9+/]*={0,2}|[A-Za-z0-9_-]*={0,2})$/

/** A 32-byte hash sent as base64 (standard or URL-safe), as lower-case hex. */
export const hashField = (value: unknown): string | undefined => {
  if (typeof value !== "string" || !BASE64.test(value)) return undefined
  const bytes = Buffer.from(value, "base64")
  return bytes.length === 32 ? bytes.toString("hex") : undefined
}

export const jsonObject = (body: Uint8Array, call: string): Record<string, unknown> | string => {
  let json: unknown
  try {
    json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body))
  } catch {
    return `LND's ${call} answer is not JSON`
  }
  return isRecord(json) ? json : `LND's ${call} answer is not a JSON object`
}

/** What AddInvoice answered, checked. */
export const parseAddInvoice = (body: Uint8Array): LightningInvoiceCreated | string => {
  const json = jsonObject(body, "AddInvoice")
  if (typeof json === "string") return json
  const paymentRequest = json.payment_request
  if (typeof paymentRequest !== "string" || paymentRequest.trim() === "") {
    return "LND's AddInvoice answer has no payment_request"
  }
  if (json.r_hash === undefined) return "LND's AddInvoice answer has no r_hash"
  const paymentHash = hashField(json.r_hash)
  if (paymentHash === undefined) return "LND's AddInvoice answer has an r_hash that is not 32 bytes of base64"
  return { paymentRequest: paymentRequest.trim(), paymentHash }
}

/** A ListInvoices answer, checked: its invoices (each checked when read) and the next offset. */
export const parseListPage = (
  body: Uint8Array
): { readonly invoices: ReadonlyArray<unknown>; readonly lastIndexOffset: bigint } | string => {
  const json = jsonObject(body, "ListInvoices")
  if (typeof json === "string") return json
  // grpc-gateway leaves out empty repeated fields unless told to emit defaults.
  const invoices = json.invoices === undefined || json.invoices === null ? [] : json.invoices
  if (!Array.isArray(invoices)) return "LND's ListInvoices answer has invoices that are not a list"
  const lastIndexOffset = json.last_index_offset === undefined || json.last_index_offset === null
    ? 0n
    : uintField(json.last_index_offset)
  if (lastIndexOffset === undefined) return "LND's ListInvoices answer has a malformed last_index_offset"
  return { invoices, lastIndexOffset }
}

export interface Settlement {
  readonly paymentHash: string
  readonly amountPaidMsat: bigint | undefined
  readonly settleDate: bigint | undefined
  readonly settleIndex: bigint | undefined
}

export type Update =
  | { readonly _tag: "Skip"; readonly warning?: string }
  | { readonly _tag: "Settled"; readonly settlement: Settlement }
  | { readonly _tag: "StreamError"; readonly message: string }

/** `SETTLED` as LND sends it; the enum's number (1) from gateways set to send numbers. */
export const isSettledState = (state: unknown): boolean => state === "SETTLED" || state === 1

/** Reads one line of the stream. Pure: what to do with it is decided by the caller. */
export const parseUpdate = (text: string): Update => {
  const trimmed = text.trim()
  if (trimmed === "") return { _tag: "Skip" }
  let message: unknown
  try {
    message = JSON.parse(trimmed)
  } catch {
    return { _tag: "Skip", warning: `a line that is not JSON: ${clip(trimmed).slice(0, 80)}` }
  }
  if (!isRecord(message)) return { _tag: "Skip", warning: "a line that is not a JSON object" }
  if (message.error !== undefined && message.error !== null) {
    const detail = lndErrorText(message.error) ?? clip(JSON.stringify(message.error))
    return { _tag: "StreamError", message: `LND ended the invoice stream with an error: ${detail}` }
  }
  const invoice = message.result
  if (!isRecord(invoice)) return { _tag: "Skip", warning: "a message without a result object" }
  return parseInvoice(invoice)
}

/** One Invoice message, from the stream or from a ListInvoices page: a settlement or nothing. */
export const parseInvoice = (invoice: Record<string, unknown>): Update => {
  if (!isSettledState(invoice.state)) return { _tag: "Skip" }
  const paymentHash = hashField(invoice.r_hash)
  if (paymentHash === undefined) {
    return { _tag: "Skip", warning: "a settled invoice whose r_hash is not 32 bytes of base64" }
  }
  const amountPaidMsat = optionalUint(invoice.amt_paid_msat)
  const settleDate = optionalUint(invoice.settle_date)
  const settleIndex = optionalUint(invoice.settle_index)
  const malformed = amountPaidMsat === MALFORMED
    ? "amt_paid_msat"
    : settleDate === MALFORMED
    ? "settle_date"
    : settleIndex === MALFORMED
    ? "settle_index"
    : undefined
  if (malformed !== undefined) {
    return { _tag: "Skip", warning: `settled invoice ${paymentHash} with a malformed ${malformed}` }
  }
  return {
    _tag: "Settled",
    settlement: {
      paymentHash,
      amountPaidMsat: amountPaidMsat as bigint | undefined,
      settleDate: settleDate as bigint | undefined,
      settleIndex: settleIndex as bigint | undefined
    }
  }
}
