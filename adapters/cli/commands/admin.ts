import { Effect } from "effect"
import { Command, Flag } from "effect/cli"
import { emit, request, table, withAdmin } from "../client.ts"

interface Stats {
  readonly from: string
  readonly until: string
  readonly accounts: number
  readonly agents: { readonly total: number; readonly killed: number; readonly owners: number }
  readonly balances: { readonly usdCents: number; readonly sats: number }
  readonly spend: ReadonlyArray<{ day: string; capability: string; provider: string; calls: number; amountUsdCents: number }>
  readonly funding: ReadonlyArray<{ day: string; pocket: string; credits: number; usdCents: number; sats: number }>
}

const stats = Command.make("stats", {
  ...withAdmin,
  days: Flag.Int("days").pipe(Flag.withDescription("How many days back (1-366; server default 30)"), Flag.optional)
}, ({ adminToken, days, json, url }) =>
  Effect.gen(function*() {
    const body = (yield* request({ url, adminToken }, "/v1/admin/stats", {
      auth: "admin",
      query: { days: days._tag === "Some" ? days.value : undefined }
    })) as Stats
    yield* emit(json, body, () =>
      [
        `period    ${body.from} .. ${body.until}`,
        `accounts  ${body.accounts}`,
        `agents    ${body.agents.total} (${body.agents.owners} owners, ${body.agents.killed} killed)`,
        `balances  ${body.balances.usdCents} cents, ${body.balances.sats} sats`,
        "",
        "spend",
        body.spend.length === 0
          ? "  (none)"
          : table(
            ["day", "capability", "provider", "calls", "usd cents"],
            body.spend.map((s) => [s.day, s.capability, s.provider, String(s.calls), String(s.amountUsdCents)])
          ),
        "",
        "funding",
        body.funding.length === 0
          ? "  (none)"
          : table(
            ["day", "pocket", "credits", "usd cents", "sats"],
            body.funding.map((f) => [f.day, f.pocket, String(f.credits), String(f.usdCents), String(f.sats)])
          )
      ].join("\n"))
  })).pipe(Command.withDescription("Totals across every account: agents, balances, spend and funding by day (ADMIN_TOKEN)"))

/** `spendgate admin …`: the operator's API, with ADMIN_TOKEN. */
export const admin = Command.make("admin").pipe(
  Command.withDescription("Operator commands, with --admin-token or ADMIN_TOKEN"),
  Command.withSubcommands([stats])
)
