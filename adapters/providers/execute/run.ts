/**
 * Running code in the sandbox, and the start-up probe that runs a tiny
 * program per language to find what works on this machine.
 */
import { accessSync, constants as fsConstants } from "node:fs"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { Effect } from "effect"
import { ProviderFailure } from "../../../src/capabilities/Provider.ts"
import { describeError, oneLine, type Outcome, start } from "./bwrap-process.ts"
import { CALL_DIR_PREFIX, makeCallDir, removeTree } from "./calldir.ts"
import { sandboxArguments } from "./commandLine.ts"
import { degradedReason, type Language, PROBE_TIMEOUT_MS, type SandboxOptions, type SandboxStatus, type Settings, settingsOf } from "./settings.ts"

// ---------------------------------------------------------------------------
// Running code
// ---------------------------------------------------------------------------

export const failure = (provider: string, reason: ProviderFailure["reason"], message: string) =>
  new ProviderFailure({ provider, reason, message })

const spawnProblem = (settings: Settings, error: NodeJS.ErrnoException): string =>
  error.code === "ENOENT"
    ? `bubblewrap is not installed: no executable at ${settings.bwrapPath} (install the bubblewrap package)`
    : error.code === "EACCES"
    ? `bubblewrap at ${settings.bwrapPath} cannot be executed (permission denied)`
    : `bubblewrap could not be started: ${oneLine(describeError(error), 200)}`

/**
 * Runs `code` once in a fresh sandbox. The directory and the process belong to
 * the scope: an interrupted call kills the sandbox, waits for it to be gone,
 * then removes the directory.
 */
export const runSandboxed = (settings: Settings, language: Language, code: string, timeoutMs: number) =>
  Effect.scoped(
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: () => makeCallDir(settings),
          catch: (error) =>
            failure(settings.name, "unavailable", `no directory for the sandbox in ${settings.tempDir}: ${oneLine(describeError(error), 200)}`)
        }),
        (dir) => Effect.promise(() => removeTree(dir).catch(() => undefined))
      )
      const interpreter = settings.interpreters[language]
      yield* Effect.tryPromise({
        try: () => fs.writeFile(path.join(dir, interpreter.fileName), code, { encoding: "utf8", mode: 0o644 }),
        catch: (error) => failure(settings.name, "unavailable", `the code could not be written: ${oneLine(describeError(error), 200)}`)
      })
      const cgroups = settings.cgroups
      const cgroup = cgroups === undefined ? undefined : yield* Effect.acquireRelease(
        Effect.try({
          try: () =>
            cgroups.create(`${process.pid}-${path.basename(dir).slice(CALL_DIR_PREFIX.length)}`, {
              memoryBytes: settings.sandboxMemoryBytes,
              cpus: settings.cpus,
              maxProcesses: settings.maxProcesses
            }),
          catch: (error) => failure(settings.name, "unavailable", `the sandbox's cgroup could not be made: ${oneLine(describeError(error), 200)}`)
        }),
        (cgroup) => Effect.promise(() => cgroup.remove().catch(() => undefined))
      )
      const running = yield* Effect.acquireRelease(
        Effect.sync(() => start(settings, sandboxArguments(settings, language, dir), timeoutMs, cgroup)),
        (running) => Effect.promise(() => running.stop())
      )
      const outcome = yield* Effect.promise(() => running.done)
      return cgroup === undefined ? outcome : { ...outcome, limits: cgroup.report() }
    })
  )

/** The sandbox failed to come up, or the process never ran: the reason, else undefined. */
export const setupProblem = (settings: Settings, outcome: Outcome): string | undefined => {
  if (outcome.setupError !== undefined) return outcome.setupError
  if (outcome.started) return undefined
  if (outcome.spawnError !== undefined) return spawnProblem(settings, outcome.spawnError)
  if (outcome.timedOut) return `the sandbox did not start within the time limit`
  const said = oneLine(outcome.stderr, 300)
  return `bubblewrap could not create the sandbox${said === "" ? ` (exit status ${outcome.exitCode})` : `: ${said}`}`
}

const PROBES: { readonly [L in Language]: string } = {
  python: "print('ok')\n",
  javascript: "console.log('ok')\n",
  bash: "echo ok\n"
}

const probeLanguage = (settings: Settings, language: Language): Effect.Effect<string | undefined> => {
  const interpreter = settings.interpreters[language]
  if (interpreter.problem !== undefined) return Effect.succeed(interpreter.problem)
  return runSandboxed(settings, language, PROBES[language], PROBE_TIMEOUT_MS).pipe(
    Effect.map((outcome) => {
      const problem = setupProblem(settings, outcome)
      if (problem !== undefined) return problem
      if (outcome.exitCode === 0 && outcome.stdout === "ok\n") return undefined
      const said = oneLine(outcome.stderr, 200)
      return `${language}: a trivial program failed in the sandbox (${outcome.timedOut ? "timed out" : `exit status ${outcome.exitCode}`})${
        said === "" ? "" : `: ${said}`
      }`
    }),
    Effect.catch((error: ProviderFailure) => Effect.succeed(error.message))
  )
}

export const probeWith = (settings: Settings): Effect.Effect<SandboxStatus> =>
  Effect.gen(function*() {
    try {
      accessSync(settings.bwrapPath, fsConstants.X_OK)
    } catch (error) {
      return { ok: false, reason: spawnProblem(settings, error as NodeJS.ErrnoException) } as const
    }
    // The three at once (start-up waits for the slowest, not for bash and then the others).
    const [[, launcher], ...others] = yield* Effect.forEach(["bash", "python", "javascript"] as const, (language) =>
      Effect.map(probeLanguage(settings, language), (problem) => [language, problem] as const), { concurrency: "unbounded" })
    // bash is also the launcher: without it nothing runs (and what the others said follows from that).
    if (launcher !== undefined) return { ok: false, reason: launcher } as const
    const unavailable: { [L in Language]?: string } = {}
    for (const [language, problem] of others) if (problem !== undefined) unavailable[language] = problem
    const degraded = degradedReason(settings)
    return degraded === undefined ? { ok: true, unavailable } as const : { ok: true, unavailable, degraded } as const
  })

/**
 * Runs a trivial program in each language through the real sandbox: whether
 * bwrap works here (namespaces, mounts, limits) and which interpreters do.
 * A bad option (a defect) is reported as not ok as well.
 */
export const probe = (options: SandboxOptions): Effect.Effect<SandboxStatus> =>
  Effect.suspend(() => probeWith(settingsOf(options))).pipe(
    Effect.catchDefect((defect) => Effect.succeed({ ok: false, reason: oneLine(describeError(defect), 300) } as const))
  )
