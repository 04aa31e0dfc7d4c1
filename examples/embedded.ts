/**
 * Embedding Spendgate in-process: no HTTP server, the core services called
 * directly from your own agent runtime. Storage here is the in-memory store;
 * swap `Spendgate.memory()` for `Spendgate.pglite("./data")` or
 * `Spendgate.postgres("postgres://…")` to keep the data.
 *
 * Run: npm run example
 */
import { Effect } from "effect"
import { Agents, Policies, Spend, Spendgate, Wallets } from "spendgate"

const program = Effect.gen(function*() {
  const agents = yield* Agents
  const policies = yield* Policies

  // An account with its owner agent; the key is shown once.
  const account = yield* agents.signup({ name: "operator" })
  const owner = yield* agents.authenticate(account.apiKey)
  console.log(`account ${account.accountId}, owner ${owner.agent.id}`)

  // A worker agent with a per-call cap of 5 cents, 2 dollars a day, search only.
  const worker = yield* agents.create(owner, { name: "research-bot" })
  const policy = yield* policies.replace(owner, worker.agent.id, {
    maxPerCallMicroUsd: 50_000n,
    maxPerDayMicroUsd: 2_000_000n,
    allowedCapabilities: ["search"]
  })
  console.log(`worker ${worker.agent.id} policy:`, {
    maxPerCallMicroUsd: String(policy.maxPerCallMicroUsd),
    maxPerDayMicroUsd: String(policy.maxPerDayMicroUsd),
    allowedCapabilities: policy.allowedCapabilities
  })

  // The worker authenticates with its own key...
  const asWorker = yield* agents.authenticate(worker.apiKey)
  console.log(`worker authenticated as ${asWorker.agent.name} (${asWorker.agent.role})`)

  // The account wallet is funded (funding rails call this), and the worker buys
  // something: quoted at 3 cents, the upstream reports 1.25 cents, 1.25 is charged.
  const wallets = yield* Wallets
  yield* wallets.credit({ accountId: account.accountId, key: "first-funding", pocket: "usd", amount: 1_000_000n, description: "funding" })
  const spend = yield* Spend
  const { value, receipt } = yield* spend.spend(asWorker, {
    capability: "search",
    provider: "example",
    quotedMicroUsd: 30_000n,
    description: "one search",
    run: Effect.succeed({ value: ["result"], actualMicroUsd: 12_500n })
  })
  console.log(`search returned ${value.length} result(s); charged ${receipt.chargedMicroUsd} µUSD of ${receipt.quotedMicroUsd} quoted; receipt ${receipt.auditId}; balance ${receipt.balanceAfterMicroUsd} µUSD`)

  // ...cannot change its own policy...
  const refused = yield* Effect.flip(policies.patch(asWorker, worker.agent.id, { maxPerDayMicroUsd: null }))
  console.log(`worker changing its own policy: ${refused.code}`)

  // ...and is stopped at once by the kill switch.
  yield* agents.update(owner, worker.agent.id, { killed: true })
  const killed = yield* Effect.flip(agents.authenticate(worker.apiKey))
  console.log(`after the kill switch: ${killed.code}`)
  if (killed.code !== "AGENT_KILLED" || refused.code !== "FORBIDDEN" || receipt.chargedMicroUsd !== 12_500n) {
    return yield* Effect.die("unexpected outcome")
  }
})

Effect.runPromise(program.pipe(Effect.provide(Spendgate.memory()))).then(
  () => console.log("ok"),
  (error) => {
    console.error(error)
    process.exitCode = 1
  }
)
