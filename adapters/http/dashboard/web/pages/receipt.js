// A receipt: one audit record (GET /v1/audit/:auditId) with its hash, the
// hash of the record before it, and whether its chain link verifies. The
// server checks the record's own hash and its link to the record before it
// (`verified`); this page also recomputes the record's SHA-256 with Web
// Crypto from the same canonical text the server hashes
// (src/audit/chain.ts), so the browser does not have to take the hash on trust.
import { html, api, useApi, useState, useEffect, formatUsdCents, formatSats, formatTime, ErrorNote } from "../lib.js"

/** A decimal JSON number (cents with up to 4 decimals, sats with up to 3) as an integer string of the smaller unit. */
export const scaledInteger = (value, decimals) => {
  const text = typeof value === "number" ? value.toFixed(decimals) : String(value)
  const negative = text.startsWith("-")
  const [whole, fraction = ""] = text.replace(/^-/, "").split(".")
  const digits = (whole + fraction.padEnd(decimals, "0").slice(0, decimals)).replace(/^0+(?=\d)/, "")
  return negative && /[1-9]/.test(digits) ? `-${digits}` : digits
}

/** The text the audit hash covers, rebuilt from the API's record and the account id. */
export const canonicalAuditText = (record, accountId) =>
  JSON.stringify([
    "spendgate-audit-v1",
    record.id,
    accountId,
    String(record.seq),
    record.kind,
    record.agentId,
    record.reservationId,
    record.transactionId,
    scaledInteger(record.amountUsdCents, 4),
    scaledInteger(record.pocketChange.usdCents, 4),
    scaledInteger(record.pocketChange.sats, 3),
    typeof record.details === "string" ? record.details : JSON.stringify(record.details),
    record.createdAt,
    record.prevHash
  ])

const sha256Hex = async (text) => {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text))
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("")
}

const KIND_NAMES = {
  reserve: "Hold (reserve)",
  settle: "Charge (settle)",
  release: "Hold released",
  credit: "Credit (funding)",
  refund: "Refund"
}

export default function Receipt({ params }) {
  const receipt = useApi(() => Promise.all([api(`/v1/audit/${encodeURIComponent(params.id)}`), api("/v1/wallet")]), [params.id])
  const [local, setLocal] = useState({ state: "pending" })
  const record = receipt.data?.[0]
  const accountId = receipt.data?.[1]?.accountId

  useEffect(() => {
    if (!record || !accountId) return
    if (!globalThis.crypto?.subtle) {
      setLocal({ state: "unavailable" })
      return
    }
    let live = true
    sha256Hex(canonicalAuditText(record, accountId)).then(
      (hash) => live && setLocal({ state: hash === record.hash ? "match" : "mismatch", hash }),
      () => live && setLocal({ state: "unavailable" })
    )
    return () => { live = false }
  }, [record?.id, accountId])

  const transactionId = record?.transactionId
  const transaction = useApi(
    () => (transactionId ? api(`/v1/wallet/transactions/${encodeURIComponent(transactionId)}`) : Promise.resolve(null)),
    [transactionId]
  )
  const t = transaction.data
  const details = record && typeof record.details === "object" && record.details !== null ? record.details : {}
  return html`
    <p><a href="#/transactions">← Transactions</a></p>
    <h1>Receipt</h1>
    <${ErrorNote} error=${receipt.error} />
    ${receipt.loading && !record ? html`<p class="loading">Loading…</p>` : null}
    ${record && html`
      <div class="card verdict" data-testid="chain-verdict">
        ${record.verified
          ? html`<p class="ok big"><span aria-hidden="true">✔</span> Link verifies: this record's hash matches its content and its previous hash matches the record before it in the account's chain.</p>`
          : html`<p class="error big"><span aria-hidden="true">✘</span> Link does not verify: the record or the one before it has been changed.</p>`}
        <p data-testid="local-verdict" class=${local.state === "match" ? "ok" : local.state === "mismatch" ? "error" : "muted"}>
          ${local.state === "match" ? "Hash recomputed in this browser (SHA-256, Web Crypto): matches."
            : local.state === "mismatch" ? "Hash recomputed in this browser (SHA-256, Web Crypto): does not match the stored hash."
            : local.state === "unavailable" ? "This browser cannot recompute the hash (Web Crypto needs a secure context)."
            : "Recomputing the hash…"}
        </p>
      </div>
      ${t && html`
        <div class="card" data-testid="receipt-transaction">
          <h2>Transaction</h2>
          <dl class="facts">
            <dt>Type</dt><dd><span class=${"badge type-" + t.type}>${t.type}</span></dd>
            <dt>Description</dt><dd>${t.description}</dd>
            <dt>Amount</dt><dd>${formatUsdCents(t.amountUsdCents)} <span class="muted">(${formatSats(t.amountSats)})</span></dd>
            <dt>${t.type === "charge" ? "Paid from" : "Added to"}</dt><dd>USD pocket ${formatUsdCents(t.pockets.usdCents)}, sats pocket ${formatSats(t.pockets.sats)}</dd>
            ${t.btcUsdRate !== null ? html`<dt>BTC/USD rate</dt><dd>${t.btcUsdRate.toLocaleString("en-US", { style: "currency", currency: "USD" })}</dd>` : null}
            ${t.refundOf ? html`<dt>Refund of</dt><dd><code>${t.refundOf}</code></dd>` : null}
            <dt>Id</dt><dd><code>${t.id}</code></dd>
          </dl>
        </div>`}
      <${ErrorNote} error=${transaction.error} />
      <div class="card">
        <h2>Audit record: ${KIND_NAMES[record.kind] ?? record.kind}</h2>
        <dl class="facts">
          <dt>Amount</dt><dd>${formatUsdCents(record.amountUsdCents)}</dd>
          <dt>USD pocket change</dt><dd>${formatUsdCents(record.pocketChange.usdCents)}</dd>
          <dt>Sats pocket change</dt><dd>${formatSats(record.pocketChange.sats)}</dd>
          ${details.capability ? html`<dt>Capability</dt><dd>${details.capability}</dd>` : null}
          ${details.provider ? html`<dt>Provider</dt><dd>${details.provider}</dd>` : null}
          ${details.reason ? html`<dt>Reason</dt><dd>${details.reason}</dd>` : null}
          ${details.refundOf ? html`<dt>Refund of</dt><dd><code>${details.refundOf}</code></dd>` : null}
          <dt>When</dt><dd>${formatTime(record.createdAt)} <span class="muted">(${record.createdAt})</span></dd>
          <dt>Agent</dt><dd>${record.agentId ? html`<code>${record.agentId}</code>` : "—"}</dd>
          <dt>Transaction</dt><dd>${record.transactionId ? html`<code>${record.transactionId}</code>` : "—"}</dd>
          <dt>Reservation</dt><dd>${record.reservationId ? html`<code>${record.reservationId}</code>` : "—"}</dd>
          <dt>Audit record</dt><dd><code>${record.id}</code>, number ${record.seq} in the account's chain</dd>
        </dl>
        ${record.kind === "settle" ? html`<p class="muted small">A pocket change here is what the call's hold gave back beyond the charge (the hold itself is the reservation's own record).</p>` : null}
      </div>
      <div class="card">
        <h2>Hash chain</h2>
        <dl class="facts">
          <dt>Hash</dt><dd><code data-testid="hash">${record.hash}</code></dd>
          <dt>Previous hash</dt><dd><code data-testid="prev-hash">${record.prevHash}</code></dd>
          ${local.hash && local.state === "mismatch" ? html`<dt>Recomputed</dt><dd><code>${local.hash}</code></dd>` : null}
        </dl>
        <p class="muted small">Each record's hash covers its fields and the previous record's hash, so changing any earlier record breaks every link after it.
          The CLI checks a receipt or the whole chain with <code>spendgate receipt verify</code>.</p>
      </div>`}`
}
