import { matrixEntries, type RouteAccess } from "./matrix.ts"

/**
 * What the access matrix predicts for a caller, and docs/access.md rendered
 * from it. test/http/access-matrix.test.ts holds every endpoint of the API
 * to these predictions over HTTP and the document to `renderAccessDoc()`.
 */

/** Who calls: an owner or a plain agent of the account, a killed agent, no key, the operator's token. */
export type CallerKind = "owner" | "agent" | "killed" | "none" | "admin"

/**
 * The agent the request names (path id, query filter, or the row's agent):
 * none, the caller itself, another agent of the caller's account, or an
 * agent of another account.
 */
export type TargetKind = "none" | "self" | "sibling" | "foreign"

/** `ok`: not refused by access control (the endpoint's own answer follows). */
export type Outcome = "ok" | 401 | 403 | 404

export const expectedOutcome = (rule: RouteAccess, caller: CallerKind, target: TargetKind): Outcome => {
  if (rule.access === "public") return "ok"
  if (rule.access === "admin") return caller === "admin" ? "ok" : caller === "none" ? 401 : 403
  if (caller === "none" || caller === "admin") return 401
  if (caller === "killed") return 403
  const where = "target" in rule ? rule.target?.in : undefined
  if (target === "foreign" && (where === "path" || where === "row")) return 404
  if (caller === "owner") return "ok"
  switch (rule.access) {
    case "agent":
      return "ok"
    case "owner":
      return 403
    case "selfOrOwner":
      return target === "none" || target === "self" ? "ok" : 403
  }
}

const show = (outcome: Outcome) => outcome === "ok" ? "yes" : String(outcome)

const who: Record<RouteAccess["access"], string> = {
  public: "public",
  admin: "admin token",
  agent: "any agent",
  owner: "owner only",
  selfOrOwner: "self or owner"
}

/** docs/access.md, from the matrix. */
export const renderAccessDoc = (): string => {
  const rows = matrixEntries().map((e) => {
    const named = "target" in e.rule && e.rule.target !== undefined
    const own = named ? "self" : "none"
    const cell = (caller: CallerKind, target: TargetKind) => show(expectedOutcome(e.rule, caller, target))
    const notes = [
      "target" in e.rule && e.rule.target !== undefined
        ? `agent named by ${e.rule.target.in === "row" ? `the row of \`${e.rule.target.name}\`` : `${e.rule.target.in} \`${e.rule.target.name}\``}`
        : "",
      "capability" in e.rule && e.rule.capability !== undefined
        ? e.rule.capability === "service"
          ? "needs the proxied service's capability in allowedCapabilities"
          : `needs \`${e.rule.capability}\` in allowedCapabilities`
        : "",
      "rows" in e.rule && e.rule.rows !== undefined ? e.rule.rows : "",
      "l402" in e.rule && e.rule.l402 === true
        ? "with L402_SELL=on, no key: 402 `PAYMENT_REQUIRED` with an L402 challenge; `Authorization: L402 <macaroon>:<preimage>` runs the call as the L402 sales agent (docs/l402.md)"
        : ""
    ].filter((note) => note !== "").join("; ")
    return `| \`${e.group}.${e.endpoint}\` | \`${e.method} ${e.path}\` | ${who[e.rule.access]} | ${cell("owner", own)} | ${
      named ? cell("owner", "foreign") : "—"
    } | ${cell("agent", own)} | ${named ? cell("agent", "sibling") : "—"} | ${named ? cell("agent", "foreign") : "—"} | ${
      cell("killed", own)
    } | ${cell("none", own)} | ${cell("admin", own)} | ${notes} |`
  })
  return `# Access matrix

Generated from \`src/access/matrix.ts\` by \`renderAccessDoc()\` (\`src/access/doc.ts\`);
\`test/http/access-matrix.test.ts\` fails when this file differs (run it with
\`UPDATE_ACCESS_DOC=1\` to rewrite it) and holds every endpoint of the API to
these cells over HTTP.

Who may call what (decisions.md §3):

- **owner**: everything of its own account.
- **agent**: capabilities and the proxy, the catalogues, itself
  (\`GET /v1/agents/{ownId}\`), its own policy, \`GET /v1/wallet\`, its own
  transactions and the audit records of its own transactions. Not: other
  agents, policies (its own included), funding, invoices, the wallet of an
  agent, registry submissions (listing or submitting).
- **admin token**: \`/v1/admin/*\` only; an agent key there is 403, no token 401,
  and with no \`ADMIN_TOKEN\` configured the admin API answers 404.
- **no key, L402_SELL=on**: the capability calls (\`POST /v1/capabilities/{capability}\`,
  not their estimates) answer 402 \`PAYMENT_REQUIRED\` with an L402 challenge, and a
  paid token runs one call as the internal L402 sales agent (docs/l402.md). Every
  other route, and every route with L402_SELL off, answers no key 401 as below.

How it is enforced: the \`AccessControl\` middleware
(\`adapters/http/access.ts\`) runs right after authentication (and the rate
limit) and before \`Idempotency-Key\` handling and the handler, so a stored
answer is never replayed to a caller the matrix refuses. It applies
\`refusal\` (\`src/agents/Access.ts\`), the rule the core's own checks use as
well. On capability and proxy routes it also checks \`allowedCapabilities\`
(403 \`CAPABILITY_NOT_ALLOWED\`). The server does not start when an endpoint of
the API is missing from the matrix.

Order of checks on an authenticated endpoint: route (404) → key (401) → kill
switch (403 \`AGENT_KILLED\`) → rate limit (429) → access: role (403
\`FORBIDDEN\`; 404 when the agent in the path is not in the caller's account) and
capability (403 \`CAPABILITY_NOT_ALLOWED\`) → \`Idempotency-Key\` (replay, 409) →
input (400/413/415) → resource of another account (404) → row (403 for another
agent's audit record) → state (409).

\`Idempotency-Key\`s belong to the agent that sent them (signup keys to the
client address): another agent, of the same account or not, never gets a
stored answer, and the agent itself gets it only while the matrix and its
policy still let it make the request.

Cells: \`yes\` = not refused by access control (the endpoint answers as usual);
a status = refused with it. "Own id" is the caller's own agent id where the
route names an agent; "other agent" is another agent of the caller's account;
"another account" is an agent (or its row) of another account. A killed
agent's 403 is \`AGENT_KILLED\` (\`FORBIDDEN\` on the admin API, which takes no
agent key); other 403s are \`FORBIDDEN\`, or \`CAPABILITY_NOT_ALLOWED\` where a
capability is needed and not allowed.

| Endpoint | Route | Who | Owner | Owner, another account | Agent, own id | Agent, other agent | Agent, another account | Killed agent | No key | Admin token | Notes |
|---|---|---|---|---|---|---|---|---|---|---|---|
${rows.join("\n")}

Beside the API (\`routesOutsideApi\` in \`src/access/matrix.ts\`):

| Route | Who | Owner | Agent | Killed agent | No key | Unknown key, admin token | Notes |
|---|---|---|---|---|---|---|---|
| \`POST /mcp\` | any agent key | yes | yes | 403 | 401 | 401 | the MCP server (Streamable HTTP, stateless; GET and DELETE 405); each tool call is the API endpoint of the same name with the caller's key, under that endpoint's cell, a refusal being a tool error (\`isError\`) with the API's code and details; on a \`tools/call\` a killed agent or a spent rate limit is such a tool error too (\`AGENT_KILLED\`, \`RATE_LIMITED\`), not an HTTP 403/429 |
| \`GET /metrics\` | the operator | 401 | 401 | 401 | 401 | unknown key 401; admin token yes when \`METRICS_TOKEN\` is unset, else 401 | Prometheus text (docs/observability.md) for \`Authorization: Bearer <METRICS_TOKEN>\`, or the admin token when \`METRICS_TOKEN\` is unset; 404 with neither token set |
| \`POST /session\` | anyone, with a key or the admin token in the body | yes: owner session | yes: agent session | 403 \`AGENT_KILLED\` | 400 | unknown key 401 (the same answer for any wrong key or token); admin token yes: operator session | dashboard sign-in: sets the \`spendgate_session\` cookie (HttpOnly, SameSite=Strict, Secure over TLS); refused with 403 \`CSRF_FAILED\` when \`Origin\` is another origin; sign-in attempts limited per client address (429) |
| \`GET /session\` | the session cookie | yes | yes | 403 \`AGENT_KILLED\` | 401 | operator session yes | the session's role, label and CSRF token; 401 once the key was rotated or deleted, the admin token changed, or the session ended |
| \`DELETE /session\` | the session cookie | yes | yes | yes | 204 | operator session yes | sign-out; needs \`X-CSRF-Token\` (403 \`CSRF_FAILED\`) |
| \`GET /session/qr.svg\` | the session cookie | yes | yes | 403 \`AGENT_KILLED\` | 401 | operator session yes | a QR code (SVG) of \`text\`, for the dashboard's Lightning invoices |

Dashboard sessions (docs/dashboard-security.md): a request with no
\`Authorization\` or \`X-API-Key\` header and a \`spendgate_session\` cookie is
authenticated as the key the session was opened with (the operator's session as
the admin token), looked up again on every request, so every cell above holds
for it as for the key. A change (any method but GET and HEAD) made with the
cookie also needs \`X-CSRF-Token\` equal to the session's token and, when the
browser sends them, \`Origin\` equal to this server's origin and
\`Sec-Fetch-Site: same-origin\`; otherwise 403 \`CSRF_FAILED\`.
`
}
