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
 * through the real sandbox and limits. Where the machine allows no cgroups
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
import { accessSync, constants as fsConstants, lstatSync, readlinkSync, realpathSync } from "node:fs"
import * as fs from "node:fs/promises"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { Duration, Effect, Result, Semaphore } from "effect"
import { type Metered, type Provider, ProviderFailure, type Quote, type UnitPrice } from "../../../src/capabilities/Provider.ts"
import { type ExecuteInput, type ExecuteOutput, MAX_EXECUTE_TIMEOUT_MS } from "../../../src/capabilities/schemas.ts"
import { BLOCK_FD, describeError, oneLine, type Outcome, SECCOMP_FD, start } from "./bwrap-process.ts"
import { CALL_DIR_PREFIX, makeCallDir, removeTree, sweepStale } from "./calldir.ts"
import { type CgroupReport, type Cgroups, DEFAULT_CGROUP_ROOT, probeCgroups } from "./cgroup.ts"
import { compileFilter, seccompProblem } from "./seccomp.ts"

export { DISCARD_LIMIT_BYTES } from "./bwrap-process.ts"
export const PROVIDER_NAME = "sandbox"
export const DEFAULT_TIMEOUT_MS = 10_000
export const DEFAULT_MAX_TIMEOUT_MS = 30_000
/** No configuration can allow more than the capability's own limit. */
export const HARD_MAX_TIMEOUT_MS = MAX_EXECUTE_TIMEOUT_MS
export const DEFAULT_MEMORY_BYTES = 256 * 1024 * 1024
export const DEFAULT_MAX_PROCESSES = 64
export const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024
export const DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024
export const DEFAULT_MAX_CONCURRENT = 4
/** CPU per sandbox, in cores, when cgroups are available. */
export const DEFAULT_CPUS = 1
/** Memory for the whole sandbox (its cgroup) beyond the per-process limit: room for the interpreter itself. */
export const SANDBOX_MEMORY_HEADROOM_BYTES = 128 * 1024 * 1024
export const DEFAULT_BWRAP_PATH = "/usr/bin/bwrap"
export const DEFAULT_PYTHON_PATH = "/usr/bin/python3"
export const DEFAULT_BASH_PATH = "/bin/bash"
/** Who the code runs as inside the sandbox, and who bwrap runs as when the gateway is root. */
export const SANDBOX_UID = 65534
export const SANDBOX_GID = 65534
/** Address space V8 reserves at start without using it (measured: about 575 MB of RLIMIT_DATA for Node 24). */
export const NODE_DATA_RESERVE_BYTES = 640 * 1024 * 1024
/** Further address space Node needs for its heap and code ranges (measured: Node 24 needs about 1.75 GiB of RLIMIT_AS to run a 256 MiB heap). */
export const NODE_ADDRESS_RESERVE_BYTES = 2 * 1024 * 1024 * 1024
const SHM_BYTES = 4 * 1024 * 1024
const OPEN_FILES = 256
const PROBE_TIMEOUT_MS = 15_000
const SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
/** Mirrored from the host when present: symlinks stay symlinks, directories are bound read-only. */
const SYSTEM_ENTRIES = ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]
const SYSTEM_FILES = ["/etc/ld.so.cache", "/etc/alternatives"]

export type Language = ExecuteInput["language"]
export const LANGUAGES: ReadonlyArray<Language> = ["python", "javascript", "bash"]

export interface SandboxOptions {
  /** Provider name in the catalogue and in failures; default "sandbox". */
  readonly name?: string | undefined
  /** From the operator's price card: `per: "second"` of wall time. */
  readonly unitPrice: UnitPrice
  /** Longest wall time a call may ask for; default 30 s, at most 60 s. */
  readonly maxTimeoutMs?: number | undefined
  /** Wall time of a call that names none; default 10 s (never above maxTimeoutMs). */
  readonly defaultTimeoutMs?: number | undefined
  /** Memory per process; default 256 MiB. */
  readonly memoryBytes?: number | undefined
  /** Processes and threads per sandbox; default 64. */
  readonly maxProcesses?: number | undefined
  /** Kept per stream (stdout, stderr); default 1 MiB. */
  readonly maxOutputBytes?: number | undefined
  /** Largest file the code may write; default 64 MiB. */
  readonly maxFileBytes?: number | undefined
  /** Sandboxes running at once; default 4. */
  readonly maxConcurrent?: number | undefined
  /** Where the per-call directories are made; default the OS temp dir. Must be reachable by uid 65534 when the gateway is root. */
  readonly tempDir?: string | undefined
  readonly bwrapPath?: string | undefined
  readonly nodePath?: string | undefined
  readonly pythonPath?: string | undefined
  readonly bashPath?: string | undefined
  /** Where the cgroup file system is mounted; default /sys/fs/cgroup. */
  readonly cgroupRoot?: string | undefined
  /** Memory of the whole sandbox (all its processes), enforced by its cgroup; default memoryBytes + 128 MiB. */
  readonly sandboxMemoryBytes?: number | undefined
  /** CPU time per wall time of a sandbox, in cores, enforced by its cgroup; default 1. */
  readonly cpus?: number | undefined
  /** The seccomp filter (seccomp.ts); default on. Off only for debugging: the provider is then reported degraded. */
  readonly seccomp?: boolean | undefined
}

/** What the start-up probe found. `unavailable` names the languages that cannot run here, with why. */
export type SandboxStatus =
  | {
    readonly ok: true
    readonly unavailable: { readonly [L in Language]?: string }
    /** Present when a protection is missing on this machine (cgroup limits, seccomp): which, and why. */
    readonly degraded?: string
  }
  | { readonly ok: false; readonly reason: string }

/** The provider, with the probe's verdict for the health endpoint. */
export interface SandboxProvider extends Provider<"execute"> {
  readonly status: SandboxStatus
}

// ---------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------

interface Interpreter {
  /** Why it cannot be used, found before anything ran. */
  readonly problem: string | undefined
  /** The executable inside the sandbox. */
  readonly sandboxPath: string
  /** A read-only bind of the host file when it lives outside the mirrored system directories. */
  readonly bind: readonly [host: string, sandbox: string] | undefined
  /** Arguments before the file. */
  readonly flags: ReadonlyArray<string>
  readonly fileName: string
  readonly dataBytes: number
  readonly addressBytes: number
}

interface Settings {
  readonly name: string
  readonly unitPrice: UnitPrice
  readonly maxTimeoutMs: number
  readonly defaultTimeoutMs: number
  readonly memoryBytes: number
  readonly maxProcesses: number
  readonly maxOutputBytes: number
  readonly maxFileBytes: number
  readonly maxConcurrent: number
  readonly tempDir: string
  readonly bwrapPath: string
  /** Read-only system mounts, in bwrap arguments. */
  readonly system: ReadonlyArray<string>
  readonly launcher: Interpreter
  readonly interpreters: { readonly [L in Language]: Interpreter }
  /** Start bwrap as this uid/gid (the gateway runs as root). */
  readonly dropTo: { readonly uid: number; readonly gid: number } | undefined
  /** Per-call cgroups, or why there are none. */
  readonly cgroups: Cgroups | undefined
  readonly cgroupProblem: string | undefined
  readonly sandboxMemoryBytes: number
  readonly cpus: number
  /** The compiled seccomp program, or why there is none. */
  readonly seccomp: Buffer | undefined
  readonly seccompProblem: string | undefined
}

const MiB = 1024 * 1024

/** The system part of the sandbox's file system, following the host's layout; also the roots an interpreter may sit under. */
const systemLayout = (): { readonly args: ReadonlyArray<string>; readonly roots: ReadonlyArray<string> } => {
  const args = ["--ro-bind", "/usr", "/usr"]
  const roots = ["/usr"]
  for (const entry of SYSTEM_ENTRIES) {
    let stat
    try {
      stat = lstatSync(entry)
    } catch {
      continue
    }
    if (stat.isSymbolicLink()) {
      args.push("--symlink", readlinkSync(entry), entry)
    } else if (stat.isDirectory()) {
      args.push("--ro-bind", entry, entry)
      roots.push(entry)
    }
  }
  for (const file of SYSTEM_FILES) args.push("--ro-bind-try", file, file)
  return { args, roots }
}

const isUnder = (file: string, root: string) => file.startsWith(`${root}/`)

const interpreterOf = (
  language: Language,
  configured: string,
  roots: ReadonlyArray<string>,
  memoryBytes: number
): Interpreter => {
  const fileName = language === "python" ? "main.py" : language === "javascript" ? "main.js" : "main.sh"
  const flags = language === "python"
    ? ["-u", "-B"]
    : language === "javascript"
    ? [`--max-old-space-size=${Math.max(16, Math.floor(memoryBytes / MiB))}`]
    : []
  const dataBytes = language === "javascript" ? memoryBytes + NODE_DATA_RESERVE_BYTES : memoryBytes
  const addressBytes = language === "javascript" ? dataBytes + NODE_ADDRESS_RESERVE_BYTES : memoryBytes
  const base = { flags, fileName, dataBytes, addressBytes }
  if (!path.isAbsolute(configured)) {
    return { ...base, problem: `${language}: the interpreter path must be absolute, got "${configured}"`, sandboxPath: configured, bind: undefined }
  }
  let real: string
  try {
    real = realpathSync(configured)
    accessSync(real, fsConstants.X_OK)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    const why = code === "ENOENT" ? "does not exist" : code === "EACCES" ? "is not executable" : `cannot be used (${code ?? "error"})`
    return { ...base, problem: `${language}: ${configured} ${why}`, sandboxPath: configured, bind: undefined }
  }
  if (roots.some((root) => isUnder(real, root))) return { ...base, problem: undefined, sandboxPath: real, bind: undefined }
  const inside = `/opt/sandbox/${language}/${path.basename(real)}`
  return { ...base, problem: undefined, sandboxPath: inside, bind: [real, inside] }
}

const cgroupsOf = (root: string): Pick<Settings, "cgroups" | "cgroupProblem"> => {
  const probed = probeCgroups(root)
  return probed.ok ? { cgroups: probed.cgroups, cgroupProblem: undefined } : { cgroups: undefined, cgroupProblem: probed.reason }
}

const seccompOf = (wanted: boolean): Pick<Settings, "seccomp" | "seccompProblem"> => {
  if (!wanted) return { seccomp: undefined, seccompProblem: "the seccomp filter is turned off by configuration" }
  const problem = seccompProblem()
  return problem === undefined ? { seccomp: compileFilter(), seccompProblem: undefined } : { seccomp: undefined, seccompProblem: problem }
}

/** What the sandbox runs without on this machine, as one sentence; undefined when nothing is missing. */
const degradedReason = (settings: Settings): string | undefined => {
  const missing = [
    settings.cgroupProblem === undefined ? undefined : `no cgroup limits (memory, CPU, processes of the whole sandbox): ${settings.cgroupProblem}`,
    settings.seccompProblem === undefined ? undefined : `no seccomp filter: ${settings.seccompProblem}`
  ].filter((m) => m !== undefined)
  return missing.length === 0 ? undefined : missing.join("; ")
}

const settingsOf = (options: SandboxOptions): Settings => {
  const name = options.name ?? PROVIDER_NAME
  if (name.trim() === "" || name.length > 64) throw new RangeError("sandbox: name must be 1 to 64 characters")
  if (options.unitPrice.per !== "second" || options.unitPrice.priceMicroUsd < 0n) {
    throw new RangeError(`${name}: the price must be a non-negative amount per second`)
  }
  const integer = (field: string, value: number | undefined, fallback: number, min: number, max: number) => {
    const resolved = value ?? fallback
    if (!Number.isSafeInteger(resolved) || resolved < min || resolved > max) {
      throw new RangeError(`${name}: ${field} must be an integer from ${min} to ${max}`)
    }
    return resolved
  }
  const maxTimeoutMs = integer("maxTimeoutMs", options.maxTimeoutMs, DEFAULT_MAX_TIMEOUT_MS, 1, HARD_MAX_TIMEOUT_MS)
  const defaultTimeoutMs = integer(
    "defaultTimeoutMs",
    options.defaultTimeoutMs,
    Math.min(DEFAULT_TIMEOUT_MS, maxTimeoutMs),
    1,
    maxTimeoutMs
  )
  const memoryBytes = integer("memoryBytes", options.memoryBytes, DEFAULT_MEMORY_BYTES, 16 * MiB, 64 * 1024 * MiB)
  const maxProcesses = integer("maxProcesses", options.maxProcesses, DEFAULT_MAX_PROCESSES, 8, 4096)
  const maxOutputBytes = integer("maxOutputBytes", options.maxOutputBytes, DEFAULT_MAX_OUTPUT_BYTES, 1024, 64 * MiB)
  const maxFileBytes = integer("maxFileBytes", options.maxFileBytes, DEFAULT_MAX_FILE_BYTES, 1024, 1024 * 1024 * MiB)
  const maxConcurrent = integer("maxConcurrent", options.maxConcurrent, DEFAULT_MAX_CONCURRENT, 1, 1024)
  const sandboxMemoryBytes = integer(
    "sandboxMemoryBytes",
    options.sandboxMemoryBytes,
    memoryBytes + SANDBOX_MEMORY_HEADROOM_BYTES,
    16 * MiB,
    64 * 1024 * MiB
  )
  const cpus = options.cpus ?? DEFAULT_CPUS
  if (!Number.isFinite(cpus) || cpus < 0.01 || cpus > 1024) throw new RangeError(`${name}: cpus must be from 0.01 to 1024`)
  const tempDir = options.tempDir ?? tmpdir()
  if (!path.isAbsolute(tempDir)) throw new RangeError(`${name}: tempDir must be an absolute path`)
  const { args: system, roots } = systemLayout()
  const interpreters = {
    python: interpreterOf("python", options.pythonPath ?? DEFAULT_PYTHON_PATH, roots, memoryBytes),
    javascript: interpreterOf("javascript", options.nodePath ?? process.execPath, roots, memoryBytes),
    bash: interpreterOf("bash", options.bashPath ?? DEFAULT_BASH_PATH, roots, memoryBytes)
  }
  return {
    name,
    unitPrice: options.unitPrice,
    maxTimeoutMs,
    defaultTimeoutMs,
    memoryBytes,
    maxProcesses,
    maxOutputBytes,
    maxFileBytes,
    maxConcurrent,
    tempDir,
    bwrapPath: options.bwrapPath ?? DEFAULT_BWRAP_PATH,
    system,
    launcher: interpreters.bash,
    interpreters,
    dropTo: process.getuid?.() === 0 ? { uid: SANDBOX_UID, gid: SANDBOX_GID } : undefined,
    ...cgroupsOf(options.cgroupRoot ?? DEFAULT_CGROUP_ROOT),
    sandboxMemoryBytes,
    cpus,
    ...seccompOf(options.seccomp ?? true)
  }
}

// ---------------------------------------------------------------------------
// The command line
// ---------------------------------------------------------------------------

const KiB = (bytes: number) => String(Math.max(1, Math.floor(bytes / 1024)))

/**
 * Sets the limits (hard and soft), closes every inherited descriptor above
 * stderr, then becomes the interpreter. A limit that cannot be set stops the
 * run: the code never starts without them.
 */
const launcherScript = (settings: Settings, interpreter: Interpreter): string =>
  [
    `ulimit -c 0 -n ${OPEN_FILES} -f ${KiB(settings.maxFileBytes)} -d ${KiB(interpreter.dataBytes)}` +
    ` -v ${KiB(interpreter.addressBytes)} -u ${settings.cgroups === undefined ? settings.maxProcesses : settings.maxProcesses * 2}` +
    ` || { echo "sandbox: the resource limits could not be set" >&2; exit 125; }`,
    // No redirection here: bash would park stderr on a spare descriptor, which the loop would then close.
    `for f in /proc/self/fd/*; do n=\${f##*/}; if [ "$n" -gt 2 ] && [ -e "$f" ]; then eval "exec $n>&-"; fi; done`,
    `exec "$@"`
  ].join("\n")

/** bwrap's arguments for one run of `language`, with `dir` as /tmp. */
const sandboxArguments = (settings: Settings, language: Language, dir: string): Array<string> => {
  const interpreter = settings.interpreters[language]
  const binds: Array<string> = []
  for (const used of new Set([interpreter, settings.launcher])) {
    if (used.bind !== undefined) binds.push("--ro-bind", used.bind[0], used.bind[1])
  }
  return [
    "--unshare-all",
    "--unshare-user",
    "--disable-userns",
    "--uid",
    String(SANDBOX_UID),
    "--gid",
    String(SANDBOX_GID),
    "--hostname",
    "sandbox",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
    "--clearenv",
    "--setenv",
    "PATH",
    SANDBOX_PATH,
    "--setenv",
    "HOME",
    "/tmp",
    "--setenv",
    "LANG",
    "C.UTF-8",
    ...settings.system,
    ...binds,
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--size",
    String(SHM_BYTES),
    "--tmpfs",
    "/dev/shm",
    "--bind",
    dir,
    "/tmp",
    "--chdir",
    "/tmp",
    "--remount-ro",
    "/",
    "--json-status-fd",
    "3",
    ...(settings.seccomp === undefined ? [] : ["--seccomp", String(SECCOMP_FD)]),
    // With a cgroup, the sandbox waits before it starts anything until its first process has been moved into it.
    ...(settings.cgroups === undefined ? [] : ["--block-fd", String(BLOCK_FD)]),
    "--",
    settings.launcher.sandboxPath,
    "-c",
    launcherScript(settings, interpreter),
    "sandbox",
    interpreter.sandboxPath,
    ...interpreter.flags,
    `/tmp/${interpreter.fileName}`
  ]
}

/** The command a call in `language` runs, with `dir` as its /tmp: for documentation and debugging. */
export const sandboxCommand = (
  options: SandboxOptions,
  language: Language,
  dir: string
): { readonly file: string; readonly args: ReadonlyArray<string> } => {
  const settings = settingsOf(options)
  return { file: settings.bwrapPath, args: sandboxArguments(settings, language, dir) }
}

// ---------------------------------------------------------------------------
// Running code
// ---------------------------------------------------------------------------

const failure = (provider: string, reason: ProviderFailure["reason"], message: string) =>
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
const runSandboxed = (settings: Settings, language: Language, code: string, timeoutMs: number) =>
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
const setupProblem = (settings: Settings, outcome: Outcome): string | undefined => {
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

const probeWith = (settings: Settings): Effect.Effect<SandboxStatus> =>
  Effect.gen(function*() {
    try {
      accessSync(settings.bwrapPath, fsConstants.X_OK)
    } catch (error) {
      return { ok: false, reason: spawnProblem(settings, error as NodeJS.ErrnoException) } as const
    }
    // bash is also the launcher: without it nothing runs.
    const launcher = yield* probeLanguage(settings, "bash")
    if (launcher !== undefined) return { ok: false, reason: launcher } as const
    const others = yield* Effect.forEach(["python", "javascript"] as const, (language) =>
      Effect.map(probeLanguage(settings, language), (problem) => [language, problem] as const), { concurrency: "unbounded" })
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

export const make = (options: SandboxOptions): Effect.Effect<SandboxProvider> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() => settingsOf(options))
    const { name } = settings
    const price = settings.unitPrice.priceMicroUsd
    const swept = yield* Effect.promise(() => sweepStale(settings).catch(() => 0))
    const sweptCgroups = settings.cgroups?.sweep() ?? 0
    if (sweptCgroups > 0) yield* Effect.logInfo(`${name}: removed ${sweptCgroups} sandbox cgroups left by an earlier run`)
    if (swept > 0) yield* Effect.logInfo(`${name}: removed ${swept} sandbox directories left by an earlier run`)
    const status = yield* probeWith(settings)
    if (!status.ok) yield* Effect.logWarning(`${name}: code execution is unavailable: ${status.reason}`)
    else {
      if (status.degraded !== undefined) yield* Effect.logWarning(`${name}: code execution is degraded: ${status.degraded}`)
      for (const language of LANGUAGES) {
        const problem = status.unavailable[language]
        if (problem !== undefined) yield* Effect.logWarning(`${name}: ${language} is unavailable: ${problem}`)
      }
    }
    const slots = yield* Semaphore.make(settings.maxConcurrent)

    const timeoutOf = (input: ExecuteInput) => Math.min(input.timeout ?? settings.defaultTimeoutMs, settings.maxTimeoutMs)

    const quote = (input: ExecuteInput): Result.Result<Quote, never> =>
      Result.succeed({ microUsd: price * secondsOf(timeoutOf(input)) })

    const run = Effect.fn("Sandbox.run")(function*(input: ExecuteInput, quoted: Quote) {
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
      status,
      quote,
      run: (input, quoted) => run(input, quoted)
    } satisfies SandboxProvider
  })
