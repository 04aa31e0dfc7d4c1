import {
  html, useState, useEffect, useApi, api, ErrorNote, CopyButton, WalletSummary, formatSats, formatUsdCents, formatTime,
  dollarsInputToCents
} from "../lib.js"

const POLL_MS = 1500

/** A Lightning invoice: its QR code (drawn by the server), the BOLT11 text, and its status until paid or expired. */
function LightningInvoice({ invoice, onSettled }) {
  const [status, setStatus] = useState("pending")
  const [error, setError] = useState(null)
  useEffect(() => {
    let live = true
    let timer
    const poll = async () => {
      try {
        const list = await api("/v1/wallet/invoices", { query: { limit: 100 } })
        const found = list.invoices.find((i) => i.id === invoice.invoiceId)
        const next = found ? found.status : "pending"
        if (!live) return
        setError(null)
        setStatus(next)
        if (next !== "pending") { onSettled(next); return }
      } catch (e) {
        if (!live) return
        setError(e)
      }
      if (live && Date.now() < Date.parse(invoice.expiresAt) + 60_000) timer = setTimeout(poll, POLL_MS)
    }
    timer = setTimeout(poll, POLL_MS)
    return () => { live = false; clearTimeout(timer) }
  }, [invoice.invoiceId])

  const qr = `/session/qr.svg?text=${encodeURIComponent(invoice.paymentRequest.toUpperCase())}`
  return html`<section class="card" aria-labelledby="invoice-title" data-testid="lightning-invoice">
    <h2 id="invoice-title">Invoice for ${formatSats(invoice.amountSats)}</h2>
    <div class="grid">
      <div><img class="qr" src=${qr} width="240" height="240"
        alt=${`QR code of the Lightning invoice for ${formatSats(invoice.amountSats)}; the same text is below`} /></div>
      <div>
        <p>Status: <strong class=${`status-${status}`} role="status" aria-live="polite" data-testid="invoice-status">${
          status === "pending" ? "Waiting for payment…" : status === "paid" ? "Paid: the sats pocket is credited" : status === "expired" ? "Expired: create a new invoice" : "Refused: contact the operator"
        }</strong></p>
        <p class="muted small">Expires ${formatTime(invoice.expiresAt)}. Pay it from any Lightning wallet.</p>
        <label for="bolt11">Payment request (BOLT11)</label>
        <textarea id="bolt11" class="bolt11" readonly data-testid="bolt11">${invoice.paymentRequest}</textarea>
        <p><${CopyButton} text=${invoice.paymentRequest} label="Copy invoice" /></p>
        <${ErrorNote} error=${error} />
      </div>
    </div>
  </section>`
}

function LightningForm({ onCreated }) {
  const [amount, setAmount] = useState("10000")
  const [error, setError] = useState(null)
  const [busy, setBusy] = useState(false)
  const submit = async (event) => {
    event.preventDefault()
    setBusy(true)
    try {
      onCreated(await api("/v1/wallet/fund", { method: "POST", body: { amountSats: Number(amount) } }))
      setError(null)
    } catch (e) {
      setError(e)
    } finally {
      setBusy(false)
    }
  }
  return html`<form class="card" onSubmit=${submit} aria-labelledby="ln-title">
    <h2 id="ln-title">Lightning</h2>
    <p class="muted small">Credits the sats pocket once the invoice is paid.</p>
    <div class="row">
      <div><label for="fund-sats">Amount (sats)</label>
        <input id="fund-sats" type="number" min="1" step="1" inputmode="numeric" required value=${amount}
          onInput=${(e) => setAmount(e.currentTarget.value)} /></div>
      <div><button type="submit" disabled=${busy}>Create invoice</button></div>
    </div>
    <${ErrorNote} error=${error} />
  </form>`
}

function CardForm({ onCreated }) {
  const [amount, setAmount] = useState("25")
  const [error, setError] = useState(null)
  const [checkout, setCheckout] = useState(null)
  const submit = async (event) => {
    event.preventDefault()
    const cents = dollarsInputToCents(amount)
    if (cents === undefined) { setError(new Error("Enter an amount in USD")); return }
    try {
      const created = await api("/v1/wallet/fund-card", { method: "POST", body: { amountUsdCents: cents } })
      setError(null)
      setCheckout(created)
      onCreated()
    } catch (e) {
      setError(e)
    }
  }
  return html`<form class="card" onSubmit=${submit} aria-labelledby="card-title">
    <h2 id="card-title">Card</h2>
    <p class="muted small">Credits the USD pocket after checkout; at least $10.</p>
    <div class="row">
      <div><label for="fund-usd">Amount (USD)</label>
        <input id="fund-usd" type="number" min="10" step="0.01" inputmode="decimal" required value=${amount}
          onInput=${(e) => setAmount(e.currentTarget.value)} /></div>
      <div><button type="submit">Start card checkout</button></div>
    </div>
    <${ErrorNote} error=${error} />
    ${checkout && html`<p data-testid="checkout">Checkout for ${formatUsdCents(checkout.amountUsdCents)} is ready:${" "}
      <a href=${checkout.checkoutUrl} target="_blank" rel="noopener noreferrer">Open the checkout page</a>${" "}
      <span class="muted small">(expires ${formatTime(checkout.expiresAt)})</span></p>`}
  </form>`
}

function InvoiceList({ tick }) {
  const { data, error } = useApi(() => api("/v1/wallet/invoices", { query: { limit: 20 } }), [tick])
  return html`<section class="card" aria-labelledby="invoices-title">
    <h2 id="invoices-title">Invoices ${data ? html`<span class="muted">(${data.total})</span>` : null}</h2>
    <${ErrorNote} error=${error} />
    ${data && data.invoices.length === 0 ? html`<p class="muted">No invoices yet.</p>` : null}
    ${data && data.invoices.length > 0 && html`<div class="table-wrap"><table data-testid="invoice-list">
      <thead><tr><th scope="col">Created</th><th scope="col">Type</th><th scope="col">Amount</th><th scope="col">Status</th>
        <th scope="col" class="hide-narrow">Paid</th></tr></thead>
      <tbody>${data.invoices.map((invoice) => html`<tr key=${invoice.id}>
        <td>${formatTime(invoice.createdAt)}<br /><code class="muted small">${invoice.id}</code></td>
        <td>${invoice.type === "lightning" ? "Lightning" : "Card"}</td>
        <td>${invoice.type === "lightning" ? formatSats(invoice.amountSats) : formatUsdCents(invoice.amountUsdCents)}</td>
        <td class=${`status-${invoice.status}`}>${invoice.status}</td>
        <td class="hide-narrow">${formatTime(invoice.paidAt)}</td>
      </tr>`)}</tbody>
    </table></div>`}
  </section>`
}

/** Funding: the wallet's pockets, a Lightning invoice with live status, card checkout, and the invoices. */
export default function FundingPage() {
  const wallet = useApi(() => api("/v1/wallet"))
  const [invoice, setInvoice] = useState(null)
  const [tick, setTick] = useState(0)
  const refresh = () => { wallet.reload(); setTick((n) => n + 1) }
  return html`
    <h1>Funding</h1>
    <section class="card" aria-labelledby="wallet-title">
      <h2 id="wallet-title">Wallet</h2>
      <${ErrorNote} error=${wallet.error} />
      <${WalletSummary} wallet=${wallet.data} />
      <p class="muted small">Calls are priced in USD: the USD pocket pays first, the sats pocket the rest at the BTC/USD rate of the quote.</p>
    </section>
    <div class="grid">
      <${LightningForm} onCreated=${(created) => { setInvoice(created); setTick((n) => n + 1) }} />
      <${CardForm} onCreated=${() => setTick((n) => n + 1)} />
    </div>
    ${invoice && html`<${LightningInvoice} key=${invoice.invoiceId} invoice=${invoice} onSettled=${refresh} />`}
    <${InvoiceList} tick=${tick} />`
}
