import { Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { emit, field, request, table, usage, withKey } from "../client.ts"

const idArgument = Argument.String("agentId").pipe(Argument.withDescription("The agent's id (agt_…)"))

const paging = {
  limit: Flag.Int("limit").pipe(Flag.withDescription("1-100 (server default 50)"), Flag.optional),
  offset: Flag.Int("offset").pipe(Flag.withDescription("Rows to skip"), Flag.optional)
}

const agentLines = (agent: unknown): string =>
  table(["id", "name", "role", "killed", "created"], [[
    field(agent, "id"),
    field(agent, "name"),
    field(agent, "role"),
    field(agent, "killed") === "true" ? `yes (${field(agent, "killReason")})` : "no",
    field(agent, "createdAt")
  ]])

const ls = Command.make("ls", { ...withKey, ...paging }, ({ json, key, limit, offset, url }) =>
  Effect.gen(function*() {
    const body = (yield* request({ url, key }, "/v1/agents", {
      auth: "key",
      query: { limit: Option.getOrUndefined(limit), offset: Option.getOrUndefined(offset) }
    })) as { agents: ReadonlyArray<unknown>; total: number; offset: number }
    yield* emit(json, body, () =>
      table(
        ["id", "name", "role", "killed", "last active"],
        body.agents.map((agent) => [
          field(agent, "id"),
          field(agent, "name"),
          field(agent, "role"),
          field(agent, "killed") === "true" ? "yes" : "no",
          field(agent, "lastActiveAt")
        ])
      ) + `\n${body.agents.length} of ${body.total} (from ${body.offset})`)
  })).pipe(Command.withDescription("List the account's agents (owners)"))

const create = Command.make("create", {
  ...withKey,
  name: Flag.String("name").pipe(Flag.withDescription("The new agent's name")),
  role: Flag.Literals("role", ["agent", "owner"]).pipe(Flag.withDescription("Role (default agent)"), Flag.optional)
}, ({ json, key, name, role, url }) =>
  Effect.gen(function*() {
    const body = yield* request({ url, key }, "/v1/agents", {
      auth: "key",
      body: Option.isSome(role) ? { name, role: role.value } : { name }
    })
    yield* emit(json, body, () =>
      `${agentLines(body)}\nkey  ${field(body, "apiKey")}\nThe key is shown once: store it now.`)
  })).pipe(Command.withDescription("Create an agent (owners); prints its API key once"))

const setKilled = (name: "kill" | "revive", killed: boolean, description: string) =>
  Command.make(name, { ...withKey, id: idArgument }, ({ id, json, key, url }) =>
    Effect.gen(function*() {
      const body = yield* request({ url, key }, `/v1/agents/${encodeURIComponent(id)}`, {
        method: "PATCH",
        auth: "key",
        body: { killed }
      })
      yield* emit(json, body, () => agentLines(body))
    })).pipe(Command.withDescription(description))

const kill = setKilled("kill", true, "Throw an agent's kill switch: every call with its key is refused at once (owners)")
const revive = setKilled("revive", false, "Lift an agent's kill switch (owners)")

/** A cap flag's text: a number of cents, or `none` (no limit, sent as null). */
const parseCap = (flag: string, text: string, integer: boolean): Effect.Effect<number | null, ReturnType<typeof usage>> => {
  if (text === "none") return Effect.succeed(null)
  const value = Number(text)
  if (text.trim() === "" || !Number.isFinite(value) || value < 0 || (integer && !Number.isInteger(value))) {
    return Effect.fail(usage(`--${flag} must be ${integer ? "a whole number" : "a number of cents"} >= 0, or none (no limit); got ${JSON.stringify(text)}`))
  }
  return Effect.succeed(value)
}

const capFlag = (name: string, what: string) =>
  Flag.String(name).pipe(Flag.withDescription(`${what}; "none" for no limit`), Flag.withMetavar("cents|none"), Flag.optional)

const policy = Command.make("policy", {
  ...withKey,
  id: idArgument,
  maxPerCall: capFlag("max-per-call", "USD cents per call"),
  maxPerDay: capFlag("max-per-day", "USD cents per UTC day"),
  maxPerMonth: capFlag("max-per-month", "USD cents per calendar month (UTC)"),
  maxPerHour: capFlag("max-per-hour", "USD cents over the last 60 minutes"),
  maxCallsPerMinute: Flag.String("max-calls-per-minute").pipe(
    Flag.withDescription("Calls started in the last 60 seconds; \"none\" for no limit"),
    Flag.withMetavar("n|none"),
    Flag.optional
  ),
  autoKill: Flag.Literals("auto-kill", ["on", "off"]).pipe(
    Flag.withDescription("A call past a velocity limit also kills the agent"),
    Flag.optional
  ),
  allow: Flag.String("allow").pipe(
    Flag.withDescription("Comma-separated capabilities the agent may use, or \"all\""),
    Flag.withMetavar("cap,cap|all"),
    Flag.optional
  ),
  replace: Flag.Boolean("replace").pipe(
    Flag.withDescription("Replace the whole policy (PUT): --max-per-call, --max-per-day and --allow are then required"),
    Flag.withDefault(false)
  )
}, (input) =>
  Effect.gen(function*() {
    const changes: Record<string, unknown> = {}
    const caps = [
      ["maxPerCallUsdCents", "max-per-call", input.maxPerCall, false],
      ["maxPerDayUsdCents", "max-per-day", input.maxPerDay, false],
      ["maxPerMonthUsdCents", "max-per-month", input.maxPerMonth, false],
      ["maxPerHourUsdCents", "max-per-hour", input.maxPerHour, false],
      ["maxCallsPerMinute", "max-calls-per-minute", input.maxCallsPerMinute, true]
    ] as const
    for (const [field, flag, value, integer] of caps) {
      if (Option.isSome(value)) changes[field] = yield* parseCap(flag, value.value, integer)
    }
    if (Option.isSome(input.autoKill)) changes["autoKill"] = input.autoKill.value === "on"
    if (Option.isSome(input.allow)) {
      const text = input.allow.value.trim()
      const caps = text.split(",").map((cap) => cap.trim()).filter((cap) => cap !== "")
      // An empty list means "all" to the API: say it with "all", never by accident.
      if (text !== "all" && caps.length === 0) {
        return yield* usage("--allow needs capabilities (e.g. search,read), or all")
      }
      changes["allowedCapabilities"] = text === "all" ? [] : caps
    }
    const path = `/v1/agents/${encodeURIComponent(input.id)}/policy`
    const connection = { url: input.url, key: input.key }
    let body: unknown
    if (input.replace) {
      const missing = [
        ["maxPerCallUsdCents", "--max-per-call"],
        ["maxPerDayUsdCents", "--max-per-day"],
        ["allowedCapabilities", "--allow"]
      ].filter(([field]) => !(field! in changes)).map(([, flag]) => flag)
      if (missing.length > 0) {
        return yield* usage(`--replace sets the whole policy: also give ${missing.join(", ")} (use none / all for no limit)`)
      }
      body = yield* request(connection, path, { method: "PUT", auth: "key", body: changes })
    } else if (Object.keys(changes).length > 0) {
      body = yield* request(connection, path, { method: "PATCH", auth: "key", body: changes })
    } else {
      body = yield* request(connection, path, { auth: "key" })
    }
    const cents = (name: string) => {
      const value = field(body, name)
      return value === "0" ? "no limit" : `${value} cents`
    }
    yield* emit(input.json, body, () => {
      const allowed = (body as { allowedCapabilities?: ReadonlyArray<string> }).allowedCapabilities ?? []
      const calls = field(body, "maxCallsPerMinute")
      return [
        `per call         ${cents("maxPerCallUsdCents")}`,
        `per day          ${cents("maxPerDayUsdCents")} (spent today ${field(body, "dailySpentUsdCents")})`,
        `per month        ${cents("maxPerMonthUsdCents")} (spent this month ${field(body, "monthlySpentUsdCents")})`,
        `per hour         ${cents("maxPerHourUsdCents")}`,
        `calls per min    ${calls === "0" ? "no limit" : calls}`,
        `auto-kill        ${field(body, "autoKill") === "true" ? "on" : "off"}`,
        `capabilities     ${allowed.length === 0 ? "all" : allowed.join(", ")}`
      ].join("\n")
    })
  })).pipe(
    Command.withDescription(
      "Show an agent's policy, or change it: the flags given are changed (PATCH), or with --replace the whole policy is set (PUT)"
    )
  )

/** `spendgate agents …`: the account's agents, kill switches and policies. */
export const agents = Command.make("agents").pipe(
  Command.withDescription("Agents: ls, create, kill, revive, policy"),
  Command.withSubcommands([ls, create, kill, revive, policy])
)
