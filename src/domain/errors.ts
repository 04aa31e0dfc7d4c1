import { Schema } from "effect"

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

/** The errors an authenticated core operation on agents and policies can end in. */
export type AccessError = Unauthorized | AgentKilled | Forbidden | NotFound
