import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { CallToolRequestSchema, type CallToolResult, ListToolsRequestSchema, type Tool } from "@modelcontextprotocol/sdk/types.js"
import { Schema } from "effect"
import { capabilityInfo } from "../../src/capabilities/catalog.ts"
import { type BuiltCapability, inputSchemas } from "../../src/capabilities/schemas.ts"
import type { ApiAnswer, Backend } from "./backend.ts"

/**
 * Spendgate as an MCP server: one tool per capability with a configured
 * provider that the agent's policy allows (its input's JSON Schema from
 * src/capabilities/schemas.ts), plus
 * `wallet_balance`, `list_transactions` and `estimate_cost`. Each tool is one call of the HTTP
 * API with the agent's key (backend.ts), so a tool call is metered, held and
 * settled like any other. A refusal (policy, caps, kill switch, empty wallet,
 * rate limit, bad input) is a tool result with `isError: true` carrying the
 * API's error code, message and details (the cap, what remains), which the
 * model can read — never a protocol error.
 */

export const SERVER_NAME = "spendgate"
export const SERVER_VERSION = "0.1.0"

type JsonObject = { readonly [key: string]: unknown }

/**
 * An optional key is rendered `anyOf: [X, { type: "null" }]` (undefined has
 * no JSON form), which tells a model little about X. The tool shows X, the
 * type the API documents; a null argument still sent is dropped before the
 * call (`withoutNulls`), as absent: no capability input has a nullable field.
 */
const optionalAsAbsent = (property: unknown): unknown => {
  if (typeof property !== "object" || property === null) return property
  const { anyOf, ...rest } = property as { readonly anyOf?: ReadonlyArray<JsonObject> } & JsonObject
  if (!Array.isArray(anyOf)) return property
  const others = anyOf.filter((member) => member["type"] !== "null")
  return others.length === 1 && others.length < anyOf.length ? { ...others[0], ...rest } : property
}

const inputJsonSchema = (capability: BuiltCapability): Tool["inputSchema"] => {
  const document = Schema.toJsonSchemaDocument(inputSchemas[capability])
  const definitions = document.definitions as JsonObject
  const schema = document.schema as JsonObject
  const properties = (schema["properties"] ?? {}) as JsonObject
  return {
    ...schema,
    type: "object",
    properties: Object.fromEntries(Object.entries(properties).map(([name, property]) => [name, optionalAsAbsent(property)])),
    ...(Object.keys(definitions).length > 0 ? { $defs: definitions } : {})
  } as Tool["inputSchema"]
}

/** Top-level null arguments are absent keys (see optionalAsAbsent). */
const withoutNulls = (args: JsonObject): JsonObject =>
  Object.fromEntries(Object.entries(args).filter(([, value]) => value !== null))

const capabilityTool = (capability: BuiltCapability): Tool => ({
  name: capability,
  title: capability,
  description: `${capabilityInfo[capability].description}. Paid from the wallet (priced per ${capabilityInfo[capability].per}); ` +
    "the agent's policy (allowed capabilities, per-call and daily caps) applies.",
  inputSchema: inputJsonSchema(capability)
})

export const walletBalanceTool: Tool = {
  name: "wallet_balance",
  title: "Wallet balance",
  description: "The account's wallet: balance in USD cents and sats, and what can be spent now.",
  inputSchema: { type: "object", properties: {}, additionalProperties: false }
}

export const listTransactionsTool: Tool = {
  name: "list_transactions",
  title: "List transactions",
  description: "This agent's charges, credits and refunds, newest first.",
  inputSchema: {
    type: "object",
    properties: {
      type: { type: "string", enum: ["charge", "credit", "refund"] },
      limit: { type: "integer", minimum: 1, maximum: 100, description: "Default 20" },
      offset: { type: "integer", minimum: 0, maximum: 1_000_000_000 }
    },
    additionalProperties: false
  }
}

/** The estimate of a call of any configured capability: POST /v1/capabilities/{capability}/estimate. */
export const estimateCostTool = (capabilities: ReadonlyArray<BuiltCapability>): Tool => ({
  name: "estimate_cost",
  title: "Estimate cost",
  description: "What a call would cost and whether it would be allowed now, without making it: the provider that " +
    "would be chosen, the quote in USD cents, allowed or the refusal it would meet (code, message, details), and " +
    "what is left of the daily cap (null: no cap). Nothing is held or charged.",
  inputSchema: {
    type: "object",
    properties: {
      capability: { type: "string", enum: [...capabilities], description: "The capability tool to estimate" },
      input: { type: "object", description: "The arguments that capability's tool would be called with" }
    },
    required: ["capability", "input"],
    additionalProperties: false
  }
})

const isCapability = (name: string): name is BuiltCapability => Object.hasOwn(inputSchemas, name)

const text = (value: unknown): CallToolResult["content"] => [{ type: "text", text: JSON.stringify(value) }]

/** An API refusal as a tool error: `{ error: { code, message, details? }, status, retryAfterSeconds? }`. */
const refusal = (answer: ApiAnswer): CallToolResult => {
  const body = answer.body as { readonly error?: JsonObject } | null
  const error = typeof body === "object" && body !== null && typeof body.error === "object"
    ? body.error
    : { code: "UPSTREAM_ERROR", message: typeof answer.body === "string" ? answer.body.slice(0, 500) : `HTTP ${answer.status}` }
  return {
    isError: true,
    content: text({
      error,
      status: answer.status,
      ...(answer.retryAfter === null ? {} : { retryAfterSeconds: Number(answer.retryAfter) })
    })
  }
}

const answerOf = (answer: ApiAnswer): CallToolResult =>
  answer.status >= 200 && answer.status < 300
    ? { content: text(answer.body), structuredContent: answer.body as { [key: string]: unknown } }
    : refusal(answer)

const badArguments = (message: string): CallToolResult => ({
  isError: true,
  content: text({ error: { code: "VALIDATION_ERROR", message } })
})

const transactionsPath = (args: JsonObject): string | CallToolResult => {
  const query = new URLSearchParams()
  for (const name of ["type", "limit", "offset"] as const) {
    const value = args[name]
    if (value === undefined) continue
    if (typeof value !== "string" && typeof value !== "number") return badArguments(`${name} must be a string or a number`)
    query.set(name, String(value))
  }
  if (!query.has("limit")) query.set("limit", "20")
  return `/v1/wallet/transactions?${query.toString()}`
}

/** The capabilities the server has a provider for (GET /v1/capabilities), or the refusal. */
export const configuredCapabilities = async (backend: Backend): Promise<ReadonlyArray<BuiltCapability> | ApiAnswer> => {
  const answer = await backend.get("/v1/capabilities")
  if (answer.status !== 200 || !Array.isArray(answer.body)) return answer
  return (answer.body as ReadonlyArray<{ readonly name?: unknown; readonly providers?: unknown }>)
    .filter((c) => typeof c.name === "string" && isCapability(c.name) && Array.isArray(c.providers) && c.providers.length > 0)
    .map((c) => c.name as BuiltCapability)
}

/**
 * Of the configured capabilities, those this agent may use. The API checks
 * access (the agent's allowedCapabilities: 403 CAPABILITY_NOT_ALLOWED) before
 * it reads the input (docs/access.md, order of checks), so an empty call of
 * each capability answers the question without running or charging anything:
 * 400 means allowed. Any other answer (a rate limit, say) keeps the tool
 * listed; the call itself is then refused as usual.
 */
export const allowedCapabilities = async (
  backend: Backend,
  configured: ReadonlyArray<BuiltCapability>
): Promise<ReadonlyArray<BuiltCapability>> => {
  const answers = await Promise.all(configured.map((capability) => backend.post(`/v1/capabilities/${capability}`, {})))
  return configured.filter((_, i) => {
    const body = answers[i]!.body as { readonly error?: { readonly code?: unknown } } | null
    return !(answers[i]!.status === 403 && body?.error?.code === "CAPABILITY_NOT_ALLOWED")
  })
}

/** An MCP server (not yet connected) answering with this backend, i.e. as this agent. */
export const makeMcpServer = (backend: Backend): Server => {
  const server = new Server(
    { name: SERVER_NAME, version: SERVER_VERSION },
    {
      capabilities: { tools: {} },
      instructions: "Paid capabilities behind a spending gateway. Every tool call is charged to the wallet under " +
        "this agent's policy; a refused call returns isError with a code (e.g. CAPABILITY_NOT_ALLOWED, " +
        "PER_CALL_LIMIT_EXCEEDED, BUDGET_EXCEEDED, VELOCITY_EXCEEDED, RATE_LIMITED, INSUFFICIENT_BALANCE, AGENT_KILLED) and details."
    }
  )

  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const capabilities = await configuredCapabilities(backend)
    if (!Array.isArray(capabilities)) {
      const answer = capabilities as ApiAnswer
      throw new Error(`Spendgate refused to list capabilities (HTTP ${answer.status}): ${JSON.stringify(answer.body).slice(0, 500)}`)
    }
    const allowed = await allowedCapabilities(backend, capabilities)
    return { tools: [...allowed.map(capabilityTool), walletBalanceTool, listTransactionsTool, estimateCostTool(capabilities)] }
  })

  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    const name = request.params.name
    const args = (request.params.arguments ?? {}) as JsonObject
    try {
      if (name === walletBalanceTool.name) return answerOf(await backend.get("/v1/wallet"))
      if (name === listTransactionsTool.name) {
        const path = transactionsPath(args)
        return typeof path === "string" ? answerOf(await backend.get(path)) : path
      }
      if (name === "estimate_cost") {
        const capability = args["capability"]
        const input = args["input"]
        if (typeof capability !== "string" || !isCapability(capability)) return badArguments("capability must be a capability name")
        if (typeof input !== "object" || input === null || Array.isArray(input)) return badArguments("input must be an object")
        // A report, not the call: a refusal is in the answer (allowed: false), not a tool error.
        return answerOf(await backend.post(`/v1/capabilities/${capability}/estimate`, withoutNulls(input as JsonObject)))
      }
      if (isCapability(name)) return answerOf(await backend.post(`/v1/capabilities/${name}`, withoutNulls(args)))
      return badArguments(`Unknown tool ${JSON.stringify(name.slice(0, 64))}`)
    } catch (cause) {
      return {
        isError: true,
        content: text({
          error: { code: "GATEWAY_UNREACHABLE", message: `Spendgate did not answer: ${cause instanceof Error ? cause.message : String(cause)}` }
        })
      }
    }
  })

  return server
}
