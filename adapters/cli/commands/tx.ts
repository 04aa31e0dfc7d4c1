import { Effect, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { emit, field, request, table, withKey } from "../client.ts"

const ls = Command.make("ls", {
  ...withKey,
  type: Flag.Literals("type", ["charge", "credit", "refund"]).pipe(Flag.withDescription("Only this type"), Flag.optional),
  agent: Flag.String("agent").pipe(Flag.withDescription("Only this agent's (agt_…)"), Flag.optional),
  startDate: Flag.String("start-date").pipe(Flag.withDescription("From this UTC day (YYYY-MM-DD)"), Flag.optional),
  endDate: Flag.String("end-date").pipe(Flag.withDescription("Up to this UTC day, included (YYYY-MM-DD)"), Flag.optional),
  limit: Flag.Int("limit").pipe(Flag.withDescription("1-100 (server default 50)"), Flag.optional),
  offset: Flag.Int("offset").pipe(Flag.withDescription("Rows to skip"), Flag.optional)
}, (input) =>
  Effect.gen(function*() {
    const body = (yield* request({ url: input.url, key: input.key }, "/v1/wallet/transactions", {
      auth: "key",
      query: {
        type: Option.getOrUndefined(input.type),
        agentId: Option.getOrUndefined(input.agent),
        startDate: Option.getOrUndefined(input.startDate),
        endDate: Option.getOrUndefined(input.endDate),
        limit: Option.getOrUndefined(input.limit),
        offset: Option.getOrUndefined(input.offset)
      }
    })) as { transactions: ReadonlyArray<Record<string, unknown>>; total: number; offset: number }
    yield* emit(input.json, body, () =>
      table(
        ["created", "type", "usd cents", "sats", "agent", "capability", "audit id", "description"],
        body.transactions.map((t) => [
          field(t, "createdAt"),
          field(t, "type"),
          field(t, "amountUsdCents"),
          field(t, "amountSats"),
          field(t, "agentId"),
          field(t, "capability"),
          field(t, "auditId"),
          field(t, "description")
        ])
      ) + `\n${body.transactions.length} of ${body.total} (from ${body.offset})`)
  })).pipe(Command.withDescription("List the ledger's transactions, newest first, with the API's filters"))

/** `spendgate tx …`: the wallet's ledger. */
export const tx = Command.make("tx").pipe(
  Command.withDescription("Transactions: ls"),
  Command.withSubcommands([ls])
)
