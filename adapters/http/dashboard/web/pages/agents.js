import {
  html, useState, useRef, useEffect, useApi, api, ErrorNote, CopyButton, ConfirmDialog, AgentStatus, formatTime
} from "../lib.js"

/** A key shown once, right after it was made, with a copy button and a warning. */
export function NewKey({ agent, apiKey, onDone }) {
  const heading = useRef(null)
  useEffect(() => { heading.current?.focus() }, [apiKey])
  return html`<section class="card notice" aria-labelledby="new-key-title">
    <h2 id="new-key-title" tabindex="-1" ref=${heading}>API key for ${agent}</h2>
    <p><strong>Copy this key now: it is shown once.</strong> Spendgate keeps only its hash and cannot show it again;
      if it is lost, rotate the key.</p>
    <code class="keybox" data-testid="new-api-key">${apiKey}</code>
    <p class="row"><${CopyButton} text=${apiKey} label="Copy key" />
      <button type="button" class="secondary" onClick=${onDone}>I have stored it</button></p>
  </section>`
}

function CreateAgent({ onCreated }) {
  const [name, setName] = useState("")
  const [role, setRole] = useState("agent")
  const [error, setError] = useState(null)
  const [busy, setBusy] = useState(false)
  const submit = async (event) => {
    event.preventDefault()
    setBusy(true)
    setError(null)
    try {
      const created = await api("/v1/agents", { method: "POST", body: { name: name.trim(), role } })
      setName("")
      onCreated(created)
    } catch (e) {
      setError(e)
    } finally {
      setBusy(false)
    }
  }
  return html`<form class="card" onSubmit=${submit} aria-labelledby="create-title">
    <h2 id="create-title">Create an agent</h2>
    <div class="row">
      <div><label for="new-agent-name">Name</label>
        <input id="new-agent-name" value=${name} onInput=${(e) => setName(e.currentTarget.value)} required maxlength="100" /></div>
      <div><label for="new-agent-role">Role</label>
        <select id="new-agent-role" value=${role} onChange=${(e) => setRole(e.currentTarget.value)}>
          <option value="agent">Agent (spends, reads itself)</option>
          <option value="owner">Owner (manages the account)</option>
        </select></div>
      <div><button type="submit" disabled=${busy}>Create agent</button></div>
    </div>
    <${ErrorNote} error=${error} />
  </form>`
}

function RenameForm({ agent, onDone }) {
  const [name, setName] = useState(agent.name)
  const [error, setError] = useState(null)
  const input = useRef(null)
  useEffect(() => { input.current?.focus() }, [])
  const submit = async (event) => {
    event.preventDefault()
    try {
      await api(`/v1/agents/${encodeURIComponent(agent.id)}`, { method: "PATCH", body: { name: name.trim() } })
      onDone(true)
    } catch (e) {
      setError(e)
    }
  }
  return html`<form class="row" onSubmit=${submit}>
    <div><label for=${`rename-${agent.id}`}>New name for ${agent.name}</label>
      <input id=${`rename-${agent.id}`} value=${name} onInput=${(e) => setName(e.currentTarget.value)} required maxlength="100"
        ref=${input} /></div>
    <div class="row"><button type="submit">Save name</button>
      <button type="button" class="secondary" onClick=${() => onDone(false)}>Cancel</button></div>
    <${ErrorNote} error=${error} />
  </form>`
}

/** Kill or revive with one click and a confirmation. */
export function KillSwitch({ agent, onChanged }) {
  const [asking, setAsking] = useState(false)
  const [error, setError] = useState(null)
  const kill = !agent.killed
  const confirm = async () => {
    setAsking(false)
    try {
      await api(`/v1/agents/${encodeURIComponent(agent.id)}`, { method: "PATCH", body: { killed: kill } })
      setError(null)
      onChanged()
    } catch (e) {
      setError(e)
    }
  }
  return html`<span>
    <button type="button" class=${kill ? "danger" : ""} onClick=${() => setAsking(true)}
      aria-label=${`${kill ? "Kill" : "Revive"} ${agent.name}`}>${kill ? "Kill" : "Revive"}</button>
    <${ConfirmDialog} open=${asking} title=${`${kill ? "Kill" : "Revive"} ${agent.name}?`}
      confirmLabel=${kill ? "Kill agent" : "Revive agent"} danger=${kill}
      onConfirm=${confirm} onCancel=${() => setAsking(false)}>
      ${kill
        ? html`<p>Every request with its key is refused (403 AGENT_KILLED) from now on, on every server, until you revive it.</p>`
        : html`<p>Its key works again at once, under its policy.</p>`}
    </${ConfirmDialog}>
    <${ErrorNote} error=${error} />
  </span>`
}

const PAGE = 50

export default function AgentsPage() {
  const [offset, setOffset] = useState(0)
  const { data, error, loading, reload } = useApi(() => api("/v1/agents", { query: { limit: PAGE, offset } }), [offset])
  const [created, setCreated] = useState(null)
  const [renaming, setRenaming] = useState(null)
  return html`
    <h1>Agents</h1>
    ${created && html`<${NewKey} agent=${created.name} apiKey=${created.apiKey} onDone=${() => setCreated(null)} />`}
    <${CreateAgent} onCreated=${(agent) => { setCreated(agent); reload() }} />
    <section class="card" aria-labelledby="list-title">
      <h2 id="list-title">All agents ${data ? html`<span class="muted">(${data.total})</span>` : null}</h2>
      <${ErrorNote} error=${error} />
      ${loading && !data ? html`<p class="muted">Loading…</p>` : null}
      ${data && html`<div class="table-wrap"><table>
        <thead><tr><th scope="col">Name</th><th scope="col">Role</th><th scope="col">Status</th>
          <th scope="col" class="hide-narrow">Last active</th><th scope="col">Actions</th></tr></thead>
        <tbody>${data.agents.map((agent) => html`<tr key=${agent.id} data-agent=${agent.id}>
          <td><a href=${`#/agents/${encodeURIComponent(agent.id)}`}>${agent.name}</a><br /><code class="muted small">${agent.id}</code></td>
          <td>${agent.role}</td>
          <td><${AgentStatus} agent=${agent} /></td>
          <td class="hide-narrow">${formatTime(agent.lastActiveAt)}</td>
          <td>${renaming === agent.id
            ? html`<${RenameForm} agent=${agent} onDone=${(changed) => { setRenaming(null); if (changed) reload() }} />`
            : html`<div class="actions-cell">
                <button type="button" class="secondary" onClick=${() => setRenaming(agent.id)} aria-label=${`Rename ${agent.name}`}>Rename</button>
                <${KillSwitch} agent=${agent} onChanged=${reload} />
              </div>`}</td>
        </tr>`)}</tbody>
      </table></div>`}
      ${data && data.total > PAGE && html`<nav class="pager" aria-label="Agent pages">
        <button type="button" class="secondary" disabled=${offset === 0} onClick=${() => setOffset(Math.max(0, offset - PAGE))}>Previous</button>
        <span class="muted">${offset + 1}–${Math.min(offset + PAGE, data.total)} of ${data.total}</span>
        <button type="button" class="secondary" disabled=${offset + PAGE >= data.total} onClick=${() => setOffset(offset + PAGE)}>Next</button>
      </nav>`}
    </section>`
}
