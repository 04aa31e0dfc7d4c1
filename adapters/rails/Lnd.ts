/**
 * The Lightning rail over an LND node's REST interface; its parts are in
 * lnd/: the REST client (client.ts), invoice creation (invoices.ts), the
 * subscription and catch-up (subscriber.ts), reading LND's JSON (wire.ts) and
 * its stream's lines (lines.ts). LND's REST interface is the grpc-gateway
 * proxy in front of lnd's gRPC API.
 *
 * Funding: `createInvoice` is `POST /v1/invoices` (AddInvoice). Payment:
 * `subscriber` follows `GET /v1/invoices/subscribe` (SubscribeInvoices) for
 * the life of its layer and hands every settlement to the `PaymentSink`.
 *
 * Wire format (grpc-gateway, protobuf field names): int64/uint64 fields are
 * JSON strings, `bytes` fields are base64, enums are their names. A streaming
 * answer is newline-delimited JSON, one `{"result": Invoice}` per update, or
 * `{"error": {...}}` just before the server ends the stream. The gateway
 * writes the HTTP status and headers together with the first message, so a
 * quiet node may leave a subscription without a response for a long time;
 * that is normal and is not treated as a failure.
 *
 * Resuming: LND replays every settlement whose `settle_index` is greater than
 * the one asked for. The subscriber saves an invoice's `settle_index` only
 * after the sink has recorded it, so after a crash or a dropped connection
 * the worst case is a notice delivered twice (harmless: recording is
 * idempotent), never a lost one. A `settle_index` of 0 means "no replay"
 * to LND, so while no cursor has been saved yet the subscriber first catches
 * up with `GET /v1/invoices` (ListInvoices, forwards by `add_index`, in pages):
 * every settled invoice found is delivered, the highest `settle_index` is
 * saved once all of them are recorded, and the subscription starts from it,
 * so LND replays whatever settled between the listing and the subscription.
 * The one gap left: on a node that has never settled any invoice, a payment
 * settled in the moment between that (empty) listing and the subscription.
 */

export {
  DEFAULT_REQUEST_TIMEOUT_MS,
  LIST_PAGE_SIZE,
  LIST_PAGE_TIMEOUT_MS,
  type LndConfig,
  MAX_LIST_PAGE_BYTES,
  MAX_RESPONSE_BYTES,
  MAX_STREAM_LINE_BYTES,
  RECONNECT_FIRST_DELAY_MS,
  RECONNECT_MAX_DELAY_MS,
  RECONNECT_STABLE_AFTER_MS
} from "./lnd/client.ts"
export { layer, make } from "./lnd/invoices.ts"
export { RAIL_NAME } from "./lnd/messages.ts"
export { subscriber } from "./lnd/subscriber.ts"
