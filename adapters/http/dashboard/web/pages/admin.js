// The operator's area (an ADMIN_TOKEN session): statistics with charts,
// provider health, late payments, registry review and the BTC/USD rate,
// each from its /v1/admin/* endpoint. Sections are addressed as
// #/admin/<section>.
import { html, api, useApi, useState, navigate, formatUsdCents, formatSats, formatTime, ErrorNote, errorText, ConfirmDialog } from "../lib.js"
import { BarChart, DayChart } from "../charts.js"

const SECTIONS = [
  ["stats", "Statistics"],
  ["health", "Service health"],
  ["late", "Late payments"],
  ["registry", "Registry review"],
  ["rate", "Rate"]
]

const DAY_OPTIONS = ["7", "30", "90"]
const MS_PER_DAY = 86_400_000

/** Sums rows into groups by `key`, largest amount first. */
const groupBy = (rows, key) => {
  const groups = new Map()
  for (const row of rows) {
    const name = row[key]
    const group = groups.get(name) ?? { label: name, value: 0, calls: 0 }
    group.value += row.amountUsdCents
    group.calls += row.calls
    groups.set(name, group)
  }
  return [...groups.values()].sort((a, b) => b.value - a.value || b.calls - a.calls)
    .map((group) => ({ ...group, text: formatUsdCents(group.value) }))
}

/** Every UTC day of the stats window, oldest first, with the rows' sums (days without rows are zeros). */
const perDay = (from, until, rows, value) => {
  const sums = new Map()
  for (const row of rows) sums.set(row.day, (sums.get(row.day) ?? 0) + value(row))
  const days = []
  for (let at = Date.parse(from); at < Date.parse(until); at += MS_PER_DAY) {
    const day = new Date(at).toISOString().slice(0, 10)
    days.push({ label: day, value: sums.get(day) ?? 0 })
  }
  return days
}

const callsExtra = { heading: "Calls", text: (row) => String(row.calls) }

function Stats({ query }) {
  const days = DAY_OPTIONS.includes(query.days) ? query.days : "30"
  const stats = useApi(() => api("/v1/admin/stats", { query: { days } }), [days])
  const data = stats.data
  const spendDays = data ? perDay(data.from, data.until, data.spend, (row) => row.amountUsdCents).map((row) => ({ ...row, text: formatUsdCents(row.value) })) : []
  const fundingDays = data
    ? perDay(data.from, data.until, data.funding, (row) => row.credits).map((row) => ({ ...row, text: `${row.value} ${row.value === 1 ? "credit" : "credits"}` }))
    : []
  const totalSpend = data ? data.spend.reduce((sum, row) => sum + row.amountUsdCents, 0) : 0
  const totalCalls = data ? data.spend.reduce((sum, row) => sum + row.calls, 0) : 0
  return html`
    <div class="row toolbar">
      <label class="inline" for="stats-days">Period</label>
      <select id="stats-days" class="narrow" value=${days} onChange=${(event) => navigate(`/admin/stats?days=${event.currentTarget.value}`)}>
        ${DAY_OPTIONS.map((value) => html`<option value=${value}>Last ${value} days</option>`)}
      </select>
    </div>
    <${ErrorNote} error=${stats.error} />
    ${data && html`
      <div class="grid stats">
        <div class="card stat" data-testid="stat-accounts"><span class="stat-label">Accounts</span><span class="stat-value">${data.accounts}</span></div>
        <div class="card stat" data-testid="stat-agents"><span class="stat-label">Agents</span><span class="stat-value">${data.agents.total}</span>
          <span class="muted small">${data.agents.owners} ${data.agents.owners === 1 ? "owner" : "owners"}, ${data.agents.killed} killed</span></div>
        <div class="card stat"><span class="stat-label">Balances held</span><span class="stat-value">${formatUsdCents(data.balances.usdCents)}</span>
          <span class="muted small">and ${formatSats(data.balances.sats)}</span></div>
        <div class="card stat" data-testid="stat-spend"><span class="stat-label">Spend, last ${days} days</span><span class="stat-value">${formatUsdCents(totalSpend)}</span>
          <span class="muted small">${totalCalls} calls</span></div>
      </div>
      <div class="charts">
        <div class="card"><${DayChart} title="Spend per day (all accounts)" rows=${spendDays} testId="admin-chart-days" /></div>
        <div class="card"><${BarChart} title="Spend by capability" labelHeading="Capability" rows=${groupBy(data.spend, "capability")} extra=${callsExtra} testId="admin-chart-capabilities" empty="No spend in this period." /></div>
        <div class="card"><${BarChart} title="Spend by provider" labelHeading="Provider" rows=${groupBy(data.spend, "provider")} extra=${callsExtra} testId="admin-chart-providers" empty="No spend in this period." /></div>
        <div class="card"><${DayChart} title="Fundings credited per day (card and Lightning)" rows=${fundingDays} valueHeading="Credits" testId="admin-chart-funding" /></div>
      </div>`}`
}

function Health() {
  const health = useApi(() => api("/v1/admin/service-health"), [])
  const providers = health.data?.providers ?? []
  return html`
    <${ErrorNote} error=${health.error} />
    <div class="row toolbar"><button type="button" class="secondary" onClick=${health.reload}>Refresh</button></div>
    ${health.data && providers.length === 0 ? html`<p class="muted">No providers are configured.</p>` : null}
    ${providers.length > 0 && html`
      <div class="table-wrap card">
        <table data-testid="health-table">
          <caption class="visually-hidden">Providers and their health</caption>
          <thead><tr><th scope="col">Provider</th><th scope="col">Capability</th><th scope="col">Status</th><th scope="col">Circuit</th>
            <th scope="col">Calls</th><th scope="col">Success</th><th scope="col">p50 / p95</th><th scope="col">Last error</th></tr></thead>
          <tbody>
            ${providers.map((p) => html`
              <tr>
                <th scope="row">${p.name}</th>
                <td>${p.capability}</td>
                <td><span class=${"badge status-" + p.status}>${p.status}</span>${p.reason ? html`<br /><span class="muted small">${p.reason}</span>` : null}</td>
                <td>${p.circuit}</td>
                <td class="num">${p.calls}</td>
                <td class="num">${p.successRate === null ? "—" : `${Math.round(p.successRate * 1000) / 10}%`}</td>
                <td class="num">${p.p50LatencyMs === null ? "—" : `${p.p50LatencyMs} / ${p.p95LatencyMs} ms`}</td>
                <td>${p.lastError ? html`${p.lastError}<br /><span class="muted small">${formatTime(p.lastErrorAt)}</span>` : "—"}</td>
              </tr>`)}
          </tbody>
        </table>
      </div>`}`
}

function LatePayments({ query }) {
  const offset = Math.max(0, Number.parseInt(query.offset ?? "0", 10) || 0)
  const late = useApi(() => api("/v1/admin/late-payments", { query: { limit: 50, offset } }), [offset])
  const invoices = late.data?.invoices ?? []
  const total = late.data?.total ?? 0
  return html`
    <p class="muted">Payments that arrived after their invoice expired (or would have overfilled a wallet): recorded, not credited. Settle them with the payer.</p>
    <${ErrorNote} error=${late.error} />
    ${late.data && invoices.length === 0 ? html`<p data-testid="late-empty">No late payments.</p>` : null}
    ${invoices.length > 0 && html`
      <div class="table-wrap card">
        <table data-testid="late-table">
          <caption class="visually-hidden">Late payments</caption>
          <thead><tr><th scope="col">Invoice</th><th scope="col">Account</th><th scope="col">Type</th><th scope="col">Invoice amount</th><th scope="col">Paid</th><th scope="col">Status</th><th scope="col">Created</th></tr></thead>
          <tbody>
            ${invoices.map((invoice) => html`
              <tr>
                <th scope="row"><code>${invoice.id}</code></th>
                <td><code>${invoice.accountId}</code></td>
                <td>${invoice.type}</td>
                <td class="num">${invoice.type === "lightning" ? formatSats(invoice.amountSats) : formatUsdCents(invoice.amountUsdCents)}</td>
                <td class="num">${invoice.latePaymentAmountSats !== undefined ? formatSats(invoice.latePaymentAmountSats)
                  : invoice.latePaymentAmountUsdCents !== undefined ? formatUsdCents(invoice.latePaymentAmountUsdCents) : "—"}</td>
                <td>${invoice.status}</td>
                <td>${formatTime(invoice.createdAt)}</td>
              </tr>`)}
          </tbody>
        </table>
      </div>
      <nav class="pager row" aria-label="Pages">
        <button type="button" class="secondary" disabled=${offset === 0} onClick=${() => navigate(`/admin/late?offset=${Math.max(0, offset - 50)}`)}>Previous page</button>
        <button type="button" class="secondary" disabled=${offset + 50 >= total} onClick=${() => navigate(`/admin/late?offset=${offset + 50}`)}>Next page</button>
      </nav>`}`
}

function Submission({ submission, onReviewed }) {
  const [confirming, setConfirming] = useState(null)
  const [note, setNote] = useState("")
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState(null)
  const review = async () => {
    setBusy(true)
    setError(null)
    try {
      await api(`/v1/admin/registry/submissions/${encodeURIComponent(submission.id)}/${confirming}`, {
        method: "POST",
        body: note.trim() === "" ? {} : { note: note.trim() }
      })
      setConfirming(null)
      onReviewed()
    } catch (e) {
      setError(e)
    } finally {
      setBusy(false)
    }
  }
  const noteId = `note-${submission.id}`
  return html`
    <article class="card submission" data-testid=${"submission-" + submission.slug} aria-labelledby=${"sub-" + submission.id}>
      <h3 id=${"sub-" + submission.id}>${submission.name} <span class=${"badge status-" + submission.status}>${submission.status}</span></h3>
      <p>${submission.description}</p>
      <dl class="facts">
        <dt>Slug</dt><dd><code>${submission.slug}</code></dd>
        <dt>Base URL</dt><dd><code>${submission.baseUrl}</code></dd>
        <dt>Capabilities</dt><dd>${submission.capabilities.join(", ") || "—"}</dd>
        <dt>Endpoints</dt><dd>${submission.endpoints.map((e) => html`<div><code>${e.method} ${e.path}</code> ${e.description}</div>`)}</dd>
        <dt>Contact</dt><dd>${submission.contact}</dd>
        <dt>Submitted</dt><dd>${formatTime(submission.createdAt)} by <code>${submission.accountId}</code></dd>
        ${submission.reviewedAt ? html`<dt>Reviewed</dt><dd>${formatTime(submission.reviewedAt)}${submission.reviewNote ? `: ${submission.reviewNote}` : ""}</dd>` : null}
      </dl>
      ${submission.status === "pending" && confirming === null && html`
        <div class="row">
          <button type="button" onClick=${() => setConfirming("approve")}>Approve…</button>
          <button type="button" class="danger" onClick=${() => setConfirming("reject")}>Reject…</button>
        </div>`}
      <${ConfirmDialog}
        open=${confirming !== null}
        title=${confirming === "approve" ? `Approve ${submission.name}?` : `Reject ${submission.name}?`}
        confirmLabel=${busy ? "Sending…" : confirming === "approve" ? "Yes, approve" : "Yes, reject"}
        danger=${confirming === "reject"}
        onConfirm=${() => { if (!busy) review() }}
        onCancel=${() => setConfirming(null)}>
        <p>${confirming === "approve"
          ? html`<code>${submission.slug}</code> becomes a service every agent can call through the proxy.`
          : html`<code>${submission.slug}</code> stays out of the catalogue; the submitter sees the note.`}</p>
        <label for=${noteId}>Note for the submitter (optional)</label>
        <input id=${noteId} value=${note} maxLength="2000" onInput=${(event) => setNote(event.currentTarget.value)} />
      <//>
      ${error && html`<p class="error" role="alert">${errorText(error)}</p>`}
    </article>`
}

function Registry({ query }) {
  const status = ["pending", "approved", "rejected", "all"].includes(query.status) ? query.status : "pending"
  const list = useApi(() => api("/v1/admin/registry/submissions", { query: { status: status === "all" ? undefined : status, limit: 100 } }), [status])
  const submissions = list.data?.submissions ?? []
  return html`
    <div class="row toolbar">
      <label class="inline" for="registry-status">Show</label>
      <select id="registry-status" class="narrow" value=${status} onChange=${(event) => navigate(`/admin/registry?status=${event.currentTarget.value}`)}>
        <option value="pending">Pending</option>
        <option value="approved">Approved</option>
        <option value="rejected">Rejected</option>
        <option value="all">All</option>
      </select>
    </div>
    <${ErrorNote} error=${list.error} />
    ${list.data && submissions.length === 0 ? html`<p data-testid="registry-empty">No ${status === "all" ? "" : status + " "}submissions.</p>` : null}
    ${submissions.map((submission) => html`<${Submission} key=${submission.id} submission=${submission} onReviewed=${list.reload} />`)}`
}

function Rate() {
  const rate = useApi(() => api("/v1/admin/rate"), [])
  const data = rate.data
  return html`
    <${ErrorNote} error=${rate.error} />
    ${data && html`
      <div class="grid stats">
        <div class="card stat" data-testid="rate-value"><span class="stat-label">BTC/USD</span>
          <span class="stat-value">${data.rate === null ? "No rate" : data.rate.toLocaleString("en-US", { style: "currency", currency: "USD" })}</span>
          <span class=${data.stale ? "error small" : "muted small"}>${data.stale ? "Stale: sats cannot pay until a fresh rate arrives" : `as of ${formatTime(data.asOf)}`}</span></div>
      </div>
      ${data.sources.length > 0 && html`
        <div class="table-wrap card">
          <table>
            <caption class="visually-hidden">Rate sources</caption>
            <thead><tr><th scope="col">Source</th><th scope="col">State</th><th scope="col">Rate</th><th scope="col">At</th></tr></thead>
            <tbody>${data.sources.map((s) => html`<tr><th scope="row">${s.name}</th><td>${s.ok ? "ok" : s.error ?? "failed"}</td><td class="num">${s.rate ?? "—"}</td><td>${formatTime(s.at)}</td></tr>`)}</tbody>
          </table>
        </div>`}`}`
}

const PAGES = { stats: Stats, health: Health, late: LatePayments, registry: Registry, rate: Rate }

export default function Admin({ params, query }) {
  const section = PAGES[params.section] ? params.section : "stats"
  const Section = PAGES[section]
  const title = SECTIONS.find(([key]) => key === section)[1]
  return html`
    <h1>Operator</h1>
    <nav class="tabs" aria-label="Operator sections">
      ${SECTIONS.map(([key, label]) => html`<a href=${"#/admin/" + key} aria-current=${key === section ? "page" : undefined}>${label}</a>`)}
    </nav>
    <h2>${title}</h2>
    <${Section} query=${query} />`
}
