// Overview: the wallet's two pockets and what they are worth together, and
// what the account's agents spent today, over 7 and over 30 days, by agent,
// capability and provider (GET /v1/wallet, GET /v1/wallet/spend).
import { html, api, useApi, navigate, formatUsdCents, formatSats, ErrorNote } from "../lib.js"
import { BarChart, DayChart } from "../charts.js"

const PERIODS = [
  ["1", "Today"],
  ["7", "Last 7 days"],
  ["30", "Last 30 days"]
]

const callsText = (row) => `${row.calls} ${row.calls === 1 ? "call" : "calls"}`
const sum = (rows) => rows.reduce((acc, row) => ({
  calls: acc.calls + row.calls,
  chargedUsdCents: acc.chargedUsdCents + row.chargedUsdCents
}), { calls: 0, chargedUsdCents: 0 })

const bars = (rows, label) => rows.map((row) => ({
  label: label(row),
  value: row.chargedUsdCents,
  text: formatUsdCents(row.chargedUsdCents),
  calls: row.calls
}))

export default function Overview({ query }) {
  const days = PERIODS.some(([value]) => value === query.days) ? query.days : "7"
  const wallet = useApi(() => api("/v1/wallet"), [])
  // The 30-day summary gives the three headline totals; the chosen period gives the charts.
  const month = useApi(() => api("/v1/wallet/spend", { query: { days: 30 } }), [])
  const period = useApi(() => api("/v1/wallet/spend", { query: { days } }), [days])

  const headline = month.data
    ? [
      ["Today", sum(month.data.byDay.slice(-1))],
      ["Last 7 days", sum(month.data.byDay.slice(-7))],
      ["Last 30 days", sum(month.data.byDay)]
    ]
    : []
  // Titles follow the data on screen (the previous period's stays shown while the next one loads).
  const shown = period.data ? String(period.data.days) : days
  const periodName = (PERIODS.find(([value]) => value === shown) ?? PERIODS[1])[1]
  const extra = { heading: "Calls", text: callsText }

  return html`
    <h1>Overview</h1>
    <section aria-labelledby="wallet-heading">
      <h2 id="wallet-heading">Wallet</h2>
      <${ErrorNote} error=${wallet.error} />
      ${wallet.data && html`
        <div class="grid stats">
          <div class="card stat" data-testid="pocket-usd"><span class="stat-label">USD pocket</span><span class="stat-value">${formatUsdCents(wallet.data.balanceUsdCents)}</span></div>
          <div class="card stat" data-testid="pocket-sats"><span class="stat-label">Sats pocket</span><span class="stat-value">${formatSats(wallet.data.balanceSats)}</span></div>
          <div class="card stat" data-testid="spendable"><span class="stat-label">Spendable value</span><span class="stat-value">${formatUsdCents(wallet.data.spendableUsdCents)}</span>
            <span class="muted small">USD pocket plus the sats at the current BTC/USD rate</span></div>
        </div>`}
    </section>

    <section aria-labelledby="spend-heading">
      <h2 id="spend-heading">Spend</h2>
      <${ErrorNote} error=${month.error} />
      <div class="grid stats">
        ${headline.map(([name, total]) => html`
          <div class="card stat" data-testid=${"spend-" + name.toLowerCase().replaceAll(" ", "-")}>
            <span class="stat-label">${name}</span>
            <span class="stat-value">${formatUsdCents(total.chargedUsdCents)}</span>
            <span class="muted small">${callsText(total)}</span>
          </div>`)}
      </div>

      <fieldset class="period">
        <legend>Charts for</legend>
        ${PERIODS.map(([value, label]) => html`
          <label class="inline">
            <input type="radio" name="period" value=${value} checked=${value === days}
              onChange=${() => navigate(`/?days=${value}`)} />
            ${label}
          </label>`)}
      </fieldset>

      <${ErrorNote} error=${period.error} />
      ${period.data && html`
        <p class="muted" data-testid="period-total">${periodName}: ${formatUsdCents(period.data.total.chargedUsdCents)} over ${callsText(period.data.total)}${period.data.total.refundedUsdCents > 0 ? html`, ${formatUsdCents(period.data.total.refundedUsdCents)} refunded` : null}.</p>
        <div class="charts">
          ${shown !== "1" && html`<div class="card"><${DayChart} title=${`Spend per day, ${periodName.toLowerCase()}`} testId="chart-days"
            rows=${bars(period.data.byDay, (row) => row.day)} extra=${extra} /></div>`}
          <div class="card"><${BarChart} title=${`By agent, ${periodName.toLowerCase()}`} labelHeading="Agent" testId="chart-agents"
            rows=${bars(period.data.byAgent, (row) => row.name ?? row.agentId)} extra=${extra} empty="No spend in this period." /></div>
          <div class="card"><${BarChart} title=${`By capability, ${periodName.toLowerCase()}`} labelHeading="Capability" testId="chart-capabilities"
            rows=${bars(period.data.byCapability, (row) => row.capability)} extra=${extra} empty="No spend in this period." /></div>
          <div class="card"><${BarChart} title=${`By provider, ${periodName.toLowerCase()}`} labelHeading="Provider" testId="chart-providers"
            rows=${bars(period.data.byProvider, (row) => row.provider)} extra=${extra} empty="No spend in this period." /></div>
        </div>`}
    </section>`
}
