import { createHash, randomBytes } from "node:crypto"
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { createServer as createHttpsServer } from "node:https"
import type { AddressInfo, Socket } from "node:net"

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
    addInvoice(valueMsat, memo = "") {
      const preimage = randomBytes(32)
      const invoice: InvoiceRecord = {
        preimage,
        hash: createHash("sha256").update(preimage).digest(),
        valueMsat,
        memo,
        creationDate: Math.floor(Date.now() / 1000),
        addIndex: ++addIndex,
        paymentRequest: `lnbcrt${valueMsat / 1000n}n1p${randomBytes(20).toString("hex")}`,
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
