/**
 * The sandbox's settings: defaults and limits, the options an operator gives,
 * and what they resolve to on this machine (interpreters, system layout,
 * cgroups, the seccomp program). See sandbox.ts for the whole design.
 */
import { accessSync, constants as fsConstants, lstatSync, readlinkSync, realpathSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { type UnitPrice } from "../../../src/capabilities/Provider.ts"
import { type ExecuteInput, MAX_EXECUTE_TIMEOUT_MS } from "../../../src/capabilities/schemas.ts"
import { type Cgroups, DEFAULT_CGROUP_ROOT, probeCgroups } from "./cgroup.ts"
import { compileFilter, seccompProblem } from "./seccomp.ts"


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
export const SHM_BYTES = 4 * 1024 * 1024
export const OPEN_FILES = 256
export const PROBE_TIMEOUT_MS = 15_000
export const SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
/** Mirrored from the host when present: symlinks stay symlinks, directories are bound read-only. */
export const SYSTEM_ENTRIES = ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]
export const SYSTEM_FILES = ["/etc/ld.so.cache", "/etc/alternatives"]

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

// ---------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------

export interface Interpreter {
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

export interface Settings {
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

export const MiB = 1024 * 1024

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
export const degradedReason = (settings: Settings): string | undefined => {
  const missing = [
    settings.cgroupProblem === undefined ? undefined : `no cgroup limits (memory, CPU, processes of the whole sandbox): ${settings.cgroupProblem}`,
    settings.seccompProblem === undefined ? undefined : `no seccomp filter: ${settings.seccompProblem}`
  ].filter((m) => m !== undefined)
  return missing.length === 0 ? undefined : missing.join("; ")
}

export const settingsOf = (options: SandboxOptions): Settings => {
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

/** What the start-up probe found. `unavailable` names the languages that cannot run here, with why. */
export type SandboxStatus =
  | {
    readonly ok: true
    readonly unavailable: { readonly [L in Language]?: string }
    /** Present when a protection is missing on this machine (cgroup limits, seccomp): which, and why. */
    readonly degraded?: string
  }
  | { readonly ok: false; readonly reason: string }

