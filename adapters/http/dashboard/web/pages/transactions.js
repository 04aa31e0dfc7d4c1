// Transactions: the API's filters (type, agent, start and end date) as
// labelled controls kept in the address (#/transactions?type=charge&...),
// pages of the API's size, a CSV download of everything the filters match,
// and a link from each row to its receipt.
import { html, api, useApi, useState, useEffect, navigate, formatUsdCents, formatSats, formatTime, ErrorNote } from "../lib.js"

const FILTERS = ["type", "agentId", "startDate", "endDate"]
const PAGE_SIZES = ["25", "50", "100"]

const queryString = (values) => {
  const params = new URLSearchParams()
  for (const [key, value] of Object.entries(values)) if (value !== undefined && value !== null && value !== "") params.set(key, String(value))
  const text = params.toString()
  return text ? `?${text}` : ""
}

export default function Transactions({ session, query }) {
  const isOwner = session.role === "owner"
  const limit = PAGE_SIZES.includes(query.limit) ? Number(query.limit) : 50
  const offset = Math.max(0, Number.parseInt(query.offset ?? "0", 10) || 0)
  const filters = Object.fromEntries(FILTERS.map((key) => [key, query[key] ?? ""]))
  const [form, setForm] = useState(filters)
  useEffect(() => setForm(filters), [FILTERS.map((key) => filters[key]).join("|")])

  const agents = useApi(() => (isOwner ? api("/v1/agents", { query: { limit: 100 } }) : Promise.resolve(null)), [isOwner])
  const list = useApi(
    () => api("/v1/wallet/transactions", { query: { ...filters, limit, offset } }),
    [...FILTERS.map((key) => filters[key]), limit, offset]
  )
  const names = new Map((agents.data?.agents ?? []).map((agent) => [agent.id, agent.name]))

  const apply = (event) => {
    event.preventDefault()
    navigate(`/transactions${queryString({ ...form, limit: limit === 50 ? "" : limit })}`)
  }
  const clear = () => navigate("/transactions")
  const goTo = (nextOffset) => navigate(`/transactions${queryString({ ...filters, limit: limit === 50 ? "" : limit, offset: nextOffset || "" })}`)
  const setField = (key) => (event) => setForm({ ...form, [key]: event.currentTarget.value })

  const csvHref = `/v1/wallet/transactions.csv${queryString(filters)}`
  const total = list.data?.total ?? 0
  const rows = list.data?.transactions ?? []

  return html`
    <h1>Transactions</h1>
    <form class="card filters" onSubmit=${apply} aria-label="Filter transactions">
      <div class="filter-grid">
        <div>
          <label for="f-type">Type</label>
          <select id="f-type" value=${form.type} onChange=${setField("type")}>
            <option value="">All types</option>
            <option value="charge">Charge</option>
            <option value="credit">Credit</option>
            <option value="refund">Refund</option>
          </select>
        </div>
        ${isOwner && html`
          <div>
            <label for="f-agent">Agent</label>
            <select id="f-agent" value=${form.agentId} onChange=${setField("agentId")}>
              <option value="">All agents</option>
              ${(agents.data?.agents ?? []).map((agent) => html`<option value=${agent.id}>${agent.name} (${agent.id})</option>`)}
            </select>
          </div>`}
        <div>
          <label for="f-start">From (UTC day)</label>
          <input id="f-start" type="date" value=${form.startDate} onInput=${setField("startDate")} />
        </div>
        <div>
          <label for="f-end">To (UTC day, included)</label>
          <input id="f-end" type="date" value=${form.endDate} onInput=${setField("endDate")} />
        </div>
      </div>
      <div class="row filter-actions">
        <button type="submit">Apply filters</button>
        <button type="button" class="secondary" onClick=${clear}>Clear</button>
        <a class="button-link" href=${csvHref} download data-testid="csv-download">Download CSV</a>
      </div>
    </form>

    <${ErrorNote} error=${list.error} />
    <p class="muted" aria-live="polite" data-testid="tx-count">
      ${list.loading ? "Loading…" : total === 0 ? "No transactions match." : `Showing ${offset + 1}–${offset + rows.length} of ${total}`}
    </p>
    ${rows.length > 0 && html`
      <div class="table-wrap card">
        <table class="tx" data-testid="tx-table">
          <caption class="visually-hidden">Transactions, newest first</caption>
          <thead>
            <tr><th scope="col">When</th><th scope="col">Type</th><th scope="col">Amount</th><th scope="col">Sats</th>
              <th scope="col">Agent</th><th scope="col">Capability</th><th scope="col">Provider</th><th scope="col">Description</th><th scope="col">Receipt</th></tr>
          </thead>
          <tbody>
            ${rows.map((t) => html`
              <tr data-type=${t.type}>
                <td data-label="When">${formatTime(t.createdAt)}</td>
                <td data-label="Type"><span class=${"badge type-" + t.type}>${t.type}</span></td>
                <td data-label="Amount" class="num">${t.type === "charge" ? "−" : "+"}${formatUsdCents(t.amountUsdCents)}</td>
                <td data-label="Sats" class="num">${formatSats(t.amountSats)}</td>
                <td data-label="Agent">${t.agentId ? names.get(t.agentId) ?? html`<code>${t.agentId}</code>` : "—"}</td>
                <td data-label="Capability">${t.capability ?? "—"}</td>
                <td data-label="Provider">${t.provider ?? "—"}</td>
                <td data-label="Description">${t.description}</td>
                <td data-label="Receipt"><a href=${`#/receipts/${encodeURIComponent(t.auditId)}`} aria-label=${`Receipt of ${t.type} ${t.id}`}>Receipt</a></td>
              </tr>`)}
          </tbody>
        </table>
      </div>`}
    <nav class="pager row" aria-label="Pages">
      <button type="button" class="secondary" disabled=${offset === 0} onClick=${() => goTo(Math.max(0, offset - limit))}>Previous page</button>
      <button type="button" class="secondary" disabled=${offset + limit >= total} onClick=${() => goTo(offset + limit)}>Next page</button>
      <label class="inline" for="f-limit">Per page</label>
      <select id="f-limit" class="narrow" value=${String(limit)}
        onChange=${(event) => navigate(`/transactions${queryString({ ...filters, limit: event.currentTarget.value === "50" ? "" : event.currentTarget.value })}`)}>
        ${PAGE_SIZES.map((size) => html`<option value=${size}>${size}</option>`)}
      </select>
    </nav>`
}
