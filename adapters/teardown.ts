import { Cause, Exit, Runtime } from "effect"

/**
 * How the process ends after SIGTERM or SIGINT (which interrupt the main
 * program): with the exit code the program set while it stopped (a server
 * that stopped cleanly sets 0), else 130 as usual. Anything else as the
 * default teardown decides.
 */
export const teardown: Runtime.Teardown = (exit, onExit) =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)
    ? onExit(typeof process.exitCode === "number" ? process.exitCode : 130)
    : Runtime.defaultTeardown(exit, onExit)
