// Hand-written SVG bar charts. Each chart is a figure whose picture is
// described for screen readers (role="img" with a title naming the largest
// bar) and whose numbers are also a table under a disclosure, so nothing is
// shown only as a picture. Colours and sizes come from app.css classes: the
// Content-Security-Policy allows no inline styles.
import { html } from "./lib.js"

let counter = 0
const nextId = (prefix) => `${prefix}-${++counter}`

const DataTable = ({ rows, labelHeading, valueHeading, extra }) => html`
  <details class="chart-table">
    <summary>Show as a table</summary>
    <div class="table-wrap">
      <table>
        <thead><tr><th scope="col">${labelHeading}</th><th scope="col">${valueHeading}</th>${extra ? html`<th scope="col">${extra.heading}</th>` : null}</tr></thead>
        <tbody>
          ${rows.map((row) => html`<tr><th scope="row">${row.label}</th><td>${row.text}</td>${extra ? html`<td>${extra.text(row)}</td>` : null}</tr>`)}
        </tbody>
      </table>
    </div>
  </details>`

/**
 * Horizontal bars, one per row: rows are { label, value, text } where text is
 * the formatted value shown at the end of the bar.
 */
export function BarChart({ title, rows, valueHeading = "Amount", labelHeading = "Name", extra, empty = "Nothing yet.", testId }) {
  const id = nextId("chart")
  if (!rows || rows.length === 0) {
    return html`<figure class="chart" data-testid=${testId}><figcaption>${title}</figcaption><p class="muted">${empty}</p></figure>`
  }
  // No axis is drawn: the longest bar is the largest value, its amount written beside it.
  const max = Math.max(...rows.map((r) => r.value)) || 1
  const rowHeight = 28
  const labelWidth = 120
  const width = 420
  const barSpace = width - labelWidth - 100
  const height = rows.length * rowHeight + 8
  const top = rows.reduce((best, r) => (r.value > best.value ? r : best), rows[0])
  const summary = `${title}: ${rows.length} ${rows.length === 1 ? "entry" : "entries"}, the largest ${top.label} at ${top.text}.`
  return html`
    <figure class="chart" data-testid=${testId}>
      <figcaption id=${id + "-cap"}>${title}</figcaption>
      <svg class="bars" viewBox=${`0 0 ${width} ${height}`} role="img" aria-labelledby=${id + "-title"} preserveAspectRatio="xMinYMin meet">
        <title id=${id + "-title"}>${summary}</title>
        ${rows.map((row, i) => {
          const y = i * rowHeight + 4
          const w = Math.max(row.value > 0 ? 2 : 0, (row.value / max) * barSpace)
          const label = row.label.length > 16 ? row.label.slice(0, 15) + "…" : row.label
          return html`<g class="bar-row">
            <text class="bar-label" x=${labelWidth - 8} y=${y + 17} text-anchor="end">${label}</text>
            <rect class=${"bar bar-" + (i % 6)} x=${labelWidth} y=${y + 4} width=${w} height=${rowHeight - 10} rx="3"><title>${row.label}: ${row.text}</title></rect>
            <text class="bar-value" x=${labelWidth + w + 6} y=${y + 17}>${row.text}</text>
          </g>`
        })}
      </svg>
      <${DataTable} rows=${rows} labelHeading=${labelHeading} valueHeading=${valueHeading} extra=${extra} />
    </figure>`
}

/** Vertical bars over days: rows are { label (YYYY-MM-DD), value, text }. */
export function DayChart({ title, rows, valueHeading = "Amount", extra, testId }) {
  const id = nextId("days")
  if (!rows || rows.length === 0) return null
  const max = Math.max(...rows.map((r) => r.value)) || 1
  const width = 420
  const height = 180
  const left = 8
  const bottom = 22
  const plot = height - bottom - 14
  const slot = (width - left * 2) / rows.length
  const barWidth = Math.max(2, slot * 0.7)
  const total = rows.reduce((sum, r) => sum + r.value, 0)
  const busiest = rows.reduce((best, r) => (r.value > best.value ? r : best), rows[0])
  const summary = total === 0
    ? `${title}: nothing over ${rows.length} days.`
    : `${title}: ${rows.length} days, the highest on ${busiest.label} at ${busiest.text}.`
  const labelEvery = Math.ceil(rows.length / 7)
  return html`
    <figure class="chart" data-testid=${testId}>
      <figcaption>${title}</figcaption>
      <svg class="days" viewBox=${`0 0 ${width} ${height}`} role="img" aria-labelledby=${id + "-title"} preserveAspectRatio="xMinYMin meet">
        <title id=${id + "-title"}>${summary}</title>
        <line class="axis" x1=${left} x2=${width - left} y1=${height - bottom} y2=${height - bottom} />
        ${rows.map((row, i) => {
          const h = row.value > 0 ? Math.max(2, (row.value / max) * plot) : 0
          const x = left + i * slot + (slot - barWidth) / 2
          return html`<g>
            <rect class="bar bar-0" x=${x} y=${height - bottom - h} width=${barWidth} height=${h} rx="2"><title>${row.label}: ${row.text}</title></rect>
            ${(rows.length - 1 - i) % labelEvery === 0
              ? html`<text class="axis-label" x=${x + barWidth / 2} y=${height - 6} text-anchor="middle">${row.label.slice(5)}</text>`
              : null}
          </g>`
        })}
        <text class="axis-label" x=${left} y="10">max ${busiest.text}</text>
      </svg>
      <${DataTable} rows=${rows} labelHeading="Day" valueHeading=${valueHeading} extra=${extra} />
    </figure>`
}
