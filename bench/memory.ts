/**
 * The embedded memory store (`Spendgate.memory`, the testing kit) as its
 * history grows: calls through the core's spend pipeline (hold, a no-op
 * upstream, settle), one after another, in blocks; prints each block's mean
 * time per call. Asserts nothing.
 *
 *   npm run bench:memory                          # this checkout
 *   npm run bench:memory -- --against=../other    # and another checkout, block for block
 *   npm run bench:memory -- --limit=1000          # an agent with an hourly limit ($1,000)
 *
 * Options (flag or environment variable):
 *   --calls=N     BENCH_CALLS     calls a checkout (default 40000)
 *   --block=N     BENCH_BLOCK     calls a block (default 5000)
 *   --limit=D     BENCH_LIMIT     the calling agent's hourly limit in dollars; 0: none, the account's owner calls (default 0)
 *   --against=DIR BENCH_AGAINST   a second checkout, its modules loaded from there, its blocks alternated with this one's
 */
import { resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { option, wholeNumber } from "./options.ts"

const whole = (name: string, text: string, min: number) => wholeNumber("bench:memory", name, text, min)

const calls = whole("calls", option("calls", "BENCH_CALLS", "40000"), 1)
const block = whole("block", option("block", "BENCH_BLOCK", "5000"), 1)
const limitDollars = whole("limit", option("limit", "BENCH_LIMIT", "0"), 0)
const against = option("against", "BENCH_AGAINST", "")
const roots = [resolve(import.meta.dirname, ".."), ...(against === "" ? [] : [resolve(against)])]

/** A gateway over a fresh memory store, built from the modules of the checkout at `root`, and its one call. */
const gatewayOf = async (root: string) => {
  const load = (path: string) => import(pathToFileURL(resolve(root, path)).href)
  const [{ Effect, Layer, ManagedRuntime }, MemoryStore, { registryOnly }, { devRails }, { Agents }, { Policies }, { Providers }, Gateway, {
    RateSource
  }, { Spend }, { Wallets }] = await Promise.all([
    import("effect"),
    load("adapters/memory/MemoryStore.ts"),
    load("adapters/services/transport.ts"),
    load("adapters/rails/dev.ts"),
    load("src/agents/Agents.ts"),
    load("src/agents/Policies.ts"),
    load("src/capabilities/Capabilities.ts"),
    load("src/Gateway.ts"),
    load("src/ports/RateSource.ts"),
    load("src/wallet/Spend.ts"),
    load("src/wallet/Wallets.ts")
  ])
  const runtime = ManagedRuntime.make(Gateway.layer.pipe(
    Layer.provide(RateSource.none),
    Layer.provide([Providers.make([]), registryOnly]),
    Layer.provide(devRails({ dataDir: undefined, publicUrl: "http://127.0.0.1" })),
    Layer.provide(MemoryStore.layer)
  ))
  const principal = await runtime.runPromise(Effect.gen(function*() {
    const agents = yield* Agents
    const wallets = yield* Wallets
    const signup = yield* agents.signup({ name: "bench" })
    const owner = yield* agents.authenticate(signup.apiKey)
    yield* wallets.credit({ accountId: signup.accountId, key: "bench", pocket: "usd", amount: 1_000_000_000_000n, description: "bench" })
    if (limitDollars === 0) return owner
    const created = yield* agents.create(owner, { name: "limited" })
    yield* (yield* Policies).patch(owner, created.agent.id, { maxPerHourMicroUsd: BigInt(limitDollars) * 1_000_000n })
    return yield* agents.authenticate(created.apiKey)
  }))
  const run = (count: number) =>
    runtime.runPromise(Effect.gen(function*() {
      const spend = yield* Spend
      for (let i = 0; i < count; i++) {
        yield* spend.spend(principal, {
          capability: "search",
          provider: "bench",
          quotedMicroUsd: 100n,
          description: "bench",
          run: Effect.succeed({ value: undefined, actualMicroUsd: 50n })
        })
      }
    }))
  return { root, run, dispose: () => runtime.dispose(), blocks: [] as Array<number> }
}

console.log(
  `Spendgate memory store benchmark: ${calls} calls a checkout in blocks of ${block}, one agent, ` +
    `hourly limit ${limitDollars === 0 ? "none" : `$${limitDollars}`}, node ${process.version}`
)
const sides = []
for (const root of roots) sides.push(await gatewayOf(root))
try {
  for (let done = 0, b = 0; done < calls; b++) {
    const size = Math.min(block, calls - done)
    // Alternate which checkout goes first.
    for (const side of b % 2 === 0 ? sides : [...sides].reverse()) {
      const started = performance.now()
      await side.run(size)
      side.blocks.push(((performance.now() - started) / size) * 1000)
    }
    done += size
    console.log(`after ${done} calls: ` + sides.map((s) => `${s.root}: ${s.blocks[s.blocks.length - 1]!.toFixed(0)} µs a call`).join(" | "))
  }
} finally {
  for (const side of sides) await side.dispose()
}
