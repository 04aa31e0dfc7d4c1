import {
  html, useState, useApi, api, ErrorNote, ConfirmDialog, AgentStatus, WalletSummary, formatTime, formatUsdCents,
  centsToDollarsInput, dollarsInputToCents
} from "../lib.js"
import { KillSwitch, NewKey } from "./agents.js"

/** Every capability the API knows (GET /v1/capabilities lists the same names). */
// The capabilities of src/domain/Capability.ts, in its order (test/http/dashboard-files.test.ts keeps them equal).
const CAPABILITIES = ["reason", "search", "read", "scrape", "execute", "imagine", "speak", "transcribe", "email", "sms", "pay"]

/** The policy's limits: field, title, what it counts, and whether it is money (USD) or a count of calls. */
const CAPS = [
  ["maxPerCallUsdCents", "Per call", "The most one call may cost.", "usd"],
  ["maxPerDayUsdCents", "Per day", "Spend per UTC day (held and settled).", "usd"],
  ["maxPerMonthUsdCents", "Per month", "Spend per calendar month (UTC).", "usd"],
  ["maxPerHourUsdCents", "Per hour (velocity)", "Spend over the last 60 minutes, rolling.", "usd"],
  ["maxCallsPerMinute", "Calls per minute (velocity)", "Calls started in the last 60 seconds.", "calls"]
]

const showCap = (value, unit) => (!value ? "No limit" : unit === "usd" ? formatUsdCents(value) : `${value} calls`)

function PolicyView({ policy }) {
  return html`<dl class="facts" data-testid="policy-view">
    ${CAPS.map(([field, title, , unit]) => html`<dt>${title}</dt><dd>${showCap(policy[field], unit)}</dd>`)}
    <dt>Velocity kill</dt><dd>${policy.autoKill ? "On: a call past a velocity limit kills the agent" : "Off"}</dd>
    <dt>Capabilities</dt><dd>${policy.allowedCapabilities.length === 0 ? "All" : policy.allowedCapabilities.join(", ")}</dd>
  </dl>`
}

function initialForm(policy) {
  const caps = {}
  for (const [field, , , unit] of CAPS) {
    const value = policy[field]
    caps[field] = { limited: !!value, text: !value ? "" : unit === "usd" ? centsToDollarsInput(value) : String(value) }
  }
  return {
    caps,
    autoKill: policy.autoKill,
    allCapabilities: policy.allowedCapabilities.length === 0,
    capabilities: new Set(policy.allowedCapabilities)
  }
}

function PolicyEditor({ agentId, policy, onSaved }) {
  const [form, setForm] = useState(() => initialForm(policy))
  const [error, setError] = useState(null)
  const [saved, setSaved] = useState("")
  const setCap = (field, change) => setForm((f) => ({ ...f, caps: { ...f.caps, [field]: { ...f.caps[field], ...change } } }))

  const submit = async (event) => {
    event.preventDefault()
    setSaved("")
    const body = { autoKill: form.autoKill }
    for (const [field, title, , unit] of CAPS) {
      const cap = form.caps[field]
      if (!cap.limited) { body[field] = null; continue }
      const value = unit === "usd" ? dollarsInputToCents(cap.text) : Number(cap.text)
      if (value === undefined || !Number.isFinite(value) || value <= 0 || (unit === "calls" && !Number.isInteger(value))) {
        setError(new Error(`${title}: enter a ${unit === "usd" ? "positive amount in USD" : "positive whole number"}, or choose "No limit"`))
        return
      }
      body[field] = value
    }
    if (!form.allCapabilities && form.capabilities.size === 0) {
      setError(new Error("Choose at least one capability, or allow all"))
      return
    }
    body.allowedCapabilities = form.allCapabilities ? null : CAPABILITIES.filter((c) => form.capabilities.has(c))
    try {
      const updated = await api(`/v1/agents/${encodeURIComponent(agentId)}/policy`, { method: "PUT", body })
      setError(null)
      setForm(initialForm(updated))
      setSaved("Policy saved")
      onSaved(updated)
    } catch (e) {
      setError(e)
    }
  }

  return html`<form onSubmit=${submit} aria-labelledby="policy-title" data-testid="policy-editor">
    <div class="policy-grid">${CAPS.map(([field, title, hint, unit]) => {
      const cap = form.caps[field]
      const id = `cap-${field}`
      return html`<fieldset class="cap" key=${field}>
        <legend>${title}</legend>
        <p class="muted small hint">${hint}</p>
        <div class="row">
          <label class="inline"><input type="radio" name=${`${field}-mode`} checked=${!cap.limited}
            onChange=${() => setCap(field, { limited: false })} /> No limit</label>
          <label class="inline"><input type="radio" name=${`${field}-mode`} checked=${cap.limited}
            onChange=${() => setCap(field, { limited: true })} /> Limit</label>
        </div>
        <label for=${id}>${title} limit ${unit === "usd" ? "(USD)" : "(calls)"}</label>
        <input id=${id} type="number" min="0" step=${unit === "usd" ? "0.0001" : "1"} inputmode="decimal"
          value=${cap.text} disabled=${!cap.limited}
          onInput=${(e) => setCap(field, { text: e.currentTarget.value })} />
      </fieldset>`
    })}</div>
    <fieldset class="cap">
      <legend>Velocity kill</legend>
      <label class="inline"><input type="checkbox" checked=${form.autoKill}
        onChange=${(e) => setForm((f) => ({ ...f, autoKill: e.currentTarget.checked }))} />
        Kill the agent when a call goes past a velocity limit (never applies to an owner)</label>
    </fieldset>
    <fieldset class="cap">
      <legend>Allowed capabilities</legend>
      <label class="inline"><input type="radio" name="caps-mode" checked=${form.allCapabilities}
        onChange=${() => setForm((f) => ({ ...f, allCapabilities: true }))} /> All capabilities</label>
      <label class="inline"><input type="radio" name="caps-mode" checked=${!form.allCapabilities}
        onChange=${() => setForm((f) => ({ ...f, allCapabilities: false }))} /> Only these:</label>
      <div class="caps">${CAPABILITIES.map((name) => html`<label class="inline" key=${name}>
        <input type="checkbox" disabled=${form.allCapabilities} checked=${form.allCapabilities || form.capabilities.has(name)}
          onChange=${(e) => {
            const checked = e.currentTarget.checked
            setForm((f) => {
              const next = new Set(f.capabilities)
              if (checked) next.add(name)
              else next.delete(name)
              return { ...f, capabilities: next }
            })
          }} /> ${name}</label>`)}</div>
    </fieldset>
    <${ErrorNote} error=${error} />
    <p class="row"><button type="submit">Save policy</button>
      <span class="ok" role="status" aria-live="polite">${saved}</span></p>
  </form>`
}

/** A new key for the agent; the current one stops at once or after a grace period. */
function RotateKey({ agent, onRotated }) {
  const [asking, setAsking] = useState(false)
  const [grace, setGrace] = useState("0")
  const [error, setError] = useState(null)
  const confirm = async () => {
    setAsking(false)
    try {
      const rotated = await api(`/v1/agents/${encodeURIComponent(agent.id)}/rotate-key`, {
        method: "POST",
        body: { graceSeconds: Number(grace) }
      })
      setError(null)
      onRotated(rotated)
    } catch (e) {
      setError(e)
    }
  }
  return html`<span>
    <button type="button" class="secondary" onClick=${() => setAsking(true)}>Rotate key</button>
    <${ConfirmDialog} open=${asking} title=${`Rotate the key of ${agent.name}?`} confirmLabel="Rotate key"
      onConfirm=${confirm} onCancel=${() => setAsking(false)}>
      <p>A new key is made and shown once. The current key stops working:</p>
      <label for="rotate-grace">When the current key stops</label>
      <select id="rotate-grace" value=${grace} onChange=${(e) => setGrace(e.currentTarget.value)}>
        <option value="0">At once</option>
        <option value="3600">In 1 hour</option>
        <option value="86400">In 1 day</option>
      </select>
    </${ConfirmDialog}>
    <${ErrorNote} error=${error} />
  </span>`
}

/**
 * One agent: details, the wallet it spends from, its policy. An owner edits
 * the policy and the kill switch; an agent's own session reads, nothing more.
 */
export default function AgentPage({ session, params }) {
  const owner = session.role === "owner"
  const agentId = params.id ?? session.agentId
  const path = `/v1/agents/${encodeURIComponent(agentId)}`
  const [rotated, setRotated] = useState(null)
  const { data, error, reload } = useApi(async () => {
    if (!owner) {
      const [me, wallet] = await Promise.all([api("/v1/agents/me"), api("/v1/wallet")])
      return { agent: me, policy: me.policy, wallet: { ...wallet, dailySpentUsdCents: me.spentTodayUsdCents }, me }
    }
    const [agent, policy, wallet] = await Promise.all([api(path), api(`${path}/policy`), api(`${path}/wallet`)])
    return { agent, policy, wallet }
  }, [agentId])

  if (error) return html`<h1>Agent</h1><${ErrorNote} error=${error} />`
  if (!data) return html`<p class="muted">Loading…</p>`
  const { agent, policy, wallet } = data
  return html`
    ${owner ? html`<p><a href="#/agents">← All agents</a></p>` : null}
    <h1>${agent.name} <${AgentStatus} agent=${agent} /></h1>
    ${rotated && html`<${NewKey} agent=${agent.name} apiKey=${rotated.apiKey} onDone=${() => setRotated(null)} />`}
    ${rotated && rotated.previousKeyExpiresAt
      ? html`<p class="muted">The previous key works until ${formatTime(rotated.previousKeyExpiresAt)}.</p>` : null}
    <div class="grid">
      <section class="card" aria-labelledby="details-title">
        <h2 id="details-title">Details</h2>
        <dl class="facts">
          <dt>Id</dt><dd><code>${agent.id}</code></dd>
          <dt>Role</dt><dd>${agent.role}</dd>
          <dt>Created</dt><dd>${formatTime(agent.createdAt)}</dd>
          <dt>Last active</dt><dd>${formatTime(agent.lastActiveAt)}</dd>
        </dl>
        ${owner ? html`<p class="row"><${KillSwitch} agent=${agent} onChanged=${reload} />
          <${RotateKey} agent=${agent} onRotated=${(r) => { setRotated(r); reload() }} /></p>` : null}
      </section>
      <section class="card" aria-labelledby="spend-title">
        <h2 id="spend-title">Spend</h2>
        <dl class="facts">
          <dt>Today</dt><dd data-testid="spent-today">${formatUsdCents(wallet.dailySpentUsdCents)}</dd>
          ${wallet.lifetimeSpentUsdCents !== undefined
            ? html`<dt>Lifetime</dt><dd>${formatUsdCents(wallet.lifetimeSpentUsdCents)}</dd>` : null}
          <dt>This month</dt><dd>${formatUsdCents(policy.monthlySpentUsdCents)}</dd>
        </dl>
      </section>
    </div>
    <section class="card" aria-labelledby="wallet-title">
      <h2 id="wallet-title">Wallet <span class="muted small">(shared by the account's agents)</span></h2>
      <${WalletSummary} wallet=${wallet} />
    </section>
    <section class="card" aria-labelledby="policy-title">
      <h2 id="policy-title">Policy</h2>
      ${owner
        ? html`<${PolicyEditor} key=${agent.id} agentId=${agent.id} policy=${policy} onSaved=${reload} />`
        : html`<p class="muted small">Read-only: only an owner changes policies.</p><${PolicyView} policy=${policy} />`}
    </section>`
}
