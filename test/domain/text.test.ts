import fc from "fast-check"
import { createHash } from "node:crypto"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { hashApiKey, portableSha256Hex, sha256Hex } from "../../src/domain/ids.ts"
import { utf8Length } from "../../src/domain/utf8.ts"
import { utcDay } from "../../src/domain/Ledger.ts"

// Strings of any UTF-16 code units: pairs, lone surrogates of both halves, NUL, the BMP's edges.
const anyText = fc.string({ unit: "binary", maxLength: 64 })
const edgeUnits = fc.array(
  fc.constantFrom("\u0000", "a", "\u007f", "\u0080", "\u07ff", "\u0800", "\ud7ff", "\ud800", "\udbff", "\udc00", "\udfff", "\ue000", "\uffff", "\ud83d\ude00"),
  { maxLength: 24 }
).map((units) => units.join(""))

describe("utf8Length", () => {
  it("is the length TextEncoder gives, for any string", () => {
    const encoder = new TextEncoder()
    fc.assert(fc.property(fc.oneof(anyText, edgeUnits), (text) => {
      expect(utf8Length(text)).toBe(encoder.encode(text).length)
    }), { numRuns: 2000 })
  })

  it("counts pairs as 4 bytes and lone surrogates as U+FFFD's 3", () => {
    expect(utf8Length("")).toBe(0)
    expect(utf8Length("a\u00e9\u20ac\ud83d\ude00")).toBe(1 + 2 + 3 + 4)
    expect(utf8Length("\ud800")).toBe(3)
    expect(utf8Length("\udc00\ud800")).toBe(6)
    expect(utf8Length("\ud800a")).toBe(4)
  })
})

describe("sha256Hex", () => {
  it("is SHA-256 of the UTF-8 bytes, natively and in JavaScript alike", () => {
    fc.assert(fc.property(fc.oneof(anyText, edgeUnits), (text) => {
      const expected = createHash("sha256").update(Buffer.from(new TextEncoder().encode(text))).digest("hex")
      expect(sha256Hex(text)).toBe(expected)
      expect(portableSha256Hex(text)).toBe(expected)
    }), { numRuns: 1000 })
  })

  it("matches the standard's test vectors", () => {
    expect(sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    expect(portableSha256Hex("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
  })

  it("is what a key is stored as", async () => {
    const key = "sk_agt_0123456789abcdefABCDEF0123456789"
    expect(await Effect.runPromise(hashApiKey(key))).toBe(portableSha256Hex(key))
  })
})

describe("utcDay", () => {
  it("is the instant's UTC date, whatever day was asked for before (the last day's text is kept)", () => {
    // Instants from 1900 to 2200 asked for in any order: some anywhere, most within two days of
    // one another (either side of midnight, and of 1970, where the day number turns negative).
    const dayMs = 86_400_000
    const anywhere = fc.integer({ min: -2_208_988_800_000, max: 7_258_118_400_000 })
    const nearby = fc.tuple(
      fc.oneof(fc.integer({ min: -25_567, max: 84_005 }), fc.constantFrom(-1, 0, 1)),
      fc.array(fc.oneof(fc.integer({ min: -2 * dayMs, max: 2 * dayMs }), fc.constantFrom(-1, 0, 1, dayMs - 1, dayMs)), { minLength: 1, maxLength: 8 })
    ).map(([day, offsets]) => offsets.map((offset) => day * dayMs + offset))
    const instants = fc.oneof(fc.array(anywhere, { minLength: 1, maxLength: 8 }), nearby)
    fc.assert(fc.property(instants, (list) => {
      for (const ms of list) expect(utcDay(new Date(ms))).toBe(new Date(ms).toISOString().slice(0, 10))
    }), { numRuns: 500 })
  })
})
