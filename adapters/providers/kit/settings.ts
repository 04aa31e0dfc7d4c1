/**
 * Option checks every provider shares. A bad value is a deployment error: it
 * is thrown, and the provider's `make` dies naming it.
 */
import { Redacted } from "effect"
import type { UnitPrice } from "../../../src/capabilities/Provider.ts"

/** A provider name as catalogues and failures show it: 1 to 64 characters. */
export const providerName = (where: string, name: string): string => {
  if (name.trim() === "" || name.length > 64) throw new RangeError(`${where}: provider name must be 1 to 64 characters`)
  return name
}

/**
 * An http(s) API root without a query or fragment, returned without trailing
 * slashes. Credentials in it are refused unless `allowCredentials`.
 */
export const baseUrlOf = (where: string, baseUrl: string, options?: { readonly allowCredentials?: boolean }): string => {
  let url: URL
  try {
    url = new URL(baseUrl)
  } catch {
    throw new RangeError(`${where}: baseUrl is not a URL: ${JSON.stringify(baseUrl)}`)
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new RangeError(`${where}: baseUrl must be http(s), got ${url.protocol}`)
  }
  if (options?.allowCredentials === true) {
    if (url.search !== "" || url.hash !== "") throw new RangeError(`${where}: baseUrl must not carry a query or a fragment`)
  } else if (url.search !== "" || url.hash !== "" || url.username !== "" || url.password !== "") {
    throw new RangeError(`${where}: baseUrl must not carry credentials, a query or a fragment`)
  }
  return url.href.replace(/\/+$/, "")
}

/**
 * A required credential, trimmed. Empty is refused; with `printable`, so is
 * one holding whitespace or control characters.
 */
export const credential = (
  where: string,
  label: string,
  value: Redacted.Redacted<string>,
  options?: { readonly printable?: boolean }
): string => {
  const secret = Redacted.value(value).trim()
  if (options?.printable === true) {
    if (secret === "" || /[\s\u0000-\u001f\u007f]/.test(secret)) throw new RangeError(`${where}: the ${label} is empty or has whitespace`)
  } else if (secret === "") {
    throw new RangeError(`${where}: the ${label} is empty`)
  }
  return secret
}

/** A unit price for `per`, not negative. */
export const checkUnitPrice = (where: string, unitPrice: UnitPrice, per: string): UnitPrice => {
  if (unitPrice.per !== per) throw new RangeError(`${where}: the price must be per ${per}, got per ${unitPrice.per}`)
  if (unitPrice.priceMicroUsd < 0n) throw new RangeError(`${where}: the price must not be negative`)
  return unitPrice
}

/** A positive safe integer option, or its default. */
export const positiveInteger = (where: string, field: string, value: number | undefined, fallback: number): number => {
  const resolved = value ?? fallback
  if (!Number.isSafeInteger(resolved) || resolved <= 0) {
    throw new RangeError(`${where}: ${field} must be a positive integer, got ${resolved}`)
  }
  return resolved
}

/** A positive finite number option (fractions allowed), or its default. */
export const positiveNumber = (where: string, field: string, value: number | undefined, fallback: number): number => {
  const resolved = value ?? fallback
  if (!Number.isFinite(resolved) || resolved <= 0) throw new RangeError(`${where}: ${field} must be a positive number, got ${resolved}`)
  return resolved
}
