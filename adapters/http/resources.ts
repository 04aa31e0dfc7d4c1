import { Schema } from "effect"
import { KillReason, Role } from "../../src/domain/Agent.ts"

/** Resource shapes shared by several groups of the contract. */

const Timestamp = Schema.String.annotate({ description: "ISO 8601 timestamp (UTC)" })

export const AgentResponse = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  role: Role,
  killed: Schema.Boolean,
  killReason: Schema.NullOr(KillReason).annotate({
    description: "Why the agent is killed: `owner` (PATCH killed: true) or `velocity` (its policy's autoKill); null when not killed"
  }),
  createdAt: Timestamp,
  lastActiveAt: Schema.NullOr(Timestamp),
  deletedAt: Schema.NullOr(Timestamp).annotate({
    description: "When the agent was deleted (its keys no longer work); null while it exists"
  })
})
