/**
 * L402 challenges and credentials (the protocol of Lightning Labs' Aperture;
 * older servers say LSAT). A paywall answers `402 Payment Required` with
 *
 *     WWW-Authenticate: L402 macaroon="<base64>", invoice="<bolt11>"
 *
 * (`LSAT` for the scheme; some servers send `token=` for `macaroon=`); the
 * client pays the invoice and retries with
 *
 *     Authorization: L402 <base64 macaroon>:<hex preimage>
 *
 * Parsing follows RFC 9110's challenge grammar (`auth-scheme` then
 * `auth-param`s, several challenges in one header separated by commas).
 * Pure; bounded; a malformed header is no challenge, never an exception.
 */

export interface AuthChallenge {
  /** As sent (compare without case). */
  readonly scheme: string
  /** Parameter names in lower case; the first of a repeated name wins. */
  readonly params: Readonly<Record<string, string>>
}

export interface L402Challenge {
  /** The scheme to answer with: `L402`, or `LSAT` when that is what the server asked for. */
  readonly scheme: "L402" | "LSAT"
  /** The macaroon, base64 as sent. */
  readonly macaroon: string
  /** The BOLT11 payment request. */
  readonly invoice: string
}

/** Longest header read; Aperture's challenges are well under 4 KiB. */
export const MAX_CHALLENGE_LENGTH = 16 * 1024
export const MAX_MACAROON_LENGTH = 8 * 1024
export const MAX_INVOICE_LENGTH = 7089
const MAX_CHALLENGES = 16
const MAX_PARAMS = 32

const TCHAR = /[!#$%&'*+.^_`|~0-9A-Za-z-]/
const BASE64 = /^(?:[A-Za-z0-9+/]+={0,2}|[A-Za-z0-9_-]+={0,2})$/
const BOLT11 = /^ln[a-z0-9]+1[qpzry9x8gf2tvdw0s3jn54khce6mua7l]+$/i

/** Every challenge of one `WWW-Authenticate` value (several headers: join them with ", "). */
export const parseChallenges = (header: string): ReadonlyArray<AuthChallenge> => {
  const text = header.length > MAX_CHALLENGE_LENGTH ? "" : header
  const challenges: Array<AuthChallenge> = []
  let i = 0
  const skip = (chars: RegExp) => {
    while (i < text.length && chars.test(text[i]!)) i++
  }
  const token = (): string => {
    const start = i
    while (i < text.length && TCHAR.test(text[i]!)) i++
    return text.slice(start, i)
  }
  /** A quoted-string (with its escapes undone) or a token68-ish bare value. */
  const value = (): string | undefined => {
    if (text[i] === "\"") {
      let out = ""
      i++
      while (i < text.length && text[i] !== "\"") {
        if (text[i] === "\\" && i + 1 < text.length) i++
        out += text[i]
        i++
      }
      if (text[i] !== "\"") return undefined
      i++
      return out
    }
    const start = i
    while (i < text.length && /[^\s,]/.test(text[i]!)) i++
    return i > start ? text.slice(start, i) : undefined
  }
  while (i < text.length && challenges.length < MAX_CHALLENGES) {
    skip(/[\s,]/)
    const scheme = token()
    if (scheme === "") break
    const params: Record<string, string> = {}
    let count = 0
    for (;;) {
      skip(/[ \t]/)
      const mark = i
      skip(/[\s,]/)
      const name = token()
      skip(/[ \t]/)
      if (name === "" || text[i] !== "=") {
        i = mark // not a parameter: the next challenge (or the end) starts here
        break
      }
      i++
      skip(/[ \t]/)
      const parsed = value()
      if (parsed === undefined) break
      const key = name.toLowerCase()
      if (!(key in params) && count < MAX_PARAMS) {
        params[key] = parsed
        count++
      }
    }
    challenges.push({ scheme, params })
    // Something neither a scheme nor a parameter: stop rather than guess.
    skip(/[ \t]/)
    if (i < text.length && !/[\s,]/.test(text[i]!) && !TCHAR.test(text[i]!)) break
  }
  return challenges
}

/**
 * The L402 (or LSAT) challenge among a response's `WWW-Authenticate`
 * values, checked: a base64 macaroon (`macaroon=` or `token=`) and a
 * BOLT11-shaped invoice. Undefined when there is none.
 */
export const findL402Challenge = (headerValues: ReadonlyArray<string>): L402Challenge | undefined => {
  for (const header of headerValues) {
    for (const challenge of parseChallenges(header)) {
      const scheme = challenge.scheme.toUpperCase()
      if (scheme !== "L402" && scheme !== "LSAT") continue
      const macaroon = challenge.params["macaroon"] ?? challenge.params["token"]
      const invoice = challenge.params["invoice"]
      if (macaroon === undefined || invoice === undefined) continue
      if (macaroon.length > MAX_MACAROON_LENGTH || !BASE64.test(macaroon)) continue
      if (invoice.length > MAX_INVOICE_LENGTH || !BOLT11.test(invoice)) continue
      return { scheme, macaroon, invoice }
    }
  }
  return undefined
}

/** `Authorization: L402 <macaroon>:<preimage>`, in the scheme the server asked for. */
export const authorizationHeader = (scheme: "L402" | "LSAT", macaroon: string, preimageHex: string): string =>
  `${scheme} ${macaroon}:${preimageHex}`
