import { createHash, randomBytes } from "node:crypto"
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { createServer as createHttpsServer } from "node:https"
import type { AddressInfo, Socket } from "node:net"
import bolt11 from "bolt11"
import { encodeInvoice, nodePublicKey } from "../../adapters/rails/bolt11.ts"

/**
 * A local stand-in for LND's REST listener (grpc-gateway), speaking its wire
 * format: protobuf field names, int64s as JSON strings, bytes as base64, enum
 * names as strings, gRPC-status error bodies `{ code, message, details }`,
 * and server streams as newline-delimited `{"result": …}` objects whose HTTP
 * status and headers go out with the first message, as the gateway does.
 */

export const MACAROON_HEX = "0201036c6e6402f801030a10" + "ab".repeat(40)

export interface AddInvoiceCall {
  readonly method: string
  readonly path: string
  readonly macaroon: string | undefined
  readonly contentType: string | undefined
  readonly body: string
}

export interface Subscription {
  /** The raw `settle_index` query parameter, or null when absent. */
  readonly settleIndex: string | null
  readonly macaroon: string | undefined
  /** Set once the client has gone away or the fake dropped it. */
  closed: boolean
}

/** What the fake answers to AddInvoice: a status and body, or a behaviour. */
export type AddInvoiceReply =
  | { readonly status: number; readonly body: string }
  | "hang"
  | "destroy"

export type SubscribeReply = "stream" | { readonly status: number; readonly body: string }

export interface InvoiceRecord {
  readonly preimage: Buffer
  readonly hash: Buffer
  readonly valueMsat: bigint
  readonly memo: string
  readonly creationDate: number
  readonly addIndex: number
  readonly paymentRequest: string
  state: "OPEN" | "ACCEPTED" | "SETTLED" | "CANCELED"
  settleIndex: number
  settleDate: number
  amtPaidMsat: bigint
}

export const lndError = (code: number, message: string) => JSON.stringify({ code, message, details: [] })

/** A server stream refused before its first message, as grpc-gateway writes it. */
export const lndStreamError = (code: number, message: string) => JSON.stringify({ error: { code, message, details: [] } })

export type PaymentState = "IN_FLIGHT" | "SUCCEEDED" | "FAILED"

/** An outbound payment the fake node made (SendPaymentV2). */
export interface PaymentRecord {
  readonly hash: string
  readonly paymentRequest: string
  readonly valueMsat: bigint
  /** The request body as received. */
  readonly body: Record<string, unknown>
  status: PaymentState
  preimage: string
  feeMsat: bigint
  failureReason: string
  readonly creationDate: number
  readonly index: number
}

/** How the fake answers one SendPaymentV2. */
export type PayBehaviour =
  | "pay" // settle the invoice if it is one of this node's, else fail with no route
  | "fail" // FAILED, FAILURE_REASON_NO_ROUTE
  | "hang" // IN_FLIGHT until `completePayment`
  | "destroy" // the connection is cut once IN_FLIGHT is sent (the payment goes on)
  | { readonly status: number; readonly body: string }

export const paymentJson = (payment: PaymentRecord) => ({
  payment_hash: payment.hash,
  value: (payment.valueMsat / 1000n).toString(),
  creation_date: String(payment.creationDate),
  fee: (payment.feeMsat / 1000n).toString(),
  payment_preimage: payment.status === "SUCCEEDED" ? payment.preimage : "0".repeat(64),
  value_sat: (payment.valueMsat / 1000n).toString(),
  value_msat: payment.valueMsat.toString(),
  payment_request: payment.paymentRequest,
  status: payment.status,
  fee_sat: (payment.feeMsat / 1000n).toString(),
  fee_msat: payment.feeMsat.toString(),
  creation_time_ns: String(payment.creationDate * 1_000_000_000),
  htlcs: [],
  payment_index: String(payment.index),
  failure_reason: payment.status === "FAILED" ? payment.failureReason : "FAILURE_REASON_NONE",
  first_hop_custom_records: {}
})

/** What a wrong macaroon gets from LND: gRPC Unknown, so HTTP 500. */
export const BAD_MACAROON = { status: 500, body: lndError(2, "verification failed: signature mismatch after caveat verification") }

export const invoiceJson = (invoice: InvoiceRecord) => ({
  memo: invoice.memo,
  r_preimage: invoice.state === "SETTLED" ? invoice.preimage.toString("base64") : "",
  r_hash: invoice.hash.toString("base64"),
  value: (invoice.valueMsat / 1000n).toString(),
  value_msat: invoice.valueMsat.toString(),
  settled: invoice.state === "SETTLED",
  creation_date: String(invoice.creationDate),
  settle_date: String(invoice.settleDate),
  payment_request: invoice.paymentRequest,
  description_hash: "",
  expiry: "3600",
  fallback_addr: "",
  cltv_expiry: "80",
  route_hints: [],
  private: false,
  add_index: String(invoice.addIndex),
  settle_index: String(invoice.settleIndex),
  amt_paid: invoice.amtPaidMsat.toString(),
  amt_paid_sat: (invoice.amtPaidMsat / 1000n).toString(),
  amt_paid_msat: invoice.amtPaidMsat.toString(),
  state: invoice.state,
  htlcs: [],
  features: {},
  is_keysend: false,
  payment_addr: randomBytes(32).toString("base64"),
  is_amp: false,
  amp_invoice_state: {}
})

export interface FakeLnd {
  url: string
  /** Method and path (with query) of every request, in order. */
  readonly requests: Array<string>
  readonly addInvoiceCalls: Array<AddInvoiceCall>
  readonly subscriptions: Array<Subscription>
  readonly invoices: Array<InvoiceRecord>
  /** Overrides the next answers to AddInvoice (default: create the invoice). */
  addInvoiceReply: ((call: AddInvoiceCall) => AddInvoiceReply) | undefined
  /** Overrides the answer to ListInvoices (default: the page asked for). */
  listReply: ((path: string) => { readonly status: number; readonly body: string } | undefined) | undefined
  /** Overrides the answer to SubscribeInvoices (default: stream). */
  subscribeReply: ((subscription: Subscription) => SubscribeReply) | undefined
  /** The node's id (66 hex): the payee its invoices recover to. */
  readonly publicKeyHex: string
  /** Every SendPaymentV2 call's decoded body, in order (paid or not). */
  readonly sendCalls: Array<Record<string, unknown>>
  readonly payments: Array<PaymentRecord>
  /** How the next SendPaymentV2 calls are answered (default "pay"). */
  payBehaviour: ((body: Record<string, unknown>) => PayBehaviour) | undefined
  /** The routing fee each payment costs (default 1000 msat); above the fee limit the payment fails. */
  routingFeeMsat: bigint
  /** Ends a hanging payment: succeeds (settling the invoice when it is this node's) or fails. */
  completePayment(hash: string, outcome: "succeed" | "fail"): void
  /** Creates an OPEN invoice (as AddInvoice would) and tells the open streams. */
  addInvoice(valueMsat: bigint, memo?: string): InvoiceRecord
  /** Settles an invoice: next settle_index, settle_date, amount paid; tells the open streams. */
  settle(invoice: InvoiceRecord, options?: { readonly amtPaidMsat?: bigint; readonly settleDate?: number }): void
  /** Moves an invoice to another non-settled state and tells the open streams. */
  setState(invoice: InvoiceRecord, state: "ACCEPTED" | "CANCELED"): void
  /** Writes raw bytes to every open stream. */
  sendRaw(text: string | Buffer): void
  /** Cuts every open stream's connection (no clean end). */
  dropStreams(): void
  /** Ends every open stream cleanly (the chunked body ends). */
  endStreams(): void
  openStreams(): number
  close(): Promise<void>
}

interface OpenStream {
  readonly subscription: Subscription
  readonly response: ServerResponse
  readonly socket: Socket
}

const readBody = (request: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    request.on("error", reject)
  })

const header = (request: IncomingMessage, name: string): string | undefined => {
  const value = request.headers[name]
  return Array.isArray(value) ? value.join(",") : value
}

export const startFakeLnd = async (options: {
  readonly tls?: { readonly key: string; readonly cert: string }
} = {}): Promise<FakeLnd> => {
  const streams = new Set<OpenStream>()
  const sockets = new Set<Socket>()
  let addIndex = 0
  let settleIndex = 0
  let paymentIndex = 0
  const nodeKey = new Uint8Array(32).fill(0)
  nodeKey.set(randomBytes(31), 1) // below the curve order, never zero
  nodeKey[0] = 1
  /** Open SendPaymentV2 and TrackPaymentV2 streams, by payment hash. */
  const paymentStreams = new Map<string, Set<ServerResponse>>()
  const sendPaymentUpdate = (payment: PaymentRecord) => {
    const line = JSON.stringify({ result: paymentJson(payment) }) + "\n"
    for (const response of paymentStreams.get(payment.hash) ?? []) {
      response.write(line)
      if (payment.status !== "IN_FLIGHT") response.end()
    }
    if (payment.status !== "IN_FLIGHT") paymentStreams.delete(payment.hash)
  }
  const openPaymentStream = (hash: string, response: ServerResponse) => {
    response.writeHead(200, { "Content-Type": "application/json" })
    const set = paymentStreams.get(hash) ?? new Set()
    set.add(response)
    paymentStreams.set(hash, set)
    response.on("close", () => set.delete(response))
  }
  const settleOwn = (payment: PaymentRecord): boolean => {
    const invoice = fake.invoices.find((i) => i.hash.toString("hex") === payment.hash)
    if (invoice === undefined || invoice.state === "SETTLED" || invoice.state === "CANCELED") return false
    const limitMsat = payment.body.fee_limit_msat !== undefined
      ? BigInt(String(payment.body.fee_limit_msat))
      : BigInt(String(payment.body.fee_limit_sat ?? "0")) * 1000n
    if (payment.feeMsat > limitMsat) return false
    fake.settle(invoice, { amtPaidMsat: payment.valueMsat })
    payment.preimage = invoice.preimage.toString("hex")
    return true
  }

  const write = (stream: OpenStream, data: string | Buffer) => {
    if (stream.subscription.closed) return
    if (!stream.response.headersSent) stream.response.setHeader("Content-Type", "application/json")
    stream.response.write(data)
  }
  const broadcast = (invoice: InvoiceRecord) => {
    const line = JSON.stringify({ result: invoiceJson(invoice) }) + "\n"
    for (const stream of streams) write(stream, line)
  }

  const fake: FakeLnd = {
    url: "",
    requests: [],
    addInvoiceCalls: [],
    subscriptions: [],
    invoices: [],
    addInvoiceReply: undefined,
    listReply: undefined,
    subscribeReply: undefined,
    publicKeyHex: Buffer.from(nodePublicKey(nodeKey)).toString("hex"),
    sendCalls: [],
    payments: [],
    payBehaviour: undefined,
    routingFeeMsat: 1000n,
    completePayment(hash, outcome) {
      const payment = fake.payments.find((p) => p.hash === hash && p.status === "IN_FLIGHT")
      if (payment === undefined) throw new Error(`no payment in flight to ${hash}`)
      if (outcome === "succeed" && settleOwn(payment)) {
        payment.status = "SUCCEEDED"
      } else {
        payment.status = "FAILED"
        payment.failureReason = "FAILURE_REASON_NO_ROUTE"
      }
      sendPaymentUpdate(payment)
    },
    addInvoice(valueMsat, memo = "") {
      const preimage = randomBytes(32)
      const hash = createHash("sha256").update(preimage).digest()
      const creationDate = Math.floor(Date.now() / 1000)
      const invoice: InvoiceRecord = {
        preimage,
        hash,
        valueMsat,
        memo,
        creationDate,
        addIndex: ++addIndex,
        paymentRequest: encodeInvoice({
          network: "bcrt",
          amountMsat: valueMsat,
          paymentHash: hash,
          paymentSecret: randomBytes(32),
          description: memo,
          expirySeconds: 3600,
          timestampSeconds: creationDate,
          privateKey: nodeKey
        }),
        state: "OPEN",
        settleIndex: 0,
        settleDate: 0,
        amtPaidMsat: 0n
      }
      fake.invoices.push(invoice)
      broadcast(invoice)
      return invoice
    },
    settle(invoice, settleOptions = {}) {
      invoice.state = "SETTLED"
      invoice.settleIndex = ++settleIndex
      invoice.settleDate = settleOptions.settleDate ?? Math.floor(Date.now() / 1000)
      invoice.amtPaidMsat = settleOptions.amtPaidMsat ?? invoice.valueMsat
      broadcast(invoice)
    },
    setState(invoice, state) {
      invoice.state = state
      broadcast(invoice)
    },
    sendRaw(data) {
      for (const stream of streams) write(stream, data)
    },
    dropStreams() {
      for (const stream of streams) {
        stream.subscription.closed = true
        stream.socket.destroy()
      }
      streams.clear()
    },
    endStreams() {
      for (const stream of streams) {
        stream.subscription.closed = true
        stream.response.end()
      }
      streams.clear()
    },
    openStreams: () => streams.size,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      })
  }

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? "/", "http://lnd")
    fake.requests.push(`${request.method} ${request.url}`)
    const macaroon = header(request, "grpc-metadata-macaroon")
    if (request.method === "POST" && url.pathname === "/v1/invoices") {
      const call: AddInvoiceCall = {
        method: request.method,
        path: request.url ?? "",
        macaroon,
        contentType: header(request, "content-type"),
        body: await readBody(request)
      }
      fake.addInvoiceCalls.push(call)
      const reply = fake.addInvoiceReply?.(call)
      if (reply === "hang") return
      if (reply === "destroy") {
        request.socket.destroy()
        return
      }
      if (reply !== undefined) {
        response.writeHead(reply.status, { "Content-Type": "application/json" }).end(reply.body)
        return
      }
      if (macaroon !== MACAROON_HEX) {
        response.writeHead(BAD_MACAROON.status, { "Content-Type": "application/json" }).end(BAD_MACAROON.body)
        return
      }
      const parsed = JSON.parse(call.body) as { value_msat: string; memo: string }
      const invoice = fake.addInvoice(BigInt(parsed.value_msat), parsed.memo)
      response.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({
        r_hash: invoice.hash.toString("base64"),
        payment_request: invoice.paymentRequest,
        add_index: String(invoice.addIndex),
        payment_addr: randomBytes(32).toString("base64")
      }))
      return
    }
    if (request.method === "GET" && url.pathname === "/v1/invoices") {
      const reply = fake.listReply?.(request.url ?? "") ??
        (macaroon === MACAROON_HEX ? undefined : BAD_MACAROON)
      if (reply !== undefined) {
        response.writeHead(reply.status, { "Content-Type": "application/json" }).end(reply.body)
        return
      }
      // ListInvoices: by add_index, forwards from index_offset (exclusive) unless reversed.
      const offset = Number(url.searchParams.get("index_offset") ?? "0")
      const max = Number(url.searchParams.get("num_max_invoices") ?? "100") || 100
      const reversed = url.searchParams.get("reversed") === "true"
      const pendingOnly = url.searchParams.get("pending_only") === "true"
      const candidates = fake.invoices
        .filter((invoice) => !pendingOnly || invoice.state === "OPEN" || invoice.state === "ACCEPTED")
        .filter((invoice) => reversed ? (offset === 0 || invoice.addIndex < offset) : invoice.addIndex > offset)
        .sort((a, b) => a.addIndex - b.addIndex)
      const page = reversed ? candidates.slice(-max) : candidates.slice(0, max)
      response.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({
        invoices: page.map(invoiceJson),
        last_index_offset: String(page.at(-1)?.addIndex ?? 0),
        first_index_offset: String(page[0]?.addIndex ?? 0)
      }))
      return
    }
    if (request.method === "GET" && url.pathname === "/v1/invoices/subscribe") {
      const subscription: Subscription = { settleIndex: url.searchParams.get("settle_index"), macaroon, closed: false }
      fake.subscriptions.push(subscription)
      const reply = fake.subscribeReply?.(subscription) ??
        (macaroon === MACAROON_HEX ? "stream" : BAD_MACAROON)
      if (reply !== "stream") {
        subscription.closed = true
        response.writeHead(reply.status, { "Content-Type": "application/json" }).end(reply.body)
        return
      }
      const stream: OpenStream = { subscription, response, socket: request.socket }
      streams.add(stream)
      response.on("close", () => {
        subscription.closed = true
        streams.delete(stream)
      })
      // LND replays the settlements after the index asked for (0 asks for none).
      const after = Number(subscription.settleIndex ?? "0")
      if (after > 0) {
        const replay = fake.invoices
          .filter((invoice) => invoice.state === "SETTLED" && invoice.settleIndex > after)
          .sort((a, b) => a.settleIndex - b.settleIndex)
        for (const invoice of replay) write(stream, JSON.stringify({ result: invoiceJson(invoice) }) + "\n")
      }
      return
    }
    if (request.method === "POST" && url.pathname === "/v2/router/send") {
      const body = JSON.parse(await readBody(request)) as Record<string, unknown>
      fake.sendCalls.push(body)
      if (macaroon !== MACAROON_HEX) {
        response.writeHead(BAD_MACAROON.status, { "Content-Type": "application/json" }).end(BAD_MACAROON.body)
        return
      }
      const behaviour = fake.payBehaviour?.(body) ?? "pay"
      if (typeof behaviour === "object") {
        response.writeHead(behaviour.status, { "Content-Type": "application/json" }).end(behaviour.body)
        return
      }
      let decoded: ReturnType<typeof bolt11.decode>
      try {
        decoded = bolt11.decode(String(body.payment_request))
      } catch (error) {
        response.writeHead(500, { "Content-Type": "application/json" })
          .end(lndStreamError(2, `invalid payment request: ${(error as Error).message}`))
        return
      }
      const hash = String(decoded.tags.find((t) => t.tagName === "payment_hash")?.data ?? "")
      const existing = fake.payments.find((p) => p.hash === hash && p.status !== "FAILED")
      if (existing !== undefined) {
        const message = existing.status === "SUCCEEDED" ? "invoice is already paid" : "payment is in transition"
        response.writeHead(409, { "Content-Type": "application/json" }).end(lndStreamError(6, message))
        return
      }
      const payment: PaymentRecord = {
        hash,
        paymentRequest: String(body.payment_request),
        valueMsat: BigInt(decoded.millisatoshis ?? "0"),
        body,
        status: "IN_FLIGHT",
        preimage: "",
        feeMsat: fake.routingFeeMsat,
        failureReason: "FAILURE_REASON_NONE",
        creationDate: Math.floor(Date.now() / 1000),
        index: ++paymentIndex
      }
      fake.payments.push(payment)
      openPaymentStream(hash, response)
      sendPaymentUpdate(payment)
      if (behaviour === "hang") return
      if (behaviour === "destroy") {
        request.socket.destroy()
        return
      }
      if (behaviour === "pay" && settleOwn(payment)) {
        payment.status = "SUCCEEDED"
      } else {
        payment.status = "FAILED"
        payment.failureReason = "FAILURE_REASON_NO_ROUTE"
      }
      sendPaymentUpdate(payment)
      return
    }
    const track = /^\/v2\/router\/track\/([A-Za-z0-9_-]+=*)$/.exec(url.pathname)
    if (request.method === "GET" && track !== null) {
      if (macaroon !== MACAROON_HEX) {
        response.writeHead(BAD_MACAROON.status, { "Content-Type": "application/json" }).end(BAD_MACAROON.body)
        return
      }
      const hash = Buffer.from(track[1]!, "base64url").toString("hex")
      const payment = fake.payments.filter((p) => p.hash === hash).at(-1)
      if (payment === undefined) {
        response.writeHead(404, { "Content-Type": "application/json" }).end(lndStreamError(5, "payment isn't initiated"))
        return
      }
      openPaymentStream(hash, response)
      response.write(JSON.stringify({ result: paymentJson(payment) }) + "\n")
      if (payment.status !== "IN_FLIGHT") {
        paymentStreams.get(hash)?.delete(response)
        response.end()
      }
      return
    }
    response.writeHead(404, { "Content-Type": "application/json" }).end(lndError(5, "Not Found"))
  }

  const listener = (request: IncomingMessage, response: ServerResponse) => {
    handle(request, response).catch((error) => {
      response.destroy(error instanceof Error ? error : new Error(String(error)))
    })
  }
  const server: Server = options.tls === undefined
    ? createHttpServer(listener)
    : createHttpsServer({ key: options.tls.key, cert: options.tls.cert }, listener)
  server.on("connection", (socket: Socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
  })
  server.on("secureConnection", (socket: Socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const { port } = server.address() as AddressInfo
  fake.url = `${options.tls === undefined ? "http" : "https"}://127.0.0.1:${port}`
  return fake
}
