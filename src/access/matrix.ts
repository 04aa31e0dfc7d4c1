import type { AgentAccess } from "../agents/Access.ts"
import type { Capability } from "../domain/Capability.ts"

/**
 * The access matrix: for every endpoint of the HTTP API (group and endpoint
 * name, as in adapters/http/*Api.ts), who may call it. Data only; the rule
 * that reads it is `refusal` in src/agents/Access.ts.
 *
 * - `public`: no key (signup, health);
 * - `admin`: the operator's ADMIN_TOKEN, never an agent key;
 * - `agent`, `owner`, `selfOrOwner`: an agent key, see `AgentAccess`.
 *
 * `target` says where the request names an agent: a path parameter (an id
 * not in the caller's account is 404 NOT_FOUND, whoever asks, so existence
 * never leaks), a query filter, or the row a path id reads (`row`: the
 * row's agent, known once read, so the core checks it with the same rule;
 * another account's row is 404). `capability` says which entry of the
 * caller's `allowedCapabilities` the call needs (`service`: the proxied
 * service's capability). `l402` marks a route sold to callers with no key
 * when L402_SELL=on. `rows` names a rule the core applies to rows it
 * reads, documented here and tested over HTTP.
 *
 * The HTTP layer refuses to start when an endpoint of the API is missing
 * here (or listed here and not in the API), and an endpoint it cannot find
 * is refused at request time: nothing is open by default. docs/access.md is
 * rendered from this table by `renderAccessDoc` (src/access/doc.ts);
 * test/http/access-matrix.test.ts fails when the two differ.
 */

export type RouteAccess =
  | { readonly access: "public" | "admin" }
  | {
    readonly access: AgentAccess
    readonly target?: { readonly in: "path" | "query" | "row"; readonly name: string }
    readonly capability?: Capability | "service"
    readonly rows?: string
    /**
     * Sold over L402 when the server runs with L402_SELL=on: a caller with
     * no key gets 402 PAYMENT_REQUIRED with an L402 challenge, and a paid
     * token runs the call as the internal sales agent (docs/l402.md).
     */
    readonly l402?: true
  }

export interface MatrixEntry {
  readonly method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE"
  readonly path: string
  readonly rule: RouteAccess
  /** What the caller does, completing "may only …" / "Only an owner agent may …". */
  readonly action: string
}

const entry = (method: MatrixEntry["method"], path: string, rule: RouteAccess, action: string): MatrixEntry => ({
  method,
  path,
  rule,
  action
})

const pathAgent = { in: "path", name: "id" } as const
const capabilityCall = (name: Capability) =>
  entry("POST", `/v1/capabilities/${name}`, { access: "agent", capability: name, l402: true }, `use ${name}`)

const capabilityEstimate = (name: Capability) =>
  entry("POST", `/v1/capabilities/${name}/estimate`, { access: "agent" }, `estimate ${name} calls`)

export const accessMatrix = {
  public: {
    health: entry("GET", "/health", { access: "public" }, "check health"),
    signup: entry("POST", "/v1/signup", { access: "public" }, "sign up")
  },
  agents: {
    list: entry("GET", "/v1/agents", { access: "owner" }, "list agents"),
    create: entry("POST", "/v1/agents", { access: "owner" }, "create agents"),
    me: entry("GET", "/v1/agents/me", { access: "agent" }, "read themselves"),
    get: entry("GET", "/v1/agents/:id", { access: "selfOrOwner", target: pathAgent }, "read"),
    update: entry("PATCH", "/v1/agents/:id", { access: "owner", target: pathAgent }, "change agents"),
    delete: entry("DELETE", "/v1/agents/:id", { access: "owner", target: pathAgent }, "delete agents"),
    rotateKey: entry(
      "POST",
      "/v1/agents/:id/rotate-key",
      { access: "selfOrOwner", target: pathAgent },
      "rotate the key of"
    ),
    getPolicy: entry("GET", "/v1/agents/:id/policy", { access: "selfOrOwner", target: pathAgent }, "read the policy of"),
    replacePolicy: entry("PUT", "/v1/agents/:id/policy", { access: "owner", target: pathAgent }, "change policies"),
    patchPolicy: entry("PATCH", "/v1/agents/:id/policy", { access: "owner", target: pathAgent }, "change policies")
  },
  wallet: {
    wallet: entry("GET", "/v1/wallet", { access: "agent" }, "read the wallet"),
    agentWallet: entry(
      "GET",
      "/v1/agents/:id/wallet",
      { access: "owner", target: pathAgent },
      "read the wallet of an agent"
    ),
    transactions: entry(
      "GET",
      "/v1/wallet/transactions",
      {
        access: "selfOrOwner",
        target: { in: "query", name: "agentId" },
        rows: "an agent lists only its own transactions"
      },
      "list the transactions of"
    ),
    transactionsCsv: entry(
      "GET",
      "/v1/wallet/transactions.csv",
      {
        access: "selfOrOwner",
        target: { in: "query", name: "agentId" },
        rows: "an agent exports only its own transactions"
      },
      "export the transactions of"
    ),
    transaction: entry(
      "GET",
      "/v1/wallet/transactions/:transactionId",
      {
        access: "selfOrOwner",
        target: { in: "row", name: "transactionId" },
        rows: "an agent reads only its own transactions"
      },
      "read the transactions of"
    ),
    spend: entry(
      "GET",
      "/v1/wallet/spend",
      {
        access: "selfOrOwner",
        target: { in: "query", name: "agentId" },
        rows: "an agent sees only its own spend"
      },
      "read the spend of"
    ),
    audit: entry(
      "GET",
      "/v1/audit/:auditId",
      {
        access: "selfOrOwner",
        target: { in: "row", name: "auditId" },
        rows: "an agent reads only the audit records of its own transactions"
      },
      "read the audit records of"
    )
  },
  funding: {
    fund: entry("POST", "/v1/wallet/fund", { access: "owner" }, "fund the wallet"),
    fundCard: entry("POST", "/v1/wallet/fund-card", { access: "owner" }, "fund the wallet"),
    invoices: entry("GET", "/v1/wallet/invoices", { access: "owner" }, "read invoices")
  },
  admin: {
    stats: entry("GET", "/v1/admin/stats", { access: "admin" }, "read statistics"),
    agents: entry("GET", "/v1/admin/agents", { access: "admin" }, "list all agents"),
    transactions: entry("GET", "/v1/admin/transactions", { access: "admin" }, "list all transactions"),
    refund: entry("POST", "/v1/admin/transactions/:id/refund", { access: "admin" }, "refund charges"),
    auditLogs: entry("GET", "/v1/admin/audit-logs", { access: "admin" }, "list all audit records"),
    serviceHealth: entry("GET", "/v1/admin/service-health", { access: "admin" }, "read provider health"),
    submissions: entry("GET", "/v1/admin/registry/submissions", { access: "admin" }, "list all submissions"),
    approve: entry("POST", "/v1/admin/registry/submissions/:id/approve", { access: "admin" }, "approve submissions"),
    reject: entry("POST", "/v1/admin/registry/submissions/:id/reject", { access: "admin" }, "reject submissions"),
    rate: entry("GET", "/v1/admin/rate", { access: "admin" }, "read the rate"),
    latePayments: entry("GET", "/v1/admin/late-payments", { access: "admin" }, "list late payments")
  },
  capabilities: {
    list: entry("GET", "/v1/capabilities", { access: "agent" }, "list capabilities"),
    describe: entry("GET", "/v1/capabilities/:capability", { access: "agent" }, "describe capabilities"),
    reason: capabilityCall("reason"),
    search: capabilityCall("search"),
    read: capabilityCall("read"),
    scrape: capabilityCall("scrape"),
    execute: capabilityCall("execute"),
    imagine: capabilityCall("imagine"),
    speak: capabilityCall("speak"),
    transcribe: capabilityCall("transcribe"),
    email: capabilityCall("email"),
    sms: capabilityCall("sms"),
    // Never sold over L402: paying paywalls is for agents of an account, under its payee hosts.
    pay: entry("POST", "/v1/capabilities/pay", { access: "agent", capability: "pay" }, "use pay"),
    // An estimate is a report: a capability the policy does not allow is its answer (CAPABILITY_NOT_ALLOWED), not a 403.
    estimateReason: capabilityEstimate("reason"),
    estimateSearch: capabilityEstimate("search"),
    estimateRead: capabilityEstimate("read"),
    estimateScrape: capabilityEstimate("scrape"),
    estimateExecute: capabilityEstimate("execute"),
    estimateImagine: capabilityEstimate("imagine"),
    estimateSpeak: capabilityEstimate("speak"),
    estimateTranscribe: capabilityEstimate("transcribe"),
    estimateEmail: capabilityEstimate("email"),
    estimateSms: capabilityEstimate("sms"),
    estimateOther: entry("POST", "/v1/capabilities/:capability/estimate", { access: "agent" }, "estimate calls"),
    other: entry("POST", "/v1/capabilities/:capability", { access: "agent" }, "use capabilities")
  },
  l402: {
    payeeHosts: entry("GET", "/v1/l402/payee-hosts", { access: "owner" }, "read the L402 payee hosts"),
    setPayeeHosts: entry("PUT", "/v1/l402/payee-hosts", { access: "owner" }, "change the L402 payee hosts")
  },
  quotes: {
    // Like an estimate: a capability the policy does not allow is the answer (CAPABILITY_NOT_ALLOWED), not a 403 before it.
    create: entry("POST", "/v1/quotes", { access: "agent" }, "ask for quotes")
  },
  services: {
    list: entry("GET", "/v1/services", { access: "agent" }, "list services"),
    get: entry("GET", "/v1/services/:slug", { access: "agent" }, "read services"),
    proxy: entry("POST", "/v1/proxy/:slug", { access: "agent", capability: "service" }, "use the proxy"),
    submit: entry("POST", "/v1/registry/submit", { access: "owner" }, "submit services"),
    submissions: entry("GET", "/v1/registry/submissions", { access: "owner" }, "list registry submissions")
  },
  openai: {
    chatCompletions: entry("POST", "/v1/chat/completions", { access: "agent", capability: "reason" }, "create chat completions"),
    models: entry("GET", "/v1/models", { access: "agent" }, "list models"),
    embeddings: entry("POST", "/v1/embeddings", { access: "agent", capability: "reason" }, "create embeddings"),
    imagesGenerations: entry("POST", "/v1/images/generations", { access: "agent", capability: "imagine" }, "generate images"),
    audioSpeech: entry("POST", "/v1/audio/speech", { access: "agent", capability: "speak" }, "create speech"),
    audioTranscriptions: entry("POST", "/v1/audio/transcriptions", { access: "agent", capability: "transcribe" }, "create transcriptions")
  },
  anthropic: {
    messages: entry("POST", "/v1/messages", { access: "agent", capability: "reason" }, "create messages")
  },
  webhooks: {
    list: entry("GET", "/v1/webhooks", { access: "owner" }, "list webhook endpoints"),
    create: entry("POST", "/v1/webhooks", { access: "owner" }, "create webhook endpoints"),
    get: entry("GET", "/v1/webhooks/:id", { access: "owner" }, "read webhook endpoints"),
    update: entry("PATCH", "/v1/webhooks/:id", { access: "owner" }, "change webhook endpoints"),
    delete: entry("DELETE", "/v1/webhooks/:id", { access: "owner" }, "delete webhook endpoints"),
    rotateSecret: entry("POST", "/v1/webhooks/:id/rotate-secret", { access: "owner" }, "rotate webhook secrets"),
    deliveries: entry("GET", "/v1/webhooks/:id/deliveries", { access: "owner" }, "read webhook deliveries"),
    lowBalance: entry("PUT", "/v1/webhooks/alerts/low-balance", { access: "owner" }, "set the low-balance alert"),
    retry: entry(
      "POST",
      "/v1/webhooks/:id/deliveries/:deliveryId/retry",
      { access: "owner" },
      "retry webhook deliveries"
    )
  }
} as const satisfies Record<string, Record<string, MatrixEntry>>

/** The entry of an endpoint, or undefined when the matrix does not list it (refused). */
export const lookupAccess = (group: string, endpoint: string): MatrixEntry | undefined => {
  const byGroup = (accessMatrix as Record<string, Record<string, MatrixEntry>>)[group]
  if (byGroup === undefined || !Object.hasOwn(byGroup, endpoint)) return undefined
  return byGroup[endpoint]
}

/** Every entry, in table order. */
export const matrixEntries = (): ReadonlyArray<{ readonly group: string; readonly endpoint: string } & MatrixEntry> =>
  Object.entries(accessMatrix as Record<string, Record<string, MatrixEntry>>).flatMap(([group, endpoints]) =>
    Object.entries(endpoints).map(([endpoint, e]) => ({ group, endpoint, ...e }))
  )

/**
 * Routes mounted beside the HTTP API rather than in it, with the same rule.
 * `/mcp` (adapters/http/mcpRoute.ts) takes an agent key like any agent
 * endpoint: the key, the kill switch and the rate limit are checked by the
 * API itself (the route asks `GET /v1/capabilities` with the caller's key and
 * answers its 401, 403 or 429), and each tool is a call of the API endpoint
 * of the same name (`capabilities.<name>`, `wallet.wallet`,
 * `wallet.transactions`; `estimate_cost`: `capabilities.estimate<Name>`), so that endpoint's cell of the matrix (its
 * capability included) applies to the tool call; a refusal there is a tool
 * error, not an HTTP status. test/mcp/mcp.test.ts holds /mcp to these cells.
 */
export const routesOutsideApi = {
  mcp: entry("POST", "/mcp", { access: "agent" }, "use the MCP server"),
  /**
   * `/metrics` (adapters/http/observability.ts) answers Prometheus text, not
   * JSON, so it is mounted beside the API. Only the operator reads it: the
   * METRICS_TOKEN, or the ADMIN_TOKEN when METRICS_TOKEN is unset; with
   * neither it answers 404. test/http/observability.test.ts holds it to this.
   */
  metrics: entry("GET", "/metrics", { access: "admin" }, "read the metrics"),
  /**
   * Dashboard sessions (adapters/http/sessions.ts): sign-in takes an agent
   * key or the admin token in its body and sets the session cookie; the
   * other routes take that cookie. A session stands for the key (or token)
   * it was opened with on every endpoint of this matrix, re-checked on each
   * request; changes made with it need its CSRF token. test/http/sessions.test.ts
   * holds these routes to docs/access.md.
   */
  signIn: entry("POST", "/session", { access: "public" }, "sign in to the dashboard"),
  session: entry("GET", "/session", { access: "public" }, "read the dashboard session"),
  signOut: entry("DELETE", "/session", { access: "public" }, "sign out of the dashboard"),
  qrCode: entry("GET", "/session/qr.svg", { access: "public" }, "draw a QR code")
} as const satisfies Record<string, MatrixEntry>
