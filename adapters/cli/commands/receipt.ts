import { Effect } from "effect"
import { Argument, Command } from "effect/cli"
import { CliFailure, EXIT_REFUSED, adminTokenFlag, emit, lazy, withKey } from "../client.ts"

const verify = Command.make("verify", {
  ...withKey,
  adminToken: adminTokenFlag,
  auditId: Argument.String("auditId").pipe(Argument.withDescription("The audit record's id (aud_…), e.g. from tx ls"))
}, ({ adminToken, auditId, json, key, url }) =>
  lazy(() => import("../verifyReceipt.ts"), (receipt) =>
    Effect.gen(function*() {
      const verdict = yield* receipt.verifyReceipt({ url, key, adminToken }, auditId)
      const record = verdict.record as { id: string; seq: number; kind: string; createdAt: string; hash: string }
      yield* emit(json, verdict, () =>
        [
          `record   ${record.id} (seq ${record.seq}, ${record.kind}, ${record.createdAt})`,
          `hash     ${verdict.hash === "ok" ? "ok: recomputed from the record's content" : "MISMATCH: the content does not give this hash"}`,
          `link     ${verdict.link === "ok" || verdict.link === "server-verified" ? "ok" : "BROKEN"}: ${verdict.linkDetail}`,
          verdict.verified ? "verified" : "NOT VERIFIED"
        ].join("\n"))
      if (!verdict.verified) {
        return yield* new CliFailure({ message: `receipt ${auditId} does not verify`, exitCode: EXIT_REFUSED })
      }
    }))).pipe(
    Command.withDescription(
      "Check an audit receipt here: its hash over its content, and its link in the account's hash chain"
    )
  )

/** `spendgate receipt …`: audit receipts. */
export const receipt = Command.make("receipt").pipe(
  Command.withDescription("Audit receipts: verify"),
  Command.withSubcommands([verify])
)
