/**
 * Run by closed-store-exits.test.ts as a process of its own: a SQL store on
 * in-memory PGlite with one settle the database keeps refusing, closed while
 * the settle's retry pause (6.4 s after its 7th refusal) is still running.
 * Prints one line per step; after "closed" nothing of the store may keep the
 * process alive, so it must end by itself at once (no process.exit here).
 */
import { Effect, Exit, Layer, Result, Scope } from "effect"
import * as DevCard from "../../../adapters/rails/DevCard.ts"
import * as DevLightning from "../../../adapters/rails/DevLightning.ts"
import { registryOnly } from "../../../adapters/services/transport.ts"
import { storeOverClientWith } from "../../../adapters/sql/Database.ts"
import * as PgliteClient from "../../../adapters/sql/PgliteClient.ts"
import { Agents } from "../../../src/agents/Agents.ts"
import { Providers } from "../../../src/capabilities/Capabilities.ts"
import { parseBtcUsdRate } from "../../../src/domain/Money.ts"
import * as Gateway from "../../../src/Gateway.ts"
import { RateSource } from "../../../src/ports/RateSource.ts"
import { Spend } from "../../../src/wallet/Spend.ts"
import { Wallets } from "../../../src/wallet/Wallets.ts"
import { refuseCharges } from "../../support/chargeFaults.ts"

const CENT = 10_000n
const REFUSALS = Number(process.argv[2] ?? "7")

const layer = Gateway.layer.pipe(Layer.provideMerge(Layer.mergeAll(
  storeOverClientWith({ settleRetryMaxPauseMs: 60_000, settleShutdownTimeoutMs: 300 }),
  RateSource.fixed(Result.getOrThrow(parseBtcUsdRate("50000"))),
  DevLightning.layer({ dataDir: undefined }),
  DevCard.layer({ publicUrl: "http://spendgate.test" }),
  Providers.make([]),
  registryOnly
)), Layer.provideMerge(PgliteClient.layer({ dataDir: undefined })))

const say = (line: string) => Effect.sync(() => process.stdout.write(`${line}\n`))

const program = Effect.gen(function*() {
  const scope = yield* Scope.make()
  const context = yield* Layer.buildWithScope(layer, scope)
  yield* Effect.gen(function*() {
    const agents = yield* Agents
    const signup = yield* agents.signup({ name: "owner" })
    const owner = yield* agents.authenticate(signup.apiKey)
    yield* (yield* Wallets).credit({ accountId: signup.accountId, key: "seed", pocket: "usd", amount: 100n * CENT, description: "seed" })
    // Every charge is refused.
    const fault = yield* refuseCharges("refuse_charges")
    yield* (yield* Spend).spend(owner, {
      capability: "search",
      provider: "test",
      quotedMicroUsd: 10n * CENT,
      description: "test call",
      run: Effect.succeed({ value: "ok", actualMicroUsd: 4n * CENT })
    })
    // Refused REFUSALS times: by then a retry pause of its longest, 6.4 s (50 ms × 2^7), has begun.
    while ((yield* fault.refusals) < REFUSALS) yield* Effect.sleep("20 millis")
    yield* say(`refused ${REFUSALS}`)
  }).pipe(Effect.provide(context))
  yield* Scope.close(scope, Exit.void)
  yield* say("closed")
})

Effect.runPromise(program).catch((error: unknown) => {
  process.stderr.write(`${String(error)}\n`)
  process.exitCode = 1
})
