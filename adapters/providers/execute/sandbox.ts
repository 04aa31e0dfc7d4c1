/**
 * `execute` on this machine: each call runs in a fresh bubblewrap sandbox
 * (Debian/Ubuntu package `bubblewrap`, `/usr/bin/bwrap`).
 *
 * Isolation, per call:
 *
 * - Every namespace bwrap supports is new (`--unshare-all`: user, mount, PID,
 *   network, IPC, UTS, cgroup). The network namespace has only a loopback
 *   device of its own: no route out, no DNS (there is no /etc/resolv.conf
 *   either), and the host's 127.0.0.1 is not reachable. Further user
 *   namespaces are refused inside (`--disable-userns`).
 * - The file system is a read-only tmpfs root holding: /usr read-only, the
 *   /bin, /sbin, /lib* entries as the host has them (symlinks into /usr on a
 *   merged-/usr system, read-only binds otherwise), /etc/ld.so.cache and
 *   /etc/alternatives read-only and nothing else of /etc (no passwd, shadow,
 *   hosts, resolv.conf, certificates), a new /proc of the sandbox's own PID
 *   namespace (host processes are invisible; PID 1 is bwrap's init), a minimal
 *   /dev with a 4 MiB /dev/shm, and /tmp: a directory made for this call with
 *   `mkdtemp` on the host, also the working directory, removed afterwards
 *   whatever happened (finished, killed, interrupted). No /root, /home, /work,
 *   /var, /run. The code is written there as `main.py`, `main.js` or
 *   `main.sh`; it never appears on a command line. Directories a killed
 *   gateway left behind are removed by the next `make` (those untouched for
 *   ten minutes).
 * - The environment is `PATH`, `HOME=/tmp` and `LANG=C.UTF-8` only. bwrap
 *   itself is started with an empty environment too, because the sandbox's
 *   PID 1 is a fork of bwrap and its /proc/1/environ shows what bwrap was
 *   given: started with the gateway's environment it would show every key.
 * - The code runs as uid/gid 65534 with no capabilities, no new privileges,
 *   in a session of its own (`--new-session`, so it cannot push keystrokes
 *   into a terminal). When the gateway runs as root, bwrap itself is started
 *   as uid/gid 65534 (host "nobody"), so the sandbox is unprivileged on the
 *   host as well; that is also what makes the process limit bite (the kernel
 *   never applies RLIMIT_NPROC to a process whose host uid is 0).
 * - `--die-with-parent`: if the gateway dies, its sandboxes die with it.
 * - File descriptors the gateway inherited without close-on-exec (from a
 *   supervisor, say) are closed by the launcher before the code starts.
 *
 * Limits, set by a small bash launcher inside the sandbox (`ulimit`, hard and
 * soft, which the code cannot raise again) before it `exec`s the interpreter:
 *
 * - Memory, per process: RLIMIT_DATA and RLIMIT_AS at `memoryBytes` for
 *   Python and bash (a 4 GB allocation fails with MemoryError or its
 *   equivalent). Node's V8 reserves about 600 MB of address space at start
 *   that it never touches; JavaScript gets `memoryBytes` + 640 MiB of
 *   RLIMIT_DATA and 2 GiB more of RLIMIT_AS, and `--max-old-space-size` at
 *   `memoryBytes`, so what it can really use is about `memoryBytes` (a 4 GB
 *   Buffer fails with "Array buffer allocation failed"). Worker threads need
 *   their own reservations and do not start under the default limit.
 *   Rlimits bound each process, not the sandbox as a whole; the cgroup below
 *   bounds the total.
 * - Processes: RLIMIT_NPROC at `maxProcesses` (threads count, bwrap's init
 *   counts). It counts per user namespace, so each sandbox has its own
 *   budget and a fork bomb stops at it. With a cgroup, pids.max is the limit
 *   (the rlimit stays, at twice that, as a backstop).
 * - A cgroup per call (cgroup.ts; v2, or the v1 hierarchies), entered before
 *   the code starts (bwrap waits on `--block-fd` until its first process has
 *   been moved in): `sandboxMemoryBytes` for all its processes together
 *   (default `memoryBytes` + 128 MiB, no swap; past it the kernel OOM-kills),
 *   `cpus` cores of CPU time per wall time (default 1; past it the sandbox is
 *   throttled), `maxProcesses` tasks. What the cgroup stopped is told at the
 *   end of `stderr` (`[sandbox] memory limit reached …`, `[sandbox] process
 *   limit reached …`); a program killed for its memory exits with 137.
 * - A seccomp filter (seccomp.ts, `--seccomp`) on everything the code runs:
 *   ptrace, mount, namespaces, modules, kexec, BPF, perf events, keyrings,
 *   userfaultfd, io_uring, process_vm_readv/writev, personality changes and
 *   the administrator's calls fail with EPERM.
 * - Files: at most `maxFileBytes` per file written (RLIMIT_FSIZE), 256 open
 *   files, no core dumps. The whole tree in /tmp is not capped; a call is
 *   bounded by its wall time.
 * - Wall time: min(timeout ?? `defaultTimeoutMs`, `maxTimeoutMs`). At expiry
 *   bwrap's process group is SIGKILLed; its init dies with it (die-with-parent)
 *   and the kernel then kills every process of the PID namespace, daemons
 *   included. The answer says `timedOut: true`, `exitCode: null`. When the
 *   program ends by itself, whatever it left running (background jobs,
 *   `setsid` daemons) dies the same way, with the init. A call returns only
 *   once the init is gone, so nothing of a sandbox outlives its call.
 * - Output: stdout and stderr are kept up to `maxOutputBytes` each (cut on a
 *   character boundary, `truncated: true`). Past that, output is read and
 *   thrown away so that the program is never blocked on a full pipe, up to
 *   64 MiB in all; a program that writes more than that is killed at once
 *   (`exitCode: null`), so an endless writer cannot keep the gateway busy.
 * - At most `maxConcurrent` sandboxes run at once (default 4); a call waits
 *   for a slot at most its own timeout, then fails as `rate_limited`.
 *
 * The exit code is the program's. A program that dies of a signal it got
 * inside the sandbox (its own kill, a segfault) is reported as 128 + the
 * signal number, as a shell would.
 *
 * Interpreters: `pythonPath` (default /usr/bin/python3, run with `-u -B`:
 * unbuffered, so output printed before a timeout is not lost), `nodePath`
 * (default `process.execPath`, the Node 24 the gateway itself runs on; the
 * system's /usr/bin/node may be given instead), `bashPath` (default
 * /bin/bash; also the launcher, so the sandbox needs it). An interpreter under
 * /usr is used in place; one elsewhere (as node_modules/node/bin/node is) is
 * bound read-only, as one file, at /opt/sandbox/<language>/<name>: it must
 * not need files of its own beside it (Node does not).
 *
 * Availability: `make` runs `probe` once: a trivial program in each language
 * through the real sandbox and limits (`makeProbing` is built without running
 * it: whoever reports the probe runs it, and a call waits for its verdict).
 * Where the machine allows no cgroups
 * (none mounted at `cgroupRoot`, not writable, controllers missing) or no
 * seccomp filter (not x86_64), code still runs in the sandbox but
 * `status.degraded` says what is missing and why; the health and capability
 * endpoints show the provider as degraded with that reason. If bwrap is missing or cannot create
 * the namespaces, the provider's `status` is `{ ok: false, reason }` and every
 * `run` fails with `unavailable` and that reason; code is never run outside a
 * sandbox. A language whose interpreter does not work is listed in
 * `status.unavailable` and its calls fail the same way.
 *
 * Pricing (per second of wall time, from the operator's price card): the
 * quote is price × ceil(timeout s), the whole timeout. The charge is price ×
 * ceil(measured wall seconds), at least one second, from the start of bwrap
 * to the end of the last output, never more than the quote; a call that
 * timed out is charged the quote's seconds.
 *
 * The command line, for a Python call on a merged-/usr system:
 *
 *   bwrap --unshare-all --unshare-user --disable-userns --uid 65534 --gid 65534
 *     --hostname sandbox --die-with-parent --new-session --cap-drop ALL
 *     --clearenv --setenv PATH /usr/local/bin:/usr/bin:/bin --setenv HOME /tmp
 *     --setenv LANG C.UTF-8
 *     --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/sbin /sbin
 *     --symlink usr/lib /lib --symlink usr/lib64 /lib64
 *     --ro-bind-try /etc/ld.so.cache /etc/ld.so.cache
 *     --ro-bind-try /etc/alternatives /etc/alternatives
 *     --proc /proc --dev /dev --size 4194304 --tmpfs /dev/shm
 *     --bind <tmp>/spendgate-sandbox-XXXXXX /tmp --chdir /tmp --remount-ro /
 *     --json-status-fd 3 --seccomp 4 --block-fd 5
 *     -- /usr/bin/bash -c '<launcher>' sandbox /usr/bin/python3.11 -u -B /tmp/main.py
 *
 * where the launcher is `ulimit -c 0 -n 256 -f <KiB> -d <KiB> -v <KiB> -u <n>`,
 * the loop closing descriptors above 2, and `exec "$@"`. `sandboxCommand`
 * builds it.
 */
import { Duration, Effect, Result, Semaphore } from "effect"
import { type Metered, type Provider, type Quote } from "../../../src/capabilities/Provider.ts"
import { type ExecuteInput, type ExecuteOutput } from "../../../src/capabilities/schemas.ts"
import { describeError, oneLine } from "./bwrap-process.ts"
import { sweepStale } from "./calldir.ts"
import { type CgroupReport } from "./cgroup.ts"

export { DISCARD_LIMIT_BYTES } from "./bwrap-process.ts"
export * from "./settings.ts"
import { LANGUAGES, MiB, type SandboxOptions, type SandboxStatus, type Settings, settingsOf } from "./settings.ts"
import { failure, probeWith, runSandboxed, setupProblem } from "./run.ts"
export { sandboxCommand } from "./commandLine.ts"
export { probe } from "./run.ts"

/** The provider, with the probe's verdict for the health endpoint. */
export interface SandboxProvider extends Provider<"execute"> {
  readonly status: SandboxStatus
}

// ---------------------------------------------------------------------------
// The provider
// ---------------------------------------------------------------------------

/**
 * What the sandbox's cgroup stopped, told after the program's own stderr:
 * `[sandbox] …` lines, so that a program killed for its memory (exit status
 * 137, from SIGKILL) or refused forks is reported as such.
 */
const limitNotes = (settings: Settings, limits: CgroupReport | undefined): string => {
  if (limits === undefined) return ""
  const notes: Array<string> = []
  if (limits.oomKills > 0) {
    notes.push(
      `[sandbox] memory limit reached (${Math.floor(settings.sandboxMemoryBytes / MiB)} MiB for the whole sandbox): ` +
        `${limits.oomKills} process${limits.oomKills === 1 ? " was" : "es were"} killed`
    )
  }
  if (limits.forksRefused > 0) {
    notes.push(`[sandbox] process limit reached (${settings.maxProcesses}): ${limits.forksRefused} fork${limits.forksRefused === 1 ? " was" : "s were"} refused`)
  }
  return notes.map((note) => `\n${note}\n`).join("")
}

const secondsOf = (ms: number): bigint => BigInt(Math.max(1, Math.ceil(ms / 1000)))

/** Removes what an earlier run left (sandbox directories, cgroups), saying so. */
const sweep = (settings: Settings) =>
  Effect.gen(function*() {
    const swept = yield* Effect.promise(() => sweepStale(settings).catch(() => 0))
    const sweptCgroups = settings.cgroups?.sweep() ?? 0
    if (sweptCgroups > 0) yield* Effect.logInfo(`${settings.name}: removed ${sweptCgroups} sandbox cgroups left by an earlier run`)
    if (swept > 0) yield* Effect.logInfo(`${settings.name}: removed ${swept} sandbox directories left by an earlier run`)
  })

/** The probe's verdict in the log: unavailable, degraded, or a language that cannot run. */
export const logVerdict = (name: string, status: SandboxStatus) =>
  Effect.gen(function*() {
    if (!status.ok) return yield* Effect.logWarning(`${name}: code execution is unavailable: ${status.reason}`)
    if (status.degraded !== undefined) yield* Effect.logWarning(`${name}: code execution is degraded: ${status.degraded}`)
    for (const language of LANGUAGES) {
      const problem = status.unavailable[language]
      if (problem !== undefined) yield* Effect.logWarning(`${name}: ${language} is unavailable: ${problem}`)
    }
  })

/**
 * The provider. `probed`, when given, is the probe's verdict to use (one probe shared with
 * whatever else reports it); without it `make` probes. Either way it is built once the verdict
 * is known, and its `status` is that verdict.
 */
export const make = (options: SandboxOptions, probed?: Effect.Effect<SandboxStatus>): Effect.Effect<SandboxProvider> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() => settingsOf(options))
    yield* sweep(settings)
    const status = yield* (probed ?? probeWith(settings))
    yield* logVerdict(settings.name, status)
    return { ...built(settings, Effect.succeed(status)), status }
  })

/**
 * The provider, built without running `probed` (an `Effect.cached` probe that whoever reports it
 * runs, e.g. the configuration's ProviderStatuses once the server listens): a call waits for the
 * verdict, running the probe if none has, and then acts on it as `make`'s provider does. It
 * carries no `status` and logs nothing: whoever runs the probe reports it (`logVerdict`).
 */
export const makeProbing = (options: SandboxOptions, probed: Effect.Effect<SandboxStatus>): Effect.Effect<Provider<"execute">> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() => settingsOf(options))
    yield* sweep(settings)
    return built(settings, probed)
  })

/** The provider's calls, acting on `verdict` (the probe's, awaited by each call: at once when known). */
const built = (settings: Settings, verdict: Effect.Effect<SandboxStatus>): Provider<"execute"> => {
  const { name } = settings
  const price = settings.unitPrice.priceMicroUsd
  const slots = Semaphore.makeUnsafe(settings.maxConcurrent)

  const timeoutOf = (input: ExecuteInput) => Math.min(input.timeout ?? settings.defaultTimeoutMs, settings.maxTimeoutMs)

  const quote = (input: ExecuteInput): Result.Result<Quote, never> =>
    Result.succeed({ microUsd: price * secondsOf(timeoutOf(input)) })

  const run = Effect.fn("Sandbox.run")(function*(input: ExecuteInput, quoted: Quote) {
    const status = yield* verdict
    if (!status.ok) return yield* failure(name, "unavailable", status.reason)
    const problem = status.unavailable[input.language]
    if (problem !== undefined) return yield* failure(name, "unavailable", problem)
    const timeoutMs = timeoutOf(input)
    const outcome = yield* Effect.scoped(Effect.gen(function*() {
      yield* slots.takeScoped(1).pipe(
        Effect.timeoutOrElse({
          duration: Duration.millis(timeoutMs),
          orElse: () => Effect.fail(failure(name, "rate_limited", `all ${settings.maxConcurrent} sandboxes are busy`))
        })
      )
      return yield* runSandboxed(settings, input.language, input.code, timeoutMs)
    }))
    const setup = setupProblem(settings, outcome)
    if (setup !== undefined) return yield* failure(name, "unavailable", setup)
    const seconds = outcome.timedOut ? secondsOf(timeoutMs) : secondsOf(outcome.durationMs)
    const charge = price * seconds
    const output: ExecuteOutput = {
      stdout: outcome.stdout,
      stderr: outcome.stderr + limitNotes(settings, outcome.limits),
      exitCode: outcome.exitCode,
      timedOut: outcome.timedOut,
      durationMs: outcome.durationMs,
      truncated: outcome.truncated
    }
    const metered: Metered<ExecuteOutput> = {
      output,
      actualMicroUsd: charge < quoted.microUsd ? charge : quoted.microUsd
    }
    return metered
  }, (effect) =>
    effect.pipe(
      Effect.catchDefect((defect) =>
        Effect.fail(failure(name, "unavailable", `unexpected failure: ${oneLine(describeError(defect), 200)}`))
      )
    ))

  return {
    name,
    capability: "execute",
    unitPrice: settings.unitPrice,
    quote,
    run: (input, quoted) => run(input, quoted)
  }
}
