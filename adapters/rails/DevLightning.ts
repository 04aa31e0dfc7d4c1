import { randomBytes } from "node:crypto"
import { chmod, link, mkdir, open, readFile, stat, unlink } from "node:fs/promises"
import { join } from "node:path"
import { hmac } from "@noble/hashes/hmac.js"
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex, hexToBytes } from "@noble/hashes/utils.js"
import { type Context, Effect, Layer } from "effect"
import {
  type LightningInvoiceCreated,
  type LightningInvoiceRequest,
  type LightningPayer,
  type LightningPaymentStatus,
  LightningRail,
  RailError
} from "../../src/ports/Rails.ts"
import { type Bolt11Network, decodeInvoice, encodeInvoice, InvalidInvoice, isValidPrivateKey, nodePublicKey } from "./bolt11.ts"

export { lightningRoutes as routes } from "./devRoutes.ts"

/**
 * The built-in Lightning rail for development: it issues real, signed
 * BOLT #11 invoices from a node key of its own, so the funding flow can be
 * run end to end on one machine with no Lightning node and no credentials.
 * Nothing watches a network for payments; the dev pay page reports them.
 *
 * The node key is 32 random bytes kept hex-encoded in
 * `${dataDir}/dev-lightning-node.key` (mode 0600), created on first use and
 * reused afterwards, so the payee of issued invoices stays the same across
 * restarts. Without a data directory the key lives only in memory.
 *
 * Paying: the dev node pays the invoices it issued itself (an L402
 * paywall on the dev rails, e.g. this gateway's own). It knows their
 * preimages without keeping them: a preimage is derived from the node key
 * and the invoice's payment secret, both at hand when the invoice is read
 * back. Invoices of any other node fail (no route). Paid hashes are
 * remembered in memory, so one hash is never paid twice while the process lives.
 *
 * The default network is regtest (`lnbcrt…`): these invoices name a node
 * that exists nowhere, and a regtest prefix keeps real wallets from trying
 * to pay them.
 */

export const RAIL_NAME = "dev"
export const KEY_FILE_NAME = "dev-lightning-node.key"

export interface DevLightningOptions {
  /** Where the node key is kept; undefined keeps it in memory. */
  readonly dataDir: string | undefined
  /** Currency prefix of issued invoices; defaults to regtest. */
  readonly network?: Bolt11Network
}

export interface DevLightningInvoice extends LightningInvoiceCreated {
  /** The payment preimage (hex); `paymentHash` is its SHA-256. */
  readonly preimage: string
}

export interface DevLightningNode {
  readonly rail: Context.Service.Shape<typeof LightningRail>
  /** The node id: compressed public key, 66 lower-case hex characters. */
  readonly publicKeyHex: string
  /** Where the key is kept, or undefined when it is in memory. */
  readonly keyFile: string | undefined
  /** Like `rail.createInvoice`, also returning the preimage. */
  readonly issue: (request: LightningInvoiceRequest) => Effect.Effect<DevLightningInvoice, RailError>
}

/**
 * Preimages of the invoices this process's dev nodes issued, by payment
 * hash, so the dev payer route can hand the payer its proof of payment
 * (as a real wallet learns the preimage when its payment settles). Bounded:
 * the oldest are forgotten first; a restart forgets them all (the invoice
 * can still be paid, only its preimage is no longer shown).
 */
const MAX_REMEMBERED_PREIMAGES = 10_000
const preimages = new Map<string, string>()

const rememberPreimage = (paymentHash: string, preimage: string) => {
  preimages.set(paymentHash, preimage)
  if (preimages.size > MAX_REMEMBERED_PREIMAGES) preimages.delete(preimages.keys().next().value!)
}

/** The preimage (hex) of an invoice a dev node of this process issued, if still remembered. */
export const preimageOf = (paymentHash: string): string | undefined => preimages.get(paymentHash)

const railError = (message: string) => new RailError({ rail: RAIL_NAME, message })

const causeMessage = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

const errorCode = (cause: unknown): unknown =>
  typeof cause === "object" && cause !== null && "code" in cause ? cause.code : undefined

/** 32 random bytes that are a valid secp256k1 scalar (all but ~2^-128 of draws are). */
const generatePrivateKey = (): Uint8Array => {
  for (;;) {
    const candidate = new Uint8Array(randomBytes(32))
    if (isValidPrivateKey(candidate)) return candidate
  }
}

const parseKeyFile = (path: string, text: string): Uint8Array => {
  const hex = text.trim()
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) {
    throw new Error(`${path} does not hold a node key (64 hex characters expected)`)
  }
  const key = hexToBytes(hex.toLowerCase())
  if (!isValidPrivateKey(key)) throw new Error(`${path} does not hold a valid secp256k1 private key`)
  return key
}

const readKeyFile = async (path: string): Promise<Uint8Array> => {
  const key = parseKeyFile(path, await readFile(path, "utf8"))
  // The key signs invoices: keep it private even if it was copied in loosely.
  if (process.platform !== "win32" && ((await stat(path)).mode & 0o077) !== 0) await chmod(path, 0o600)
  return key
}

/**
 * Creates the key file if there is none. The key is written to a private
 * temporary file and then hard-linked into place, so the file appears
 * complete or not at all, and of two processes starting at once exactly one
 * key wins (the other gets EEXIST and reads the winner's).
 */
const createKeyFile = async (path: string): Promise<boolean> => {
  const temporary = `${path}.${bytesToHex(new Uint8Array(randomBytes(6)))}.tmp`
  const handle = await open(temporary, "wx", 0o600)
  try {
    try {
      await handle.writeFile(`${bytesToHex(generatePrivateKey())}\n`, "utf8")
      await handle.sync()
    } finally {
      await handle.close()
    }
    await chmod(temporary, 0o600) // in case the umask took bits away from the owner
    try {
      await link(temporary, path)
      return true
    } catch (cause) {
      if (errorCode(cause) === "EEXIST") return false
      throw cause
    }
  } finally {
    await unlink(temporary).catch(() => undefined)
  }
}

const loadOrCreateKey = async (dataDir: string): Promise<Uint8Array> => {
  const path = join(dataDir, KEY_FILE_NAME)
  await mkdir(dataDir, { recursive: true })
  try {
    return await readKeyFile(path)
  } catch (cause) {
    if (errorCode(cause) !== "ENOENT") throw cause
  }
  await createKeyFile(path)
  return readKeyFile(path)
}

const PREIMAGE_LABEL = new TextEncoder().encode("spendgate dev preimage")

/** The preimage of an invoice with this payment secret: HMAC-SHA256 of the node key. */
const derivePreimage = (privateKey: Uint8Array, paymentSecret: Uint8Array): Uint8Array => {
  const message = new Uint8Array(PREIMAGE_LABEL.length + paymentSecret.length)
  message.set(PREIMAGE_LABEL, 0)
  message.set(paymentSecret, PREIMAGE_LABEL.length)
  return hmac(sha256, privateKey, message)
}

/** Most paid hashes remembered; the oldest are forgotten past it. */
const MAX_REMEMBERED_PAYMENTS = 100_000

/** `publicKeyHex`: the node id, computed when first needed (a payment, not start-up). */
const makePayer = (privateKey: Uint8Array, publicKeyHex: () => string): LightningPayer => {
  const paid = new Map<string, LightningPaymentStatus>()
  const decode: LightningPayer["decode"] = (paymentRequest) => {
    const decoded = decodeInvoice(paymentRequest)
    return decoded instanceof InvalidInvoice ? { invalid: decoded.message } : decoded
  }
  return {
    decode,
    payInvoice: (request) =>
      Effect.sync((): LightningPaymentStatus => {
        const known = paid.get(request.paymentHash)
        if (known !== undefined) return known
        const decoded = decodeInvoice(request.paymentRequest)
        if (decoded instanceof InvalidInvoice) return { _tag: "Failed", reason: `invalid invoice: ${decoded.message}` }
        if (decoded.payeeNodeKey !== publicKeyHex()) {
          return { _tag: "Failed", reason: "FAILURE_REASON_NO_ROUTE (the dev node pays only its own invoices)" }
        }
        if (decoded.paymentSecret === undefined || decoded.amountMsat === undefined) {
          return { _tag: "Failed", reason: "FAILURE_REASON_INCORRECT_PAYMENT_DETAILS" }
        }
        const preimage = derivePreimage(privateKey, hexToBytes(decoded.paymentSecret))
        if (bytesToHex(sha256(preimage)) !== decoded.paymentHash) {
          return { _tag: "Failed", reason: "FAILURE_REASON_INCORRECT_PAYMENT_DETAILS" }
        }
        const status: LightningPaymentStatus = {
          _tag: "Succeeded",
          preimage: bytesToHex(preimage),
          amountMsat: decoded.amountMsat,
          feeMsat: 0n
        }
        if (paid.size >= MAX_REMEMBERED_PAYMENTS) paid.delete(paid.keys().next().value!)
        paid.set(decoded.paymentHash, status)
        return status
      }),
    trackPayment: (paymentHash) => Effect.sync(() => paid.get(paymentHash) ?? { _tag: "NotFound" as const })
  }
}

/** Builds the rail, loading the node key from `dataDir` (or creating it). */
export const make = (options: DevLightningOptions): Effect.Effect<DevLightningNode, RailError> =>
  Effect.gen(function*() {
    const network = options.network ?? "bcrt"
    const { dataDir } = options
    const privateKey = dataDir === undefined
      ? generatePrivateKey()
      : yield* Effect.tryPromise({
        try: () => loadOrCreateKey(dataDir),
        catch: (cause) => railError(`cannot load the dev Lightning node key: ${causeMessage(cause)}`)
      })
    // Derived when first asked for: the point multiplication (and the curve's precomputed
    // tables) need not hold up the server's start.
    let publicKeyHex: string | undefined

    const issue = Effect.fn("DevLightning.createInvoice")(function*(request: LightningInvoiceRequest) {
      const timestampMs = request.createdAt.getTime()
      if (!Number.isFinite(timestampMs)) return yield* railError("createdAt is not a valid date")
      const paymentSecret = new Uint8Array(randomBytes(32))
      const preimage = derivePreimage(privateKey, paymentSecret)
      const paymentHash = sha256(preimage)
      const paymentRequest = yield* Effect.try({
        try: () =>
          encodeInvoice({
            network,
            amountMsat: request.amountMsat,
            paymentHash,
            paymentSecret,
            description: request.memo,
            expirySeconds: request.expirySeconds,
            timestampSeconds: Math.floor(timestampMs / 1000),
            privateKey
          }),
        catch: (cause) => railError(`cannot encode invoice ${request.invoiceId}: ${causeMessage(cause)}`)
      })
      rememberPreimage(bytesToHex(paymentHash), bytesToHex(preimage))
      return { paymentRequest, paymentHash: bytesToHex(paymentHash), preimage: bytesToHex(preimage) }
    })

    const rail = LightningRail.of({
      name: RAIL_NAME,
      createInvoice: (request) =>
        Effect.map(issue(request), ({ paymentHash, paymentRequest }) => ({ paymentHash, paymentRequest })),
      payer: makePayer(privateKey, () => publicKeyHex ??= bytesToHex(nodePublicKey(privateKey)))
    })

    return {
      rail,
      get publicKeyHex() {
        return publicKeyHex ??= bytesToHex(nodePublicKey(privateKey))
      },
      keyFile: dataDir === undefined ? undefined : join(dataDir, KEY_FILE_NAME),
      issue
    } satisfies DevLightningNode
  })

/**
 * The dev rail as a layer. A key file that cannot be read or created stops
 * the layer with a defect naming the file: there is nothing to retry.
 */
export const layer = (options: DevLightningOptions): Layer.Layer<LightningRail> =>
  Layer.effect(LightningRail, Effect.map(make(options), (node) => node.rail).pipe(Effect.orDie))
