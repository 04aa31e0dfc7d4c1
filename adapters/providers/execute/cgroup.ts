/**
 * Control groups for the sandbox: each call runs in a cgroup of its own with
 * a memory limit for the whole sandbox (every process together, swap
 * included where the kernel accounts it), a CPU quota and a process count
 * limit. The kernel enforces them: a sandbox over its memory is OOM-killed,
 * one over its CPU share is throttled, a fork past the count fails (EAGAIN).
 *
 * Both layouts are supported, found under `root` (default /sys/fs/cgroup):
 *
 * - cgroup v2 (unified): the calls' cgroups are made under
 *   `<root>/spendgate-sandbox` when the gateway's own cgroup is the root,
 *   else under `<root><own cgroup>/spendgate-sandbox` (which needs the
 *   gateway's cgroup to be delegated with its processes in a leaf). The
 *   `memory`, `cpu` and `pids` controllers are enabled on the way down.
 *   Limits: memory.max, memory.swap.max = 0, memory.oom.group = 1 (an OOM
 *   kills the whole sandbox), cpu.max, pids.max.
 * - cgroup v1 (one hierarchy per controller, as on older hosts and hybrid
 *   ones whose unified hierarchy has none of these controllers): a cgroup per
 *   call in each of the memory, cpu and pids hierarchies, below the
 *   gateway's own cgroup there. Limits: memory.limit_in_bytes (and
 *   memory.memsw.limit_in_bytes where swap is accounted), cpu.cfs_quota_us
 *   over cpu.cfs_period_us, pids.max.
 *
 * Whatever prevents this (no cgroup file system, not writable, a controller
 * missing, no delegation) is found by `probeCgroups` at start-up and reported
 * as the reason the sandbox is degraded; nothing is silently skipped later.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, statfsSync, writeFileSync } from "node:fs"
import * as path from "node:path"

export const DEFAULT_CGROUP_ROOT = "/sys/fs/cgroup"
/** The directory, below the gateway's cgroup, that holds one cgroup per running call. */
export const CGROUP_PARENT = "spendgate-sandbox"
const CGROUP2_SUPER_MAGIC = 0x63677270
const CGROUP_SUPER_MAGIC = 0x27e0eb
export const CPU_PERIOD_US = 100_000
const V1_CONTROLLERS = ["memory", "cpu", "pids"] as const

export interface CgroupLimits {
  /** For every process of the sandbox together. */
  readonly memoryBytes: number
  /** CPU time per wall time, in cores (0.5: half a core). */
  readonly cpus: number
  /** Processes and threads of the sandbox together. */
  readonly maxProcesses: number
}

/** What the kernel did to one call's cgroup. */
export interface CgroupReport {
  /** Processes killed for going over the memory limit. */
  readonly oomKills: number
  /** Forks refused at the process limit. */
  readonly forksRefused: number
}

/** One call's cgroup (one per hierarchy on v1). */
export interface CallCgroup {
  /** Moves a process (and so everything it starts afterwards) into the cgroup. */
  readonly adopt: (pid: number) => void
  readonly report: () => CgroupReport
  /** Kills what is left in it and removes it. */
  readonly remove: () => Promise<void>
}

export interface Cgroups {
  readonly version: "v1" | "v2"
  /** Where the calls' cgroups are made (one directory per hierarchy on v1). */
  readonly parents: ReadonlyArray<string>
  readonly create: (name: string, limits: CgroupLimits) => CallCgroup
  /** Removes empty call cgroups left by a gateway that was killed; returns how many. */
  readonly sweep: () => number
}

export type CgroupProbe = { readonly ok: true; readonly cgroups: Cgroups } | { readonly ok: false; readonly reason: string }

const describe = (error: unknown): string => {
  const code = (error as NodeJS.ErrnoException | undefined)?.code
  const message = error instanceof Error ? error.message : String(error)
  return code === undefined ? message : `${code}: ${message}`
}

const fsType = (dir: string): number | undefined => {
  try {
    return statfsSync(dir).type
  } catch {
    return undefined
  }
}

/** This process's cgroup paths: "" → the v2 path, else controller name → v1 path. */
const ownCgroups = (): Map<string, string> => {
  const found = new Map<string, string>()
  let text = ""
  try {
    text = readFileSync("/proc/self/cgroup", "utf8")
  } catch {
    return found
  }
  for (const line of text.split("\n")) {
    const match = /^\d+:([^:]*):(.*)$/.exec(line)
    if (match === null) continue
    for (const controller of match[1]!.split(",")) found.set(controller, match[2]!)
  }
  return found
}

const readNumber = (file: string, key: string): number => {
  try {
    const match = new RegExp(`^${key}\\s+(\\d+)$`, "m").exec(readFileSync(file, "utf8"))
    return match === null ? 0 : Number(match[1])
  } catch {
    return 0
  }
}

const pidsIn = (dir: string): Array<number> => {
  try {
    return readFileSync(path.join(dir, "cgroup.procs"), "utf8").split("\n").filter((l) => l !== "").map(Number)
  } catch {
    return []
  }
}

/** Kills every process left in `dir`, then removes it (a dying process keeps it busy for a moment). */
const killAndRemove = async (dir: string, killFile: boolean): Promise<void> => {
  for (let attempt = 0; attempt < 200; attempt++) {
    if (!existsSync(dir)) return
    if (killFile && existsSync(path.join(dir, "cgroup.kill"))) {
      try {
        writeFileSync(path.join(dir, "cgroup.kill"), "1")
      } catch {
        // Fall back to killing one by one.
      }
    }
    for (const pid of pidsIn(dir)) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // Gone meanwhile.
      }
    }
    try {
      rmdirSync(dir)
      return
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === "ENOENT") return
      if (code !== "EBUSY") throw error
    }
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

const write = (dir: string, file: string, value: string) => writeFileSync(path.join(dir, file), value)

/** Writes a setting the kernel may not offer (swap accounting off); a missing file is not an error. */
const writeIfPresent = (dir: string, file: string, value: string) => {
  if (existsSync(path.join(dir, file))) write(dir, file, value)
}

const cpuQuotaUs = (cpus: number) => Math.max(1000, Math.round(cpus * CPU_PERIOD_US))

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

const sweepParent = (parent: string): number => {
  let removed = 0
  let entries: Array<string> = []
  try {
    entries = readdirSync(parent, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name)
  } catch {
    return 0
  }
  for (const entry of entries) {
    // Named `<pid>-…` by the gateway that made it: one of a gateway still running (made, not yet filled) is left alone.
    const owner = Number(/^(\d+)-/.exec(entry)?.[1] ?? Number.NaN)
    if (Number.isInteger(owner) && alive(owner)) continue
    try {
      // Only an empty cgroup can be removed: one whose processes still run stays.
      rmdirSync(path.join(parent, entry))
      removed++
    } catch {
      // Busy, or not ours.
    }
  }
  return removed
}

// ---------------------------------------------------------------------------
// v2
// ---------------------------------------------------------------------------

const enableControllers = (dir: string, wanted: ReadonlyArray<string>) => {
  const enabled = readFileSync(path.join(dir, "cgroup.subtree_control"), "utf8").split(/\s+/)
  const missing = wanted.filter((c) => !enabled.includes(c))
  if (missing.length > 0) write(dir, "cgroup.subtree_control", missing.map((c) => `+${c}`).join(" "))
}

const v2 = (root: string): CgroupProbe => {
  const available = readFileSync(path.join(root, "cgroup.controllers"), "utf8").split(/\s+/)
  const missing = ["memory", "cpu", "pids"].filter((c) => !available.includes(c))
  if (missing.length > 0) {
    return { ok: false, reason: `the cgroup v2 hierarchy at ${root} lacks the ${missing.join(", ")} controller(s)` }
  }
  const own = ownCgroups().get("") ?? "/"
  const base = path.join(root, own)
  const parent = path.join(base, CGROUP_PARENT)
  try {
    // Down from the root to our parent, the controllers must be enabled at every level.
    let dir = root
    for (const part of path.relative(root, base).split(path.sep).filter((p) => p !== "")) {
      enableControllers(dir, ["memory", "cpu", "pids"])
      dir = path.join(dir, part)
    }
    enableControllers(base, ["memory", "cpu", "pids"])
    mkdirSync(parent, { recursive: true })
    enableControllers(parent, ["memory", "cpu", "pids"])
  } catch (error) {
    return {
      ok: false,
      reason: `cgroup v2 at ${root}: cannot make ${parent} with the memory, cpu and pids controllers (${describe(error)}); ` +
        `run the gateway in a delegated cgroup (its processes in a leaf) or as root in the root cgroup`
    }
  }
  const cgroups: Cgroups = {
    version: "v2",
    parents: [parent],
    sweep: () => sweepParent(parent),
    create: (name, limits) => {
      const dir = path.join(parent, name)
      mkdirSync(dir)
      try {
        write(dir, "memory.max", String(limits.memoryBytes))
        writeIfPresent(dir, "memory.swap.max", "0")
        writeIfPresent(dir, "memory.oom.group", "1")
        write(dir, "cpu.max", `${cpuQuotaUs(limits.cpus)} ${CPU_PERIOD_US}`)
        write(dir, "pids.max", String(limits.maxProcesses))
      } catch (error) {
        try {
          rmdirSync(dir)
        } catch {
          // Reported below anyway.
        }
        throw error
      }
      return {
        adopt: (pid) => write(dir, "cgroup.procs", String(pid)),
        report: () => ({
          oomKills: readNumber(path.join(dir, "memory.events"), "oom_kill"),
          forksRefused: readNumber(path.join(dir, "pids.events"), "max")
        }),
        remove: () => killAndRemove(dir, true)
      }
    }
  }
  return { ok: true, cgroups }
}

// ---------------------------------------------------------------------------
// v1
// ---------------------------------------------------------------------------

const v1 = (root: string): CgroupProbe => {
  const own = ownCgroups()
  const parents: Record<(typeof V1_CONTROLLERS)[number], string> = { memory: "", cpu: "", pids: "" }
  for (const controller of V1_CONTROLLERS) {
    const mount = path.join(root, controller)
    if (fsType(mount) !== CGROUP_SUPER_MAGIC) {
      return { ok: false, reason: `no cgroup v1 ${controller} hierarchy at ${mount} (and no cgroup v2 at ${root})` }
    }
    // Below our own cgroup when it is visible here, so that the host's limits on the gateway cover the sandboxes too.
    const mine = own.get(controller)
    const base = mine !== undefined && existsSync(path.join(mount, mine)) ? path.join(mount, mine) : mount
    parents[controller] = path.join(base, CGROUP_PARENT)
    try {
      mkdirSync(parents[controller], { recursive: true })
    } catch (error) {
      return { ok: false, reason: `cgroup v1: cannot make ${parents[controller]} (${describe(error)})` }
    }
  }
  const cgroups: Cgroups = {
    version: "v1",
    parents: Object.values(parents),
    sweep: () => Object.values(parents).reduce((n, parent) => n + sweepParent(parent), 0),
    create: (name, limits) => {
      const dirs = { memory: path.join(parents.memory, name), cpu: path.join(parents.cpu, name), pids: path.join(parents.pids, name) }
      const made: Array<string> = []
      try {
        for (const dir of Object.values(dirs)) {
          mkdirSync(dir)
          made.push(dir)
        }
        write(dirs.memory, "memory.limit_in_bytes", String(limits.memoryBytes))
        try {
          writeIfPresent(dirs.memory, "memory.memsw.limit_in_bytes", String(limits.memoryBytes))
        } catch {
          // Swap accounting present but not settable: the memory limit still holds.
        }
        write(dirs.cpu, "cpu.cfs_period_us", String(CPU_PERIOD_US))
        write(dirs.cpu, "cpu.cfs_quota_us", String(cpuQuotaUs(limits.cpus)))
        write(dirs.pids, "pids.max", String(limits.maxProcesses))
      } catch (error) {
        for (const dir of made.reverse()) {
          try {
            rmdirSync(dir)
          } catch {
            // Reported below anyway.
          }
        }
        throw error
      }
      return {
        adopt: (pid) => {
          for (const dir of Object.values(dirs)) write(dir, "cgroup.procs", String(pid))
        },
        report: () => ({
          oomKills: readNumber(path.join(dirs.memory, "memory.oom_control"), "oom_kill"),
          forksRefused: readNumber(path.join(dirs.pids, "pids.events"), "max")
        }),
        remove: async () => {
          for (const dir of Object.values(dirs)) await killAndRemove(dir, false)
        }
      }
    }
  }
  return { ok: true, cgroups }
}

/**
 * Finds how calls can be put in cgroups under `root`, makes the parent
 * cgroup(s), and checks that a call's cgroup can be made with its limits
 * (then removes it). A reason when they cannot.
 */
export const probeCgroups = (root: string = DEFAULT_CGROUP_ROOT): CgroupProbe => {
  if (process.platform !== "linux") return { ok: false, reason: "cgroups need Linux" }
  if (!path.isAbsolute(root)) return { ok: false, reason: `the cgroup root must be an absolute path, got "${root}"` }
  if (!existsSync(root)) return { ok: false, reason: `no cgroup file system at ${root}` }
  let probe: CgroupProbe
  try {
    probe = fsType(root) === CGROUP2_SUPER_MAGIC
      ? v2(root)
      : fsType(path.join(root, "memory")) === CGROUP_SUPER_MAGIC
      ? v1(root)
      : { ok: false, reason: `no cgroup file system at ${root} (neither a cgroup v2 hierarchy nor cgroup v1 controllers)` }
  } catch (error) {
    return { ok: false, reason: `cgroups at ${root} cannot be used: ${describe(error)}` }
  }
  if (!probe.ok) return probe
  try {
    const trial = probe.cgroups.create(`${process.pid}-probe-${Date.now().toString(36)}`, {
      memoryBytes: 64 * 1024 * 1024,
      cpus: 1,
      maxProcesses: 8
    })
    void trial.remove()
  } catch (error) {
    return { ok: false, reason: `cgroup ${probe.cgroups.version} at ${root}: a call's cgroup cannot be made with its limits (${describe(error)})` }
  }
  return probe
}
