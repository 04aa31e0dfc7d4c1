import { registryOnly } from "../../adapters/services/transport.ts"
/**
 * A gateway process that holds money for a call and is then killed (by the
 * test) while the upstream call is still running. Reads DATABASE_URL.
 */
import { Effect, Layer, Option, Redacted } from "effect"
import { storeLayer } from "../../adapters/sql/Database.ts"
import { devRails } from "../../adapters/rails/dev.ts"
import { Agents } from "../../src/agents/Agents.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import * as Gateway from "../../src/Gateway.ts"
import { RateSource } from "../../src/ports/RateSource.ts"
import { Spend } from "../../src/wallet/Spend.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"

const url = process.env["DATABASE_URL"]
if (url === undefined) throw new Error("DATABASE_URL is required")

const program = Effect.gen(function*() {
  const agents = yield* Agents
  const wallets = yield* Wallets
  const spend = yield* Spend
  const signup = yield* agents.signup({ name: "crash" })
  const owner = yield* agents.authenticate(signup.apiKey)
  yield* wallets.credit({ accountId: signup.accountId, key: "seed", pocket: "usd", amount: 1_000_000n, description: "seed" })
  console.log(JSON.stringify({ accountId: signup.accountId, agentId: owner.agent.id }))
  yield* spend.spend(owner, {
    capability: "search",
    provider: "slow",
    quotedMicroUsd: 400_000n,
    description: "never finishes",
    run: Effect.sync(() => console.log("HOLDING")).pipe(Effect.andThen(Effect.never))
  })
})

Effect.runPromise(
  program.pipe(
    Effect.provide(
      Gateway.layer.pipe(
        Layer.provide([
          storeLayer({ databaseUrl: Option.some(Redacted.make(url)), dataDir: undefined }),
          RateSource.none,
          Providers.make([]), registryOnly,
          devRails({ dataDir: undefined, publicUrl: "http://spendgate.test" })
        ])
      )
    )
  )
)
