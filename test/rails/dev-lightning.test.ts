import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { secp256k1 } from "@noble/curves/secp256k1.js"
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex, hexToBytes } from "@noble/hashes/utils.js"
import { bech32 } from "@scure/base"
import bolt11 from "bolt11"
import { Cause, Effect, Exit } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import {
  bytesField,
  descriptionField,
  encodeAmount,
  encodeInvoice,
  encodeRawInvoice,
  expiryField,
  featuresField,
  intToWords,
  minFinalCltvExpiryField,
  nodePublicKey,
  paymentHashField,
  paymentSecretField,
  TAG,
  wordsToBytesPadded
} from "../../adapters/rails/bolt11.ts"
import * as DevLightning from "../../adapters/rails/DevLightning.ts"
import { type LightningInvoiceRequest, LightningRail } from "../../src/ports/Rails.ts"

/** bolt11's own description of regtest (it also recognises `bcrt` unaided). */
const REGTEST = { bech32: "bcrt", pubKeyHash: 0x6f, scriptHash: 0xc4, validWitnessVersions: [0, 1] }

const tempDirs: Array<string> = []
const tempDir = async () => {
  const dir = await mkdtemp(join(tmpdir(), "spendgate-dev-lightning-"))
  tempDirs.push(dir)
  return dir
}
afterAll(async () => {
  await Promise.all(tempDirs.map((dir) => rm(dir, { recursive: true, force: true })))
})

const request = (overrides: Partial<LightningInvoiceRequest> = {}): LightningInvoiceRequest => ({
  invoiceId: "inv_test",
  amountMsat: 21_000n,
  memo: "Spendgate wallet funding inv_test",
  expirySeconds: 3600,
  createdAt: new Date("2026-05-01T12:34:56.789Z"),
  ...overrides
})

const inMemoryNode = () => Effect.runPromise(DevLightning.make({ dataDir: undefined }))

/** The public key a rail built by `layer` signs with, read back from one of its invoices. */
const payeeOfLayer = (options: DevLightning.DevLightningOptions) =>
  Effect.runPromise(
    Effect.gen(function*() {
      const rail = yield* LightningRail
      const created = yield* rail.createInvoice(request())
      return bolt11.decode(created.paymentRequest, REGTEST).payeeNodeKey
    }).pipe(Effect.provide(DevLightning.layer(options)))
  )

describe("BOLT #11 encoder against the specification's examples", () => {
  // All examples are signed with this key; its node id is 03e7156a…dd9ad.
  const specKey = hexToBytes("e126f68f7eafcc8b74f54d269fe206be715000f94dac067d1c04a8ca3b2db734")
  const specNode = "03e7156ae33b0a208d0744199163177e909e80176e55d97a2f221ede0f934dd9ad"
  const specHash = hexToBytes("0001020304050607080900010203040506070809000102030405060708090102")
  const specSecret = hexToBytes("11".repeat(32))
  const timestamp = 1496314658
  const modernFeatures = featuresField([8, 14])

  it("derives the examples' node id from their private key", () => {
    expect(bytesToHex(nodePublicKey(specKey))).toBe(specNode)
  })

  it("reproduces the legacy donation example (no amount, no payment secret) character for character", () => {
    // From the specification before `s` became mandatory.
    const invoice = encodeRawInvoice({
      network: "bc",
      timestampSeconds: timestamp,
      privateKey: specKey,
      fields: [paymentHashField(specHash), descriptionField("Please consider supporting this project")]
    })
    expect(invoice).toBe(
      "lnbc1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpl2pkx2ctnv5sxxmmwwd5kgetjypeh2ursdae8g6twvus8g6rfwvs8qun0dfjkxaq8rkx3yf5tcsyz3d73gafnh3cax9rn449d9p5uxz9ezhhypd0elx87sjle52x86fux2ypatgddc6k63n7erqz25le42c4u4ecky03ylcqca784w"
    )
  })

  it("reproduces the current donation example, and the bytes it says are signed", () => {
    const fields = [
      paymentSecretField(specSecret),
      paymentHashField(specHash),
      descriptionField("Please consider supporting this project"),
      modernFeatures
    ]
    const invoice = encodeRawInvoice({ network: "bc", timestampSeconds: timestamp, privateKey: specKey, fields })
    expect(invoice).toBe(
      "lnbc1pvjluezsp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpl2pkx2ctnv5sxxmmwwd5kgetjypeh2ursdae8g6twvus8g6rfwvs8qun0dfjkxaq9qrsgq357wnc5r2ueh7ck6q93dj32dlqnls087fxdwk8qakdyafkq3yap9us6v52vjjsrvywa6rt52cm9r9zqt8r2t7mlcwspyetp5h2tztugp9lfyql"
    )
    // The breakdown's "hex of data for signing": hrp bytes, then the data words padded to bytes.
    const { prefix, words } = bech32.decode(invoice, false)
    const signed = new Uint8Array([...new TextEncoder().encode(prefix), ...wordsToBytesPadded(words.slice(0, -104))])
    expect(bytesToHex(signed)).toBe(
      "6c6e62630b25fe64500d04444444444444444444444444444444444444444444444444444444444444444021a00008101820283038404800081018202830384048000810182028303840480810343f506c6561736520636f6e736964657220737570706f7274696e6720746869732070726f6a6563740500e08000"
    )
  })

  it("reproduces the coffee example ($3, 60 s expiry)", () => {
    const invoice = encodeRawInvoice({
      network: "bc",
      amountMsat: 250_000_000n,
      timestampSeconds: timestamp,
      privateKey: specKey,
      fields: [
        paymentSecretField(specSecret),
        paymentHashField(specHash),
        descriptionField("1 cup coffee"),
        expiryField(60),
        modernFeatures
      ]
    })
    expect(invoice).toBe(
      "lnbc2500u1pvjluezsp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5xysxxatsyp3k7enxv4jsxqzpu9qrsgquk0rl77nj30yxdy8j9vdx85fkpmdla2087ne0xh8nhedh8w27kyke0lp53ut353s06fv3qfegext0eh0ymjpf39tuven09sam30g4vgpfna3rh"
    )
  })

  it("reproduces the non-ASCII description example (ナンセンス 1杯)", () => {
    const invoice = encodeRawInvoice({
      network: "bc",
      amountMsat: 250_000_000n,
      timestampSeconds: timestamp,
      privateKey: specKey,
      fields: [
        paymentSecretField(specSecret),
        paymentHashField(specHash),
        descriptionField("ナンセンス 1杯"),
        expiryField(60),
        modernFeatures
      ]
    })
    expect(invoice).toBe(
      "lnbc2500u1pvjluezsp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpquwpc4curk03c9wlrswe78q4eyqc7d8d0xqzpu9qrsgqhtjpauu9ur7fw2thcl4y9vfvh4m9wlfyz2gem29g5ghe2aak2pm3ps8fdhtceqsaagty2vph7utlgj48u0ged6a337aewvraedendscp573dxr"
    )
  })

  it("reproduces the coffee beans example (25m, feature bits 8, 14 and 99)", () => {
    const invoice = encodeRawInvoice({
      network: "bc",
      amountMsat: 2_500_000_000n,
      timestampSeconds: timestamp,
      privateKey: specKey,
      fields: [
        paymentHashField(specHash),
        descriptionField("coffee beans"),
        paymentSecretField(specSecret),
        featuresField([8, 14, 99])
      ]
    })
    expect(invoice).toBe(
      "lnbc25m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5vdhkven9v5sxyetpdeessp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygs9q5sqqqqqqqqqqqqqqqqsgq2a25dxl5hrntdtn6zvydt7d66hyzsyhqs4wdynavys42xgl6sgx9c4g7me86a27t07mdtfry458rtjr0v92cnmswpsjscgt2vcse3sgpz3uapa"
    )
  })

  it("reproduces the pico-BTC example (one week expiry, c = 10, a route hint)", () => {
    // r: pubkey, short_channel_id 589390x3312x1, fee_base_msat 1000, fee_proportional_millionths 2500, cltv_expiry_delta 40
    const hop = new Uint8Array(51)
    const view = new DataView(hop.buffer)
    hop.set(hexToBytes("03d06758583bb5154774a6eb221b1276c9e82d65bbaceca806d90e20c108f4b1c7"), 0)
    view.setBigUint64(33, (589390n << 40n) | (3312n << 16n) | 1n)
    view.setUint32(41, 1000)
    view.setUint32(45, 2500)
    view.setUint16(49, 40)
    const invoice = encodeRawInvoice({
      network: "bc",
      amountMsat: 967_878_534n,
      timestampSeconds: 1572468703,
      privateKey: specKey,
      fields: [
        paymentHashField(hexToBytes("462264ede7e14047e9b249da94fefc47f41f7d02ee9b091815a5506bc8abf75f")),
        descriptionField(
          "Blockstream Store: 88.85 USD for Blockstream Ledger Nano S x 1, \"Back In My Day\" Sticker x 2, \"I Got Lightning Working\" Sticker x 2 and 1 more items"
        ),
        paymentSecretField(specSecret),
        expiryField(604800),
        minFinalCltvExpiryField(10),
        bytesField(TAG.routing, hop),
        modernFeatures
      ]
    })
    expect(invoice).toBe(
      "lnbc9678785340p1pwmna7lpp5gc3xfm08u9qy06djf8dfflhugl6p7lgza6dsjxq454gxhj9t7a0sd8dgfkx7cmtwd68yetpd5s9xar0wfjn5gpc8qhrsdfq24f5ggrxdaezqsnvda3kkum5wfjkzmfqf3jkgem9wgsyuctwdus9xgrcyqcjcgpzgfskx6eqf9hzqnteypzxz7fzypfhg6trddjhygrcyqezcgpzfysywmm5ypxxjemgw3hxjmn8yptk7untd9hxwg3q2d6xjcmtv4ezq7pqxgsxzmnyyqcjqmt0wfjjq6t5v4khxsp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygsxqyjw5qcqp2rzjq0gxwkzc8w6323m55m4jyxcjwmy7stt9hwkwe2qxmy8zpsgg7jcuwz87fcqqeuqqqyqqqqlgqqqqn3qq9q9qrsgqrvgkpnmps664wgkp43l22qsgdw4ve24aca4nymnxddlnp8vh9v2sdxlu5ywdxefsfvm0fq3sesf08uf6q9a2ke0hc9j6z6wlxg5z5kqpu2v9wz"
    )
  })

  it("encodes amounts in the shortest exact form", () => {
    expect(encodeAmount(1n)).toBe("10p")
    expect(encodeAmount(1_000n)).toBe("10n")
    expect(encodeAmount(21_000n)).toBe("210n")
    expect(encodeAmount(1_000_000n)).toBe("10u")
    expect(encodeAmount(250_000_000n)).toBe("2500u")
    expect(encodeAmount(2_500_000_000n)).toBe("25m")
    expect(encodeAmount(100_000_000_000n)).toBe("1")
    expect(encodeAmount(2_100_000_000_000_000_000n)).toBe("21000000")
    expect(encodeAmount(123_456_789n)).toBe("1234567890p")
    expect(() => encodeAmount(0n)).toThrow()
    expect(() => encodeAmount(-1n)).toThrow()
  })

  it("writes integers as minimal big-endian words", () => {
    expect(intToWords(0)).toEqual([])
    expect(intToWords(18)).toEqual([18])
    expect(intToWords(60)).toEqual([1, 28])
    expect(intToWords(3600)).toEqual([3, 16, 16])
    expect(intToWords(604800)).toEqual([18, 14, 20, 0])
  })

  it("refuses a description that does not fit one field (639 bytes)", () => {
    const options = {
      network: "bcrt" as const,
      amountMsat: 1000n,
      paymentHash: specHash,
      paymentSecret: specSecret,
      expirySeconds: 3600,
      timestampSeconds: timestamp,
      privateKey: specKey
    }
    expect(() => encodeInvoice({ ...options, description: "a".repeat(639) })).not.toThrow()
    expect(() => encodeInvoice({ ...options, description: "a".repeat(640) })).toThrow(/at most 1023/)
  })
})

describe("dev Lightning rail", () => {
  const amounts: ReadonlyArray<readonly [label: string, msat: bigint, hrp: string]> = [
    ["1 msat", 1n, "lnbcrt10p"],
    ["1 sat", 1_000n, "lnbcrt10n"],
    ["21 sats", 21_000n, "lnbcrt210n"],
    ["1000 sats", 1_000_000n, "lnbcrt10u"],
    ["2,500,000 sats (0.025 BTC)", 2_500_000_000n, "lnbcrt25m"],
    ["1 BTC", 100_000_000_000n, "lnbcrt1"],
    ["123,456,789 msat", 123_456_789n, "lnbcrt1234567890p"]
  ]

  for (const [label, amountMsat, hrp] of amounts) {
    it(`issues a decodable regtest invoice for ${label}`, async () => {
      const node = await inMemoryNode()
      const createdAt = new Date("2026-05-01T12:34:56.789Z")
      const created = await Effect.runPromise(
        node.issue(request({ amountMsat, createdAt, memo: `funding ${label}` }))
      )
      expect(created.paymentRequest.startsWith(`${hrp}1`)).toBe(true)

      const decoded = bolt11.decode(created.paymentRequest, REGTEST)
      expect(decoded.prefix).toBe(hrp)
      expect(decoded.millisatoshis).toBe(amountMsat.toString())
      if (amountMsat % 1000n === 0n) expect(decoded.satoshis).toBe(Number(amountMsat / 1000n))
      else expect(decoded.satoshis ?? null).toBeNull()

      expect(created.paymentHash).toMatch(/^[0-9a-f]{64}$/)
      expect(decoded.tagsObject.payment_hash).toBe(created.paymentHash)
      expect(bytesToHex(sha256(hexToBytes(created.preimage)))).toBe(created.paymentHash)
      expect(decoded.tagsObject.payment_secret).toMatch(/^[0-9a-f]{64}$/)
      expect(decoded.tagsObject.description).toBe(`funding ${label}`)
      expect(decoded.tagsObject.min_final_cltv_expiry).toBe(18)
      expect(decoded.tagsObject.feature_bits?.var_onion_optin?.required).toBe(true)
      expect(decoded.tagsObject.feature_bits?.payment_secret?.required).toBe(true)

      expect(decoded.timestamp).toBe(Math.floor(createdAt.getTime() / 1000))
      expect(decoded.tagsObject.expire_time).toBe(3600)
      expect(decoded.timeExpireDate! - decoded.timestamp!).toBe(3600)

      expect(decoded.payeeNodeKey).toBe(node.publicKeyHex)
    })
  }

  it("gives the rail port the same invoice without the preimage", async () => {
    const node = await inMemoryNode()
    expect(node.rail.name).toBe("dev")
    const created = await Effect.runPromise(node.rail.createInvoice(request()))
    expect(Object.keys(created).sort()).toEqual(["paymentHash", "paymentRequest"])
    expect(bolt11.decode(created.paymentRequest).tagsObject.payment_hash).toBe(created.paymentHash)
  })

  it("round-trips non-ASCII descriptions", async () => {
    const node = await inMemoryNode()
    const memo = "Guthaben für Zürich — ナンセンス 1杯 ⚡🙂"
    const created = await Effect.runPromise(node.rail.createInvoice(request({ memo })))
    expect(bolt11.decode(created.paymentRequest, REGTEST).tagsObject.description).toBe(memo)
  })

  it("signs with the node key: the signature verifies, and a tampered invoice does not name the node", async () => {
    const node = await inMemoryNode()
    const created = await Effect.runPromise(node.rail.createInvoice(request({ memo: "pay me" })))
    const { prefix, words } = bech32.decode(created.paymentRequest, false)

    // Independently of bolt11: verify r||s over sha256(hrp || padded data) with the node's key.
    const data = words.slice(0, -104)
    const signature = bech32.fromWords(words.slice(-104))
    const digest = sha256(new Uint8Array([...new TextEncoder().encode(prefix), ...wordsToBytesPadded(data)]))
    expect(signature[64]).toBeLessThanOrEqual(3)
    expect(secp256k1.verify(signature.subarray(0, 64), digest, hexToBytes(node.publicKeyHex), { prehash: false }))
      .toBe(true)

    // Change one word of the signed data (the last word of the timestamp) and
    // re-checksum: the string is valid bech32, but the signature no longer belongs to it.
    const tamperedWords = [...words]
    tamperedWords[6] = tamperedWords[6]! ^ 1
    const tampered = bech32.encode(prefix, tamperedWords, false)
    let payee: string | undefined
    try {
      payee = bolt11.decode(tampered, REGTEST).payeeNodeKey
    } catch {
      payee = undefined // not recoverable at all: also a rejection
    }
    expect(payee).not.toBe(node.publicKeyHex)

    // A plain typo breaks the checksum.
    const last = created.paymentRequest.at(-1) === "q" ? "p" : "q"
    expect(() => bolt11.decode(created.paymentRequest.slice(0, -1) + last, REGTEST)).toThrow()
  })

  it("never reuses a payment hash or payment secret", async () => {
    const node = await inMemoryNode()
    const invoices = await Effect.runPromise(
      Effect.forEach(Array.from({ length: 64 }, () => request()), (r) => node.rail.createInvoice(r))
    )
    const decoded = invoices.map((invoice) => bolt11.decode(invoice.paymentRequest, REGTEST).tagsObject)
    expect(new Set(invoices.map((invoice) => invoice.paymentHash)).size).toBe(64)
    expect(new Set(decoded.map((tags) => tags.payment_secret)).size).toBe(64)
  })

  it("keeps an in-memory key per rail when there is no data directory", async () => {
    const first = await inMemoryNode()
    const second = await inMemoryNode()
    expect(first.keyFile).toBeUndefined()
    expect(first.publicKeyHex).toMatch(/^0[23][0-9a-f]{64}$/)
    expect(first.publicKeyHex).not.toBe(second.publicKeyHex)
  })

  it("creates the key file with mode 0600 and reuses it across layer builds", async () => {
    const dataDir = join(await tempDir(), "nested", "data")
    const node = await Effect.runPromise(DevLightning.make({ dataDir }))
    const keyFile = join(dataDir, DevLightning.KEY_FILE_NAME)
    expect(node.keyFile).toBe(keyFile)

    const text = await readFile(keyFile, "utf8")
    expect(text.trim()).toMatch(/^[0-9a-f]{64}$/)
    expect(bytesToHex(nodePublicKey(hexToBytes(text.trim())))).toBe(node.publicKeyHex)
    if (process.platform !== "win32") expect((await stat(keyFile)).mode & 0o777).toBe(0o600)

    // Two independent layer builds (a restart, twice) sign with the same key.
    expect(await payeeOfLayer({ dataDir })).toBe(node.publicKeyHex)
    expect(await payeeOfLayer({ dataDir })).toBe(node.publicKeyHex)
    expect(await readFile(keyFile, "utf8")).toBe(text)
  })

  it("agrees on one key when several rails start at once on a fresh directory", async () => {
    const dataDir = await tempDir()
    const nodes = await Effect.runPromise(
      Effect.all(Array.from({ length: 8 }, () => DevLightning.make({ dataDir })), { concurrency: "unbounded" })
    )
    expect(new Set(nodes.map((node) => node.publicKeyHex)).size).toBe(1)
  })

  it("tightens a key file readable by others", async () => {
    if (process.platform === "win32") return
    const dataDir = await tempDir()
    const keyFile = join(dataDir, DevLightning.KEY_FILE_NAME)
    const key = "11".repeat(32)
    await writeFile(keyFile, `${key}\n`, { mode: 0o644 })
    const node = await Effect.runPromise(DevLightning.make({ dataDir }))
    expect(node.publicKeyHex).toBe(bytesToHex(nodePublicKey(hexToBytes(key))))
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600)
  })

  it("refuses a corrupt key file instead of replacing it", async () => {
    const dataDir = await tempDir()
    const keyFile = join(dataDir, DevLightning.KEY_FILE_NAME)
    await writeFile(keyFile, "not a key\n", { mode: 0o600 })
    const error = await Effect.runPromise(Effect.flip(DevLightning.make({ dataDir })))
    expect(error._tag).toBe("RailError")
    expect(error.message).toContain(DevLightning.KEY_FILE_NAME)
    // The layer cannot start either, and the file is left as it was.
    const exit = await Effect.runPromiseExit(
      Effect.provide(
        Effect.gen(function*() {
          return yield* LightningRail
        }),
        DevLightning.layer({ dataDir })
      )
    )
    expect(Exit.isFailure(exit) && Cause.hasDies(exit.cause)).toBe(true)
    expect(await readFile(keyFile, "utf8")).toBe("not a key\n")

    // The zero scalar is 64 hex characters but not a private key.
    await writeFile(keyFile, "00".repeat(32), { mode: 0o600 })
    expect((await Effect.runPromise(Effect.flip(DevLightning.make({ dataDir })))).message).toContain("secp256k1")
  })

  it("issues mainnet and testnet invoices when configured", async () => {
    for (const network of ["bc", "tb"] as const) {
      const node = await Effect.runPromise(DevLightning.make({ dataDir: undefined, network }))
      const created = await Effect.runPromise(node.rail.createInvoice(request({ amountMsat: 1_000_000n })))
      expect(created.paymentRequest.startsWith(`ln${network}10u1`)).toBe(true)
      const decoded = bolt11.decode(created.paymentRequest)
      expect(decoded.network?.bech32).toBe(network)
      expect(decoded.payeeNodeKey).toBe(node.publicKeyHex)
    }
  })

  it("fails with RailError, not a defect, on requests it cannot encode", async () => {
    const node = await inMemoryNode()
    for (
      const bad of [
        request({ amountMsat: 0n }),
        request({ memo: "é".repeat(320) }), // 640 bytes
        request({ expirySeconds: -1 }),
        request({ createdAt: new Date(Number.NaN) })
      ]
    ) {
      const error = await Effect.runPromise(Effect.flip(node.rail.createInvoice(bad)))
      expect(error._tag).toBe("RailError")
      expect(error.rail).toBe("dev")
    }
  })
})
