/**
 * Wrapping an agent's own paid call. The agent here pays for a completion
 * API of its own (its key, its bill); Spendgate meters each call like a
 * built-in capability: the policy is checked and an upper bound of the cost
 * is held before the upstream is called, the call runs with no lock held,
 * and the hold settles at what the upstream reports it used (or is released
 * when the call fails). The wallet and the receipts show every call.
 *
 * The "upstream" is a small HTTP server started by this file on 127.0.0.1,
 * priced per token and reporting its usage the way hosted model APIs do.
 * A `Provider` (src/capabilities/Provider.ts) passed to
 * `Spendgate.memory({ providers })` is the other way in: it makes the call a
 * catalogue capability that `Capabilities.execute` quotes and runs.
 *
 * Run: npm run example:paid-call
 */
import { Data, Effect } from "effect"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { Agents, Policies, type Principal, Spend, Spendgate, Wallets } from "spendgate"

// ---- the paid upstream: 50 µUSD a token, prompt and completion alike -------

const PRICE_PER_TOKEN_MICRO_USD = 50n
let upstreamCalls = 0

const upstream = createServer((request, response) => {
  let body = ""
  request.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")))
  request.on("end", () => {
    upstreamCalls++
    const { prompt, maxTokens } = JSON.parse(body) as { prompt: string; maxTokens: number }
    if (prompt.includes("overloaded")) {
      response.writeHead(503, { "content-type": "application/json" }).end(JSON.stringify({ error: "overloaded" }))
      return
    }
    const promptTokens = prompt.split(/\s+/).filter((w) => w !== "").length
    const completion = `echo: ${prompt}`.split(/\s+/).slice(0, maxTokens)
    response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({
      text: completion.join(" "),
      usage: { promptTokens, completionTokens: completion.length }
    }))
  })
})

// ---- the agent's own client, as it was before Spendgate -----------------------

class UpstreamFailed extends Data.TaggedError("UpstreamFailed")<{ readonly status: number }> {}

interface Completion {
  readonly text: string
  readonly usage: { readonly promptTokens: number; readonly completionTokens: number }
}

const complete = (baseUrl: string, prompt: string, maxTokens: number) =>
  Effect.gen(function*() {
    const response = yield* Effect.promise(() =>
      fetch(`${baseUrl}/complete`, { method: "POST", body: JSON.stringify({ prompt, maxTokens }) })
    )
    if (!response.ok) return yield* new UpstreamFailed({ status: response.status })
    return (yield* Effect.promise(() => response.json())) as Completion
  })

// ---- the same call, metered --------------------------------------------------

/**
 * Quote: every character of the prompt could be a token, plus `maxTokens`
 * of completion: an upper bound, so the hold always covers the charge.
 * Actual: the tokens the upstream reports, at the same price.
 */
const meteredComplete = (agent: Principal, baseUrl: string, prompt: string, maxTokens: number) =>
  Effect.gen(function*() {
    const spend = yield* Spend
    return yield* spend.spend(agent, {
      capability: "reason",
      provider: "own-completions",
      quotedMicroUsd: BigInt(prompt.length + maxTokens) * PRICE_PER_TOKEN_MICRO_USD,
      description: `completion of ${prompt.length} characters`,
      run: Effect.map(complete(baseUrl, prompt, maxTokens), (completion) => ({
        value: completion.text,
        actualMicroUsd: BigInt(completion.usage.promptTokens + completion.usage.completionTokens) * PRICE_PER_TOKEN_MICRO_USD
      }))
    })
  })

const program = (baseUrl: string) =>
  Effect.gen(function*() {
    const agents = yield* Agents
    const wallets = yield* Wallets
    const account = yield* agents.signup({ name: "operator" })
    const owner = yield* agents.authenticate(account.apiKey)
    yield* wallets.credit({ accountId: account.accountId, key: "funding-1", pocket: "usd", amount: 100_000n, description: "ten cents" })

    // The agent may spend at most 1 cent a call, on `reason` only.
    const worker = yield* agents.create(owner, { name: "writer" })
    yield* (yield* Policies).replace(owner, worker.agent.id, {
      maxPerCallMicroUsd: 10_000n,
      maxPerDayMicroUsd: 50_000n,
      allowedCapabilities: ["reason"]
    })
    const agent = yield* agents.authenticate(worker.apiKey)
    const balance = Effect.map(wallets.get(owner), (wallet) => wallet.spendableMicroUsd)

    // 1. A call: 4 prompt tokens + 5 completion tokens = 450 µUSD, of 2,500 held (30 characters + 20 tokens).
    const { value, receipt } = yield* meteredComplete(agent, baseUrl, "summarise the quarterly report", 20)
    console.log(`answer: ${value}`)
    console.log(`charged ${receipt.chargedMicroUsd} µUSD of ${receipt.quotedMicroUsd} quoted; balance ${receipt.balanceAfterMicroUsd} µUSD; receipt ${receipt.auditId}`)

    // 2. The upstream fails: the hold is released, nothing is charged.
    const before = yield* balance
    const failed = yield* Effect.flip(meteredComplete(agent, baseUrl, "overloaded please", 20))
    const after = yield* balance
    console.log(`upstream failure: ${failed._tag}; balance ${before} -> ${after} µUSD`)

    // 3. A call that could cost more than the per-call cap is refused before the upstream is called.
    const callsBefore = upstreamCalls
    const refused = yield* Effect.flip(meteredComplete(agent, baseUrl, "write a long essay", 500))
    console.log(`over the per-call cap: ${"code" in refused ? refused.code : refused._tag}; upstream called ${upstreamCalls - callsBefore} time(s)`)

    if (
      receipt.chargedMicroUsd !== 450n || receipt.quotedMicroUsd !== 2_500n || receipt.balanceAfterMicroUsd !== 99_550n ||
      failed._tag !== "UpstreamFailed" || before !== after ||
      refused._tag !== "PerCallLimitExceeded" || upstreamCalls !== callsBefore
    ) {
      return yield* Effect.die("unexpected outcome")
    }
  })

const main = Effect.acquireRelease(
  Effect.promise(() => new Promise<string>((resolve) =>
    upstream.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`))
  )),
  () => Effect.promise(() => new Promise<void>((resolve) => upstream.close(() => resolve())))
).pipe(
  Effect.flatMap(program),
  Effect.scoped,
  Effect.provide(Spendgate.memory())
)

Effect.runPromise(main).then(
  () => console.log("ok"),
  (error) => {
    console.error(error)
    process.exitCode = 1
  }
)
