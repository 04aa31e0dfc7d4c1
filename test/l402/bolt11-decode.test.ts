import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import bolt11 from "bolt11"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import {
  type Bolt11Network,
  decodeInvoice,
  descriptionHashField,
  encodeInvoice,
  encodeRawInvoice,
  expiryField,
  InvalidInvoice,
  nodePublicKey,
  payeeNodeKeyField,
  paymentHashField
} from "../../adapters/rails/bolt11.ts"

const key = (byte: number) => new Uint8Array(32).fill(byte)

const bytes32 = fc.uint8Array({ minLength: 32, maxLength: 32 })
const privateKeyArb = fc.integer({ min: 1, max: 250 }).map(key)

describe("BOLT #11 decoding", () => {
  it("reads back every field the project's encoder writes, and recovers the payee", () => {
    fc.assert(
      fc.property(
        fc.constantFrom<Bolt11Network>("bc", "tb", "bcrt"),
        fc.bigInt({ min: 1n, max: 2_100_000_000_000_000_000n }),
        bytes32,
        bytes32,
        fc.string({ maxLength: 120 }),
        fc.integer({ min: 0, max: 10_000_000 }),
        fc.integer({ min: 0, max: 2 ** 34 }),
        privateKeyArb,
        (network, amountMsat, paymentHash, paymentSecret, description, expirySeconds, timestampSeconds, privateKey) => {
          const paymentRequest = encodeInvoice({
            network,
            amountMsat,
            paymentHash,
            paymentSecret,
            description,
            expirySeconds,
            timestampSeconds,
            privateKey
          })
          const decoded = decodeInvoice(paymentRequest)
          if (decoded instanceof InvalidInvoice) throw decoded
          expect(decoded.network).toBe(network)
          expect(decoded.amountMsat).toBe(amountMsat)
          expect(decoded.paymentHash).toBe(bytesToHex(paymentHash))
          expect(decoded.paymentSecret).toBe(bytesToHex(paymentSecret))
          expect(decoded.description).toBe(new TextDecoder().decode(new TextEncoder().encode(description)))
          expect(decoded.expirySeconds).toBe(expirySeconds)
          expect(decoded.timestampSeconds).toBe(timestampSeconds)
          expect(decoded.payeeNodeKey).toBe(bytesToHex(nodePublicKey(privateKey)))
        }
      ),
      { numRuns: 60 }
    )
  })

  it("agrees with the bolt11 package on invoices that package signs", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10_000_000 }),
        bytes32,
        fc.string({ minLength: 1, maxLength: 60 }),
        fc.integer({ min: 60, max: 86_400 }),
        privateKeyArb,
        fc.boolean(),
        (sats, paymentHash, description, expire, privateKey, withPayee) => {
          const timestamp = 1_700_000_000
          const encoded = bolt11.encode({
            network: { bech32: "bcrt", pubKeyHash: 111, scriptHash: 196, validWitnessVersions: [0, 1] },
            satoshis: sats,
            timestamp,
            ...(withPayee ? { payeeNodeKey: bytesToHex(nodePublicKey(privateKey)) } : {}),
            tags: [
              { tagName: "payment_hash", data: bytesToHex(paymentHash) },
              { tagName: "description", data: description },
              { tagName: "expire_time", data: expire }
            ]
          }, false)
          const signed = bolt11.sign(encoded, Buffer.from(privateKey))
          const decoded = decodeInvoice(signed.paymentRequest!)
          if (decoded instanceof InvalidInvoice) throw decoded
          const theirs = bolt11.decode(signed.paymentRequest!)
          expect(decoded.amountMsat).toBe(BigInt(theirs.millisatoshis!))
          expect(decoded.timestampSeconds).toBe(theirs.timestamp)
          expect(decoded.expirySeconds).toBe(expire)
          expect(decoded.paymentHash).toBe(bytesToHex(paymentHash))
          expect(decoded.payeeNodeKey).toBe(theirs.payeeNodeKey)
          expect(decoded.description).toBe(description)
          expect(decoded.network).toBe("bcrt")
        }
      ),
      { numRuns: 30 }
    )
  })

  it("reads the specification's description-hash example", () => {
    // BOLT #11: "Please send $24 for an entire list of things related to coffee (description hash)"
    const example =
      "lnbc20m1pvjluezsp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqhp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqs9qrsgq7ea976txfraylvgzuxs8kgcw23ezlrszfnh8r6qtfpr6cxga50aj6txm9rxrydzd06dfeawfk6swupvz4erwnyutnjq7x39ymw6j38gp7ynn44"
    const decoded = decodeInvoice(example)
    if (decoded instanceof InvalidInvoice) throw decoded
    expect(decoded.amountMsat).toBe(2_000_000_000n)
    expect(decoded.network).toBe("bc")
    expect(decoded.timestampSeconds).toBe(1496314658)
    expect(decoded.descriptionHash).toBe(bytesToHex(sha256(new TextEncoder().encode(
      "One piece of chocolate cake, one icecream cone, one pickle, one slice of swiss cheese, one slice of salami, one lollypop, one piece of cherry pie, one sausage, one cupcake, and one slice of watermelon"
    ))))
    expect(decoded.payeeNodeKey).toBe("03e7156ae33b0a208d0744199163177e909e80176e55d97a2f221ede0f934dd9ad")
    expect(decoded.paymentHash).toBe("0001020304050607080900010203040506070809000102030405060708090102")
  })

  it("checks the n field against the signature", () => {
    const base = {
      network: "bcrt" as const,
      amountMsat: 1000n,
      timestampSeconds: 1_700_000_000,
      privateKey: key(7)
    }
    const hash = sha256(new Uint8Array([1]))
    const good = encodeRawInvoice({
      ...base,
      fields: [paymentHashField(hash), descriptionHashField(hash), payeeNodeKeyField(nodePublicKey(key(7))), expiryField(60)]
    })
    const decoded = decodeInvoice(good)
    expect(decoded).not.toBeInstanceOf(InvalidInvoice)
    const forged = encodeRawInvoice({
      ...base,
      fields: [paymentHashField(hash), descriptionHashField(hash), payeeNodeKeyField(nodePublicKey(key(8)))]
    })
    const refused = decodeInvoice(forged)
    expect(refused).toBeInstanceOf(InvalidInvoice)
    expect((refused as InvalidInvoice).message).toMatch(/payee/)
  })

  it("answers a typed error, never a throw, for malformed input", () => {
    const valid = encodeInvoice({
      network: "bcrt",
      amountMsat: 21_000n,
      paymentHash: key(1),
      paymentSecret: key(2),
      description: "coffee",
      expirySeconds: 600,
      timestampSeconds: 1_700_000_000,
      privateKey: key(3)
    })
    // A changed character breaks the checksum or the signature.
    const flipped = valid.slice(0, 40) + (valid[40] === "q" ? "p" : "q") + valid.slice(41)
    for (const bad of ["", "lnbc", "hello", valid.slice(0, -1), flipped, valid.toUpperCase().slice(0, 10) + valid.slice(10), "x".repeat(9000)]) {
      expect(decodeInvoice(bad)).toBeInstanceOf(InvalidInvoice)
    }
    fc.assert(
      // No random text is an invoice (a checksum and a signature would have to hold): each is a typed refusal.
      fc.property(fc.string({ maxLength: 400 }), (text) => {
        expect(decodeInvoice(text)).toBeInstanceOf(InvalidInvoice)
      }),
      { numRuns: 300 }
    )
    // Nor is random text that looks like one: the prefix and the alphabet right, the rest random.
    fc.assert(
      fc.property(fc.stringMatching(/^lnbcrt[0-9]{0,6}1[qpzry9x8gf2tvdw0s3jn54khce6mua7l]{100,300}$/), (text) => {
        expect(decodeInvoice(text)).toBeInstanceOf(InvalidInvoice)
      }),
      { numRuns: 300 }
    )
    fc.assert(
      fc.property(fc.integer({ min: 0, max: valid.length - 1 }), fc.constantFrom(..."qpzry9x8gf2tvdw0s3jn54khce6mua7l"), (at, c) => {
        const mutated = valid.slice(0, at) + c + valid.slice(at + 1)
        const result = decodeInvoice(mutated)
        if (mutated !== valid) expect(result).toBeInstanceOf(InvalidInvoice)
      }),
      { numRuns: 200 }
    )
    // The uppercase form is the same invoice.
    expect(decodeInvoice(valid.toUpperCase())).not.toBeInstanceOf(InvalidInvoice)
  })
})
