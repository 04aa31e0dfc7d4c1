// The dashboard's shell: who is signed in, the navigation for that role,
// and the page for the address after "#".
import { html, render, useApi, useRoute, useEffect, matchRoute, api, setCsrfToken, ErrorNote, SESSION_ENDED } from "./lib.js"
import SignIn from "./pages/signin.js"
import Overview from "./pages/overview.js"
import Agents from "./pages/agents.js"
import AgentPage from "./pages/agent.js"
import Funding from "./pages/funding.js"
import Transactions from "./pages/transactions.js"
import Receipt from "./pages/receipt.js"
import Admin from "./pages/admin.js"

/** Pages by role: pattern, title (for the navigation; none: not listed), component. */
const ROUTES = {
  owner: [
    ["/", "Overview", Overview],
    ["/agents", "Agents", Agents],
    ["/agents/:id", null, AgentPage],
    ["/funding", "Funding", Funding],
    ["/transactions", "Transactions", Transactions],
    ["/receipts/:id", null, Receipt]
  ],
  agent: [
    ["/", "My agent", AgentPage],
    ["/transactions", "Transactions", Transactions],
    ["/receipts/:id", null, Receipt]
  ],
  operator: [
    ["/", "Operator", Admin],
    ["/admin", null, Admin],
    ["/admin/:section", null, Admin]
  ]
}

function Shell({ session, onSignOut }) {
  const route = useRoute()
  const routes = ROUTES[session.role] ?? []
  let page = null
  for (const [pattern, , Component] of routes) {
    const params = matchRoute(pattern, route.path)
    if (params) {
      page = html`<${Component} session=${session} params=${params} query=${route.query} />`
      break
    }
  }
  return html`
    <header class="top">
      <span class="brand">Spendgate</span>
      <nav class="main" aria-label="Main">
        ${routes.filter(([, title]) => title).map(([pattern, title]) =>
          html`<a href=${"#" + pattern} aria-current=${route.path === pattern ? "page" : undefined}>${title}</a>`)}
      </nav>
      <span class="muted" data-testid="signed-in-as">${session.label ?? session.role}</span>
      <button class="secondary" onClick=${onSignOut}>Sign out</button>
    </header>
    <main>${page ?? html`<p>No page at <code>${route.path}</code>. <a href="#/">Home</a></p>`}</main>`
}

function App() {
  const { data: session, error, loading, reload } = useApi(() =>
    api("/session").catch((e) => (e.status === 401 ? null : Promise.reject(e))))
  useEffect(() => {
    addEventListener(SESSION_ENDED, reload)
    return () => removeEventListener(SESSION_ENDED, reload)
  }, [reload])
  if (loading && session === undefined) return html`<p class="loading">Loading…</p>`
  // A session that is refused (its agent killed): say why, and let another key sign in in its place.
  if (error) return html`<div class="session-error"><${ErrorNote} error=${error} /></div><${SignIn} onSignedIn=${reload} />`
  if (!session) return html`<${SignIn} onSignedIn=${reload} />`
  setCsrfToken(session.csrfToken)
  const signOut = async () => {
    await api("/session", { method: "DELETE" }).catch(() => undefined)
    setCsrfToken(null)
    location.hash = "/"
    reload()
  }
  return html`<${Shell} session=${session} onSignOut=${signOut} />`
}

render(html`<${App} />`, document.getElementById("app"))
