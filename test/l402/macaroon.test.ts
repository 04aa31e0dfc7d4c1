import * as fc from "fast-check"
import { Result } from "effect"
import { describe, expect, it } from "vitest"
import {
  addCaveat,
  decodeBase64,
  decodeBase64Result,
  decodeIdentifier,
  encodeBase64,
  encodeIdentifier,
  MalformedMacaroon,
  mint,
  parse,
  serialize,
  verifySignature
} from "../../src/l402/macaroon.ts"

const bytes32 = fc.uint8Array({ minLength: 32, maxLength: 32 })
const hex32 = bytes32.map((b) => Buffer.from(b).toString("hex"))
const caveat = fc.string({ maxLength: 40 }).map((s) => s.replace(/\0/g, ""))
const macaroonArb = fc.record({
  rootKey: bytes32,
  paymentHash: hex32,
  tokenId: hex32,
  location: fc.constantFrom("", "spendgate", "https://example.test"),
  caveats: fc.array(caveat, { maxLength: 6 })
}).map((m) => ({
  ...m,
  macaroon: mint({
    rootKey: m.rootKey,
    identifier: encodeIdentifier({ version: 0, paymentHash: m.paymentHash, tokenId: m.tokenId }),
    location: m.location,
    caveats: m.caveats
  })
}))

describe("macaroons (binary V2, HMAC-SHA256 chain)", () => {
  it("round-trips through the binary V2 format and base64, and verifies", () => {
    fc.assert(fc.property(macaroonArb, ({ caveats, location, macaroon, paymentHash, rootKey, tokenId }) => {
      const back = decodeBase64(encodeBase64(macaroon))
      expect(back.location).toBe(location)
      expect(back.caveats).toEqual(caveats)
      expect(Buffer.from(back.signature)).toEqual(Buffer.from(macaroon.signature))
      expect(decodeIdentifier(back.identifier)).toEqual({ version: 0, paymentHash, tokenId })
      expect(verifySignature(back, rootKey)).toBe(true)
    }))
  })

  it("lays the bytes out as libmacaroons' V2 format does", () => {
    const m = mint({ rootKey: new Uint8Array(32), identifier: new Uint8Array([0x61, 0x62]), location: "L", caveats: ["k=v"] })
    const raw = serialize(m)
    expect([...raw.subarray(0, 14)]).toEqual([
      2, // version
      1, 1, 0x4c, // location "L"
      2, 2, 0x61, 0x62, // identifier "ab"
      0, // end of the header
      2, 3, 0x6b, 0x3d, 0x76 // caveat "k=v"
    ])
    expect([...raw.subarray(14, 18)]).toEqual([0, 0, 6, 32]) // end of caveat, end of caveats, signature field
    expect(raw.length).toBe(18 + 32)
  })

  it("fails verification when any byte of the identifier, caveats or signature changes", () => {
    fc.assert(fc.property(macaroonArb, fc.nat(), fc.integer({ min: 1, max: 255 }), ({ macaroon, rootKey }, at, flip) => {
      const raw = serialize(macaroon)
      const changed = Uint8Array.from(raw)
      const index = at % raw.length
      changed[index] = changed[index]! ^ flip
      let parsed
      try {
        parsed = parse(changed)
      } catch (error) {
        expect(error).toBeInstanceOf(MalformedMacaroon)
        return
      }
      // The location is a hint and not signed (as in libmacaroons): the server never reads it.
      if (parsed.location !== macaroon.location) {
        expect(parsed.caveats).toEqual(macaroon.caveats)
        expect(Buffer.from(parsed.identifier)).toEqual(Buffer.from(macaroon.identifier))
        return
      }
      expect(verifySignature(parsed, rootKey)).toBe(false)
    }))
  })

  it("fails verification under another root key", () => {
    fc.assert(fc.property(macaroonArb, bytes32, ({ macaroon, rootKey }, other) => {
      fc.pre(Buffer.compare(Buffer.from(rootKey), Buffer.from(other)) !== 0)
      expect(verifySignature(macaroon, other)).toBe(false)
    }))
  })

  it("lets anyone add a caveat, and nobody remove or change one", () => {
    fc.assert(fc.property(macaroonArb, caveat, ({ macaroon, rootKey }, extra) => {
      const narrowed = addCaveat(macaroon, extra)
      expect(verifySignature(narrowed, rootKey)).toBe(true)
      // Dropping any caveat, keeping the signature: refused.
      for (let i = 0; i < narrowed.caveats.length; i++) {
        const dropped = { ...narrowed, caveats: narrowed.caveats.filter((_, j) => j !== i) }
        expect(verifySignature(dropped, rootKey)).toBe(false)
      }
      // Changing one caveat's text: refused.
      const altered = { ...narrowed, caveats: [...narrowed.caveats.slice(0, -1), `${extra}x`] }
      expect(verifySignature(altered, rootKey)).toBe(false)
    }))
  })

  it("answers malformed input with a typed error, never a crash", () => {
    fc.assert(fc.property(fc.string({ maxLength: 200 }), (text) => {
      const result = decodeBase64Result(text)
      if (Result.isFailure(result)) expect(result.failure).toBeInstanceOf(MalformedMacaroon)
    }))
    fc.assert(fc.property(fc.uint8Array({ maxLength: 300 }), (raw) => {
      try {
        parse(raw)
      } catch (error) {
        expect(error).toBeInstanceOf(MalformedMacaroon)
      }
    }))
    for (const text of ["", "not base64!", "AAAA", "Ag==", encodeBase64(mint({ rootKey: new Uint8Array(32), identifier: new Uint8Array(3) })) + "AA"]) {
      expect(Result.isFailure(decodeBase64Result(text))).toBe(true)
    }
  })

  it("refuses identifiers that are not Aperture's 66-byte layout", () => {
    expect(() => decodeIdentifier(new Uint8Array(65))).toThrow(MalformedMacaroon)
    const wrongVersion = encodeIdentifier({ version: 0, paymentHash: "a".repeat(64), tokenId: "b".repeat(64) })
    wrongVersion[1] = 1
    expect(() => decodeIdentifier(wrongVersion)).toThrow(MalformedMacaroon)
  })
})
