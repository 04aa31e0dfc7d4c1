import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { teardown } from "../teardown.ts"
import { Console, Effect } from "effect"
import { CliError, CliOutput, Command } from "effect/cli"
import { CliFailure, EXIT_USAGE } from "./client.ts"
import { admin } from "./commands/admin.ts"
import { agents } from "./commands/agents.ts"
import { dev } from "./commands/dev.ts"
import { fund } from "./commands/fund.ts"
import { mcp } from "./commands/mcp.ts"
import { migrate } from "./commands/migrate.ts"
import { receipt } from "./commands/receipt.ts"
import { serve } from "./commands/serve.ts"
import { signup } from "./commands/signup.ts"
import { tx } from "./commands/tx.ts"
import { wallet } from "./commands/wallet.ts"

/**
 * The `spendgate` command line (bin/spendgate.js loads this module once it
 * has checked the Node version). One module per subcommand under
 * ./commands/; a new subcommand is one import and one entry in the list.
 * Heavy implementations (the server, storage, MCP) are imported on use.
 *
 * Exit codes (adapters/cli/client.ts): 0 done, 1 refused by the server (or an
 * invoice expired, a receipt did not verify), 2 usage error, 3 server not
 * reachable.
 */
export const cli = Command.make("spendgate").pipe(
  Command.withDescription("Agent spending gateway: per-agent keys, policies, kill switch and a prepaid wallet"),
  Command.withSubcommands([serve, mcp, migrate, signup, agents, wallet, fund, tx, receipt, dev, admin])
)

/** A bad invocation's help and errors go to stderr, so stdout holds only a command's output (and only JSON with --json). */
const stderrForUsageErrors = CliOutput.layerPresenter({
  present: (event) =>
    event._tag === "InvalidInvocation"
      ? Effect.gen(function*() {
        const formatter = yield* CliOutput.Formatter
        yield* Console.error(formatter.formatHelpDoc(event.helpDoc))
        yield* Console.error(formatter.formatErrors(event.errors))
      })
      : CliOutput.defaultPresenter.present(event)
})

/** Runs the command line on `args` (without the node and script paths) as the process's main program. */
export const main = (args: ReadonlyArray<string>, version: string): void =>
  NodeRuntime.runMain(
    Command.runWith(cli, { version })(args).pipe(
      Effect.catch((error) => {
        if (error instanceof CliFailure) {
          return Effect.sync(() => {
            process.stderr.write(`spendgate: ${error.message}\n`)
            process.exitCode = error.exitCode
          })
        }
        // A bad flag, argument or subcommand: the help and the error are already printed.
        if (CliError.isCliError(error) && error._tag === "ShowHelp") {
          return Effect.sync(() => {
            process.exitCode = error.errors.length > 0 ? EXIT_USAGE : 0
          })
        }
        return Effect.fail(error)
      }),
      Effect.provide(stderrForUsageErrors),
      Effect.provide(NodeServices.layer)
    ),
    { teardown }
  )
