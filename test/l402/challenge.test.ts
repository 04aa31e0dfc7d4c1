import { describe, expect, it } from "vitest"
import { authorizationHeader, findL402Challenge, parseChallenges } from "../../src/l402/challenge.ts"

const MAC = "AgEEbHNhdAJCAADXNkGQ3Zl0SnUfjPwKRAWN6TFWY9nSNvyRo0yybGMtDgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAGIP0U7AkZ/Fr9sHBFGNgqKnQXgrzcnzOIvTBIYj5qL8v8"
const INVOICE = "lnbcrt500n1p4sfhdkpp5gfu9cqx60jjzhpvxma9hrw20t2ylaec8nr04jpnth8pmamg972ussp5uj8"

describe("L402 challenges", () => {
  it("reads the L402 form Aperture sends", () => {
    expect(findL402Challenge([`L402 macaroon="${MAC}", invoice="${INVOICE}"`]))
      .toEqual({ scheme: "L402", macaroon: MAC, invoice: INVOICE })
  })

  it("reads LSAT, token= and unquoted values, in any case", () => {
    expect(findL402Challenge([`LSAT macaroon="${MAC}", invoice="${INVOICE}"`])?.scheme).toBe("LSAT")
    expect(findL402Challenge([`L402 token="${MAC}", invoice="${INVOICE}"`])?.macaroon).toBe(MAC)
    expect(findL402Challenge([`lsat Macaroon=${MAC}, Invoice=${INVOICE}`])).toEqual({ scheme: "LSAT", macaroon: MAC, invoice: INVOICE })
  })

  it("finds the L402 challenge among others in one header", () => {
    const header = `Basic realm="x", LSAT macaroon="${MAC}", invoice="${INVOICE}", Bearer realm="y", error="invalid_token"`
    expect(parseChallenges(header).map((c) => c.scheme)).toEqual(["Basic", "LSAT", "Bearer"])
    expect(findL402Challenge([header])).toMatchObject({ scheme: "LSAT", macaroon: MAC })
    // Both forms at once (Aperture's compatibility mode): the first wins.
    expect(findL402Challenge([`LSAT macaroon="${MAC}", invoice="${INVOICE}", L402 macaroon="${MAC}", invoice="${INVOICE}"`])?.scheme).toBe("LSAT")
  })

  it("is no challenge when a part is missing or malformed, and never throws", () => {
    for (const header of [
      "",
      "Basic realm=\"x\"",
      `L402 macaroon="${MAC}"`,
      `L402 invoice="${INVOICE}"`,
      `L402 macaroon="not base64!", invoice="${INVOICE}"`,
      `L402 macaroon="${MAC}", invoice="bitcoin:xyz"`,
      `L402 macaroon="${MAC}", invoice="${INVOICE}`,
      `L402 macaroon="${"A".repeat(20_000)}", invoice="${INVOICE}"`,
      "L402 ,,,, ===",
      "\"\"\"\\"
    ]) {
      expect(findL402Challenge([header]), header.slice(0, 60)).toBeUndefined()
    }
  })

  it("formats the credential in the scheme asked", () => {
    expect(authorizationHeader("L402", MAC, "ab".repeat(32))).toBe(`L402 ${MAC}:${"ab".repeat(32)}`)
    expect(authorizationHeader("LSAT", MAC, "cd".repeat(32))).toBe(`LSAT ${MAC}:${"cd".repeat(32)}`)
  })
})
