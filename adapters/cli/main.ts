import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Effect } from "effect"
import { Command } from "effect/cli"
import { mcp } from "./commands/mcp.ts"
import { serve } from "./commands/serve.ts"

/**
 * The `spendgate` command line (bin/spendgate.js loads this module once it
 * has checked the Node version). One module per subcommand under
 * ./commands/; a new subcommand is one import and one entry in the list.
 */
export const cli = Command.make("spendgate").pipe(
  Command.withDescription("Agent spending gateway: per-agent keys, policies, kill switch and a prepaid wallet"),
  Command.withSubcommands([serve, mcp])
)

/** Runs the command line on `args` (without the node and script paths) as the process's main program. */
export const main = (args: ReadonlyArray<string>, version: string): void =>
  NodeRuntime.runMain(
    Command.runWith(cli, { version })(args).pipe(Effect.provide(NodeServices.layer))
  )
