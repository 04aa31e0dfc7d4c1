import { Schema } from "effect"
import { microUsdToCents } from "./Money.ts"

/**
 * Every expected failure of the core is one of these tagged errors. Each
 * carries the stable `code` of the error table (docs/errors.md); the HTTP
 * adapter maps a code to exactly one status. Defects (bugs, storage outages)
 * are not errors: they surface as INTERNAL.
 */

export interface ValidationIssue {
  readonly path: string
  readonly message: string
}

export class ValidationError extends Schema.TaggedError<ValidationError>()("ValidationError", {
  message: Schema.String,
  issues: Schema.Array(Schema.Struct({ path: Schema.String, message: Schema.String }))
}) {
  readonly code = "VALIDATION_ERROR"
  get details() {
    return { issues: this.issues }
  }
}

export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", {
  message: Schema.String
}) {
  readonly code = "UNAUTHORIZED"
}

export class AgentKilled extends Schema.TaggedError<AgentKilled>()("AgentKilled", {}) {
  readonly code = "AGENT_KILLED"
  override get message() {
    return "This agent has been disabled by its kill switch"
  }
}

export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", {
  message: Schema.String
}) {
  readonly code = "FORBIDDEN"
}

export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", {
  resource: Schema.String
}) {
  readonly code = "NOT_FOUND"
  override get message() {
    return `${this.resource} not found`
  }
}

export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", {
  message: Schema.String
}) {
  readonly code = "CONFLICT"
}

/**
 * A model no price card prices: the gateway cannot bound what a call to it
 * costs, so it refuses the call (400) before anything is held. The message
 * names the model and how an operator prices it (an entry in the price file).
 */
export class ModelNotPriced extends Schema.TaggedError<ModelNotPriced>()("ModelNotPriced", {
  model: Schema.String,
  /** The provider or service asked for, when the call named one. */
  provider: Schema.optional(Schema.String)
}) {
  readonly code = "MODEL_NOT_PRICED"
  override get message() {
    const model = JSON.stringify(this.model.slice(0, 200))
    const where = this.provider === undefined ? "no price card" : `the price card of "${this.provider}"`
    const card = this.provider ?? "<provider>"
    return `Model ${model} is not priced: ${where} lists it. An operator prices it by adding it to the price file ` +
      `(PRICES_FILE, laid over config/prices.json by provider name): "${card}": { "capability": "reason", "models": [{ "id": ${model}, ` +
      `"inputPer1kUsdCents": …, "outputPer1kUsdCents": …, "maxTokens": …, "defaultMaxTokens": … }] }`
  }
  get details() {
    return this.provider === undefined ? { model: this.model.slice(0, 200) } : { model: this.model.slice(0, 200), provider: this.provider }
  }
}

/** The errors an authenticated core operation on agents and policies can end in. */
export type AccessError = Unauthorized | AgentKilled | Forbidden | NotFound

/** The daily cap would be exceeded by the quoted cost (amounts in micro-dollars). */
export class BudgetExceeded extends Schema.TaggedError<BudgetExceeded>()("BudgetExceeded", {
  dailySpentMicroUsd: Schema.BigInt,
  dailyCapMicroUsd: Schema.BigInt,
  quotedMicroUsd: Schema.BigInt
}) {
  readonly code = "BUDGET_EXCEEDED"
  override get message() {
    return "The daily spend cap would be exceeded by this call"
  }
  get details() {
    return {
      period: "day",
      dailySpent: microUsdToCents(this.dailySpentMicroUsd),
      dailyCap: microUsdToCents(this.dailyCapMicroUsd),
      quotedCost: microUsdToCents(this.quotedMicroUsd)
    }
  }
}

/**
 * The monthly cap (calendar month, UTC) would be exceeded by the quoted cost:
 * the same code as the daily cap, `details.period` tells them apart.
 */
export class MonthlyBudgetExceeded extends Schema.TaggedError<MonthlyBudgetExceeded>()("MonthlyBudgetExceeded", {
  monthlySpentMicroUsd: Schema.BigInt,
  monthlyCapMicroUsd: Schema.BigInt,
  quotedMicroUsd: Schema.BigInt
}) {
  readonly code = "BUDGET_EXCEEDED"
  override get message() {
    return "The monthly spend cap would be exceeded by this call"
  }
  get details() {
    return {
      period: "month",
      monthlySpent: microUsdToCents(this.monthlySpentMicroUsd),
      monthlyCap: microUsdToCents(this.monthlyCapMicroUsd),
      quotedCost: microUsdToCents(this.quotedMicroUsd)
    }
  }
}

/**
 * The hourly money limit (`maxPerHourUsdCents`, rolling 60 minutes) would be
 * exceeded by the quoted cost. `killsAgent`: the policy's `autoKill` killed
 * the agent with this refusal.
 */
export class VelocityExceeded extends Schema.TaggedError<VelocityExceeded>()("VelocityExceeded", {
  spentLastHourMicroUsd: Schema.BigInt,
  hourlyCapMicroUsd: Schema.BigInt,
  quotedMicroUsd: Schema.BigInt,
  killsAgent: Schema.Boolean
}) {
  readonly code = "VELOCITY_EXCEEDED"
  override get message() {
    return this.killsAgent
      ? "The hourly spend limit would be exceeded by this call; the agent has been killed (autoKill)"
      : "The hourly spend limit would be exceeded by this call"
  }
  get details() {
    return {
      period: "hour",
      spentLastHour: microUsdToCents(this.spentLastHourMicroUsd),
      hourlyCap: microUsdToCents(this.hourlyCapMicroUsd),
      quotedCost: microUsdToCents(this.quotedMicroUsd),
      agentKilled: this.killsAgent
    }
  }
}

/**
 * The agent started `maxCallsPerMinute` calls in the last 60 seconds: 429
 * RATE_LIMITED with scope `policy`; the next call may start at `resetAt`.
 */
export class CallRateExceeded extends Schema.TaggedError<CallRateExceeded>()("CallRateExceeded", {
  limit: Schema.Number,
  resetAt: Schema.Date,
  retryAfterSeconds: Schema.Number,
  killsAgent: Schema.Boolean
}) {
  readonly code = "RATE_LIMITED"
  override get message() {
    return this.killsAgent
      ? `This agent's policy allows ${this.limit} calls a minute; the agent has been killed (autoKill)`
      : `This agent's policy allows ${this.limit} calls a minute; retry in ${this.retryAfterSeconds} s`
  }
  get details() {
    return { scope: "policy", limit: this.limit, resetAt: this.resetAt.toISOString(), agentKilled: this.killsAgent }
  }
}

export class PerCallLimitExceeded extends Schema.TaggedError<PerCallLimitExceeded>()("PerCallLimitExceeded", {
  perCallCapMicroUsd: Schema.BigInt,
  quotedMicroUsd: Schema.BigInt
}) {
  readonly code = "PER_CALL_LIMIT_EXCEEDED"
  override get message() {
    return "The quoted cost is above this agent's per-call cap"
  }
  get details() {
    return { perCallCap: microUsdToCents(this.perCallCapMicroUsd), quotedCost: microUsdToCents(this.quotedMicroUsd) }
  }
}

export class InsufficientBalance extends Schema.TaggedError<InsufficientBalance>()("InsufficientBalance", {
  balanceMicroUsd: Schema.BigInt,
  quotedMicroUsd: Schema.BigInt
}) {
  readonly code = "INSUFFICIENT_BALANCE"
  override get message() {
    return "The wallet cannot cover the quoted cost"
  }
  get details() {
    return { balance: microUsdToCents(this.balanceMicroUsd), quotedCost: microUsdToCents(this.quotedMicroUsd) }
  }
}

export class CapabilityNotAllowed extends Schema.TaggedError<CapabilityNotAllowed>()("CapabilityNotAllowed", {
  capability: Schema.String,
  allowedCapabilities: Schema.Array(Schema.String)
}) {
  readonly code = "CAPABILITY_NOT_ALLOWED"
  override get message() {
    return `This agent may not use the capability "${this.capability}"`
  }
  get details() {
    return { capability: this.capability, allowedCapabilities: this.allowedCapabilities }
  }
}

/** The sats pocket would be needed but no fresh BTC/USD rate is known. */
export class RateUnavailable extends Schema.TaggedError<RateUnavailable>()("RateUnavailable", {}) {
  readonly code = "RATE_UNAVAILABLE"
  override get message() {
    return "No current BTC/USD rate: the sats pocket cannot pay for this call right now"
  }
}

/** Why the spend pipeline refused to hold money for a call. */
export type SpendRefusal =
  | AgentKilled
  | BudgetExceeded
  | MonthlyBudgetExceeded
  | VelocityExceeded
  | CallRateExceeded
  | PerCallLimitExceeded
  | InsufficientBalance
  | CapabilityNotAllowed
  | RateUnavailable

/**
 * A funding amount the rails cannot take (below the minimum, above the maximum,
 * fractional cents or sats, non-positive). `minimum` / `maximum` are in the
 * request's own unit (cents or sats).
 */
export class InvalidAmount extends Schema.TaggedError<InvalidAmount>()("InvalidAmount", {
  message: Schema.String,
  minimum: Schema.optional(Schema.Number),
  maximum: Schema.optional(Schema.Number)
}) {
  readonly code = "INVALID_AMOUNT"
  get details() {
    if (this.minimum === undefined && this.maximum === undefined) return undefined
    return {
      ...(this.minimum === undefined ? {} : { minimum: this.minimum }),
      ...(this.maximum === undefined ? {} : { maximum: this.maximum })
    }
  }
}

/**
 * A refund larger than what is left of the charge (its amount minus what
 * earlier refunds gave back). `remainingMicroUsd` is what may still be
 * refunded (0 once the charge is fully refunded).
 */
export class RefundExceedsCharge extends Schema.TaggedError<RefundExceedsCharge>()("RefundExceedsCharge", {
  chargedMicroUsd: Schema.BigInt,
  refundedMicroUsd: Schema.BigInt,
  remainingMicroUsd: Schema.BigInt,
  requestedMicroUsd: Schema.BigInt
}) {
  readonly code = "REFUND_EXCEEDS_CHARGE"
  override get message() {
    return this.remainingMicroUsd === 0n
      ? "This charge has already been refunded in full"
      : "The refund is larger than what remains of the charge"
  }
  get details() {
    return {
      charged: microUsdToCents(this.chargedMicroUsd),
      refunded: microUsdToCents(this.refundedMicroUsd),
      remaining: microUsdToCents(this.remainingMicroUsd),
      requested: microUsdToCents(this.requestedMicroUsd)
    }
  }
}

/** Only a `charge` can be refunded: a credit or a refund cannot. */
export class NotRefundable extends Schema.TaggedError<NotRefundable>()("NotRefundable", {
  type: Schema.String
}) {
  readonly code = "CONFLICT"
  override get message() {
    return `Only a charge can be refunded; this transaction is a ${this.type}`
  }
  get details() {
    return { type: this.type }
  }
}

/** The refund would take a wallet pocket above its maximum (see `pocketMaximum`); nothing changed. */
export class RefundPocketFull extends Schema.TaggedError<RefundPocketFull>()("RefundPocketFull", {}) {
  readonly code = "CONFLICT"
  override get message() {
    return "The refund would take a wallet pocket above its maximum"
  }
}

export type RefundRefusal = RefundExceedsCharge | NotRefundable | RefundPocketFull
