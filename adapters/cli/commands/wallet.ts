import { Effect } from "effect"
import { Command } from "effect/cli"
import { emit, field, request, withKey } from "../client.ts"

/** `spendgate wallet`: the account's balances. */
export const wallet = Command.make("wallet", withKey, ({ json, key, url }) =>
  Effect.gen(function*() {
    const body = yield* request({ url, key }, "/v1/wallet", { auth: "key" })
    yield* emit(json, body, () =>
      [
        `account    ${field(body, "accountId")}`,
        `usd        ${field(body, "balanceUsdCents")} cents`,
        `sats       ${field(body, "balanceSats")} sats`,
        `spendable  ${field(body, "spendableUsdCents")} cents`
      ].join("\n"))
  })).pipe(Command.withDescription("Show the wallet: USD and sats pockets, and what can be spent"))
