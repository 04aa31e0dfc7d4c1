import { html, useState, useRef, useEffect, api, ErrorNote } from "../lib.js"

/**
 * Sign-in: an owner or agent API key, or the operator's admin token, sent
 * once to POST /session. The server answers with an HttpOnly session cookie;
 * the field is emptied as soon as the request leaves, so the key stays
 * nowhere in the page or the browser.
 */
export default function SignIn({ onSignedIn }) {
  const [kind, setKind] = useState(location.pathname === "/admin" ? "operator" : "key")
  const [error, setError] = useState(null)
  const [busy, setBusy] = useState(false)
  const input = useRef(null)
  useEffect(() => { input.current?.focus() }, [kind])

  const submit = async (event) => {
    event.preventDefault()
    const value = input.current.value.trim()
    input.current.value = ""
    if (value === "") {
      setError(new Error(kind === "key" ? "Enter an API key" : "Enter the admin token"))
      input.current.focus()
      return
    }
    setBusy(true)
    setError(null)
    try {
      await api("/session", { method: "POST", body: kind === "key" ? { key: value } : { adminToken: value } })
      onSignedIn()
    } catch (e) {
      setError(e)
      setBusy(false)
      input.current?.focus()
    }
  }

  return html`
    <main class="signin">
      <h1>Sign in to Spendgate</h1>
      <form class="card" onSubmit=${submit} aria-describedby="signin-help">
        <fieldset class="choice">
          <legend>Sign in with</legend>
          <label class="inline">
            <input type="radio" name="kind" value="key" checked=${kind === "key"} onChange=${() => setKind("key")} />
            Owner or agent key
          </label>
          <label class="inline">
            <input type="radio" name="kind" value="operator" checked=${kind === "operator"} onChange=${() => setKind("operator")} />
            Operator token
          </label>
        </fieldset>
        ${kind === "key"
          ? html`<label for="signin-secret">API key</label>
              <input id="signin-secret" ref=${input} type="password" autocomplete="off" spellcheck="false"
                placeholder="sk_agt_…" aria-invalid=${error ? "true" : undefined} aria-describedby="signin-error" />`
          : html`<label for="signin-secret">Admin token</label>
              <input id="signin-secret" ref=${input} type="password" autocomplete="off" spellcheck="false"
                aria-invalid=${error ? "true" : undefined} aria-describedby="signin-error" />`}
        <div id="signin-error"><${ErrorNote} error=${error} /></div>
        <p class="actions"><button type="submit" disabled=${busy}>${busy ? "Signing in…" : "Sign in"}</button></p>
        <p id="signin-help" class="muted small">
          ${kind === "key"
            ? "An owner key manages the account's agents and wallet; an agent key shows that agent, read-only."
            : "The operator's ADMIN_TOKEN opens the operator area."}
          ${" "}The key is sent once to this server and never kept in the browser: you get a session cookie
          that ends when you sign out, after 30 minutes idle, or after 12 hours.
        </p>
      </form>
    </main>`
}
