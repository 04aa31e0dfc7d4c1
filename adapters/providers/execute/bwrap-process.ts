/**
 * One run of bubblewrap as a child process of the gateway: its output kept
 * up to the caps (and drained past them, up to a limit), the status bwrap
 * reports on descriptor 3 (the sandbox's init pid, the program's exit code),
 * the seccomp program handed over on descriptor 4, the sandbox moved into
 * its cgroup before it may start (descriptor 5), the wall-time kill, and the
 * wait until every process of the sandbox is gone.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { readFileSync, readlinkSync } from "node:fs"
import type { Writable } from "node:stream"
import { StringDecoder } from "node:string_decoder"
import type { CallCgroup, CgroupReport } from "./cgroup.ts"

/** Output read and discarded past the caps, in all, before the program is killed. */
export const DISCARD_LIMIT_BYTES = 64 * 1024 * 1024
/** A sandbox that was killed must be gone within this; past it the call ends anyway. */
export const KILL_GRACE_MS = 5_000
/** What bwrap writes to its status descriptor is small; anything past this is ignored. */
const MAX_STATUS_CHARS = 16 * 1024
/** Descriptors bwrap is given beside the status (3): the seccomp program, and the one it waits on. */
export const SECCOMP_FD = 4
export const BLOCK_FD = 5

export interface ProcessSettings {
  readonly bwrapPath: string
  readonly maxOutputBytes: number
  /** Start bwrap as this uid/gid (the gateway runs as root). */
  readonly dropTo: { readonly uid: number; readonly gid: number } | undefined
  /** The compiled seccomp program, if any. */
  readonly seccomp: Buffer | undefined
}

export const oneLine = (text: string, max = 300): string => {
  const line = text.replace(/[\s\u0000-\u001f\u007f]+/g, " ").trim()
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
}

export const describeError = (error: unknown): string => {
  if (!(error instanceof Error)) return String(error)
  const code = (error as NodeJS.ErrnoException).code
  return code === undefined ? error.message : `${code}: ${error.message}`
}

/** What happened to one run, as the process saw it. */
export interface Outcome {
  /** bwrap reported the sandbox up (its init's pid); false means bwrap failed to set it up. */
  readonly started: boolean
  /** spawn itself failed (bwrap missing, not executable). */
  readonly spawnError: NodeJS.ErrnoException | undefined
  readonly stdout: string
  readonly stderr: string
  readonly truncated: boolean
  readonly timedOut: boolean
  /** Killed for writing more than the discard limit. */
  readonly flooded: boolean
  /** The program's exit status as bwrap reported it, else bwrap's own. */
  readonly exitCode: number | null
  readonly durationMs: number
  /** The sandbox could not be put in its cgroup (it was killed before the code started). */
  readonly setupError?: string | undefined
  /** What the kernel did to the sandbox's cgroup, when it had one. */
  readonly limits?: CgroupReport | undefined
}

export interface Running {
  readonly done: Promise<Outcome>
  /** SIGKILLs the sandbox and resolves once it is gone (or after a grace period). */
  readonly stop: () => Promise<void>
}

/** One stream kept up to `cap` bytes, decoded as UTF-8 without splitting a character at the cut. */
const collector = (cap: number) => {
  const decoder = new StringDecoder("utf8")
  let text = ""
  let kept = 0
  let cut = false
  return {
    /** Returns the bytes of the chunk that were thrown away. */
    push(chunk: Buffer): number {
      const room = cap - kept
      if (chunk.byteLength <= room) {
        text += decoder.write(chunk)
        kept += chunk.byteLength
        return 0
      }
      if (room > 0) {
        text += decoder.write(chunk.subarray(0, room))
        kept = cap
      }
      cut = true
      return chunk.byteLength - Math.max(room, 0)
    },
    get truncated() {
      return cut
    },
    /** A cut stream drops the incomplete character at its end; a whole one flushes it. */
    finish: () => (cut ? text : text + decoder.end())
  }
}

/** This process's PID namespace; a sandbox's init is in another one. */
let ownPidNamespace: string | undefined
const pidNamespaceOf = (pid: number | "self"): string | undefined => {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`)
  } catch {
    return undefined
  }
}

/** The sandbox's init, by its host pid, is still running (and is still that process: another PID namespace, not a zombie). */
const initAlive = (pid: number): boolean => {
  ownPidNamespace ??= pidNamespaceOf("self")
  const namespace = pidNamespaceOf(pid)
  if (namespace === undefined || ownPidNamespace === undefined || namespace === ownPidNamespace) return false
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const state = stat.charAt(stat.lastIndexOf(")") + 2)
    return state !== "Z" && state !== "X" && state !== ""
  } catch {
    return false
  }
}

/**
 * bwrap returns as soon as the program's exit status is known, while the
 * kernel may still be killing what the program left running. The sandbox's
 * init only finishes dying once every process of its PID namespace is gone,
 * so waiting for it means nothing of the sandbox is left when a call ends.
 * Should it linger, it is killed directly, which takes the namespace with it.
 */
const awaitTeardown = async (initPid: number | undefined): Promise<void> => {
  if (initPid === undefined) return
  const startedAt = performance.now()
  let killed = false
  while (initAlive(initPid) && performance.now() - startedAt < KILL_GRACE_MS) {
    if (!killed && performance.now() - startedAt > 100) {
      killed = true
      try {
        process.kill(initPid, "SIGKILL")
      } catch {
        // Gone meanwhile.
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

export const start = (
  settings: ProcessSettings,
  args: ReadonlyArray<string>,
  timeoutMs: number,
  cgroup: CallCgroup | undefined
): Running => {
  const startedAt = performance.now()
  let child: ChildProcess
  try {
    child = spawn(settings.bwrapPath, args, {
      stdio: [
        "ignore",
        "pipe",
        "pipe",
        "pipe",
        settings.seccomp === undefined ? "ignore" : "pipe",
        cgroup === undefined ? "ignore" : "pipe"
      ],
      // Nothing of the gateway's environment: the sandbox's PID 1 is a fork of bwrap and shows bwrap's environment in /proc/1/environ.
      env: {},
      // A process group of its own, so that all of it can be killed at once.
      detached: true,
      ...(settings.dropTo === undefined ? {} : settings.dropTo)
    })
  } catch (error) {
    const outcome: Outcome = {
      started: false,
      spawnError: error as NodeJS.ErrnoException,
      stdout: "",
      stderr: "",
      truncated: false,
      timedOut: false,
      flooded: false,
      exitCode: null,
      durationMs: 0
    }
    return { done: Promise.resolve(outcome), stop: () => Promise.resolve() }
  }

  const stdout = collector(settings.maxOutputBytes)
  const stderr = collector(settings.maxOutputBytes)
  let status = ""
  let discarded = 0
  let timedOut = false
  let flooded = false
  let spawnError: NodeJS.ErrnoException | undefined
  let setupError: string | undefined
  let adopted = false
  let closed = false
  const closedWaiters: Array<() => void> = []

  const kill = () => {
    if (closed) return
    try {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL")
    } catch {
      // Already gone, or never started.
    }
    try {
      child.kill("SIGKILL")
    } catch {
      // Already gone.
    }
  }
  const exitReported = () => /"exit-code"\s*:/.test(status)

  const timer = setTimeout(() => {
    // A program that finished at the very deadline has not timed out.
    if (closed || exitReported()) return
    timedOut = true
    kill()
  }, timeoutMs)

  const onOutput = (target: ReturnType<typeof collector>) => (chunk: Buffer) => {
    discarded += target.push(chunk)
    if (discarded > DISCARD_LIMIT_BYTES && !flooded && !timedOut) {
      flooded = true
      kill()
    }
  }
  child.stdout!.on("data", onOutput(stdout))
  child.stderr!.on("data", onOutput(stderr))
  const statusStream = child.stdio[3]
  const extra = child.stdio as unknown as ReadonlyArray<Writable | null | undefined>
  const seccompStream = extra[SECCOMP_FD]
  const blockStream = extra[BLOCK_FD]
  // bwrap reads the whole program (to end of file) before it installs it.
  if (settings.seccomp !== undefined) seccompStream?.end(settings.seccomp)
  statusStream?.on("data", (chunk: Buffer) => {
    if (status.length < MAX_STATUS_CHARS) status += chunk.toString("utf8")
    if (cgroup === undefined || adopted) return
    const initPid = /"child-pid"\s*:\s*(\d+)/.exec(status)
    if (initPid === null) return
    adopted = true
    // The sandbox's first process waits on the block descriptor: once it is in the cgroup, all it starts is too.
    try {
      cgroup.adopt(Number(initPid[1]))
      blockStream?.end("1")
    } catch (error) {
      setupError = `the sandbox could not be put in its cgroup: ${oneLine(describeError(error), 200)}`
      kill()
    }
  })
  for (const stream of [child.stdout, child.stderr, statusStream, seccompStream, blockStream]) stream?.on("error", () => {})

  const done = new Promise<Outcome>((resolve) => {
    const finish = (code: number | null) => {
      if (closed) return
      closed = true
      clearTimeout(timer)
      const durationMs = Math.max(0, Math.round(performance.now() - startedAt))
      const initPid = /"child-pid"\s*:\s*(\d+)/.exec(status)
      const reported = /"exit-code"\s*:\s*(-?\d+)/.exec(status)
      const exitCode = timedOut || flooded ? null : reported !== null ? Number(reported[1]) : code
      const outcome: Outcome = {
        started: initPid !== null,
        spawnError,
        stdout: stdout.finish(),
        stderr: stderr.finish(),
        truncated: stdout.truncated || stderr.truncated,
        timedOut,
        flooded,
        exitCode,
        durationMs,
        setupError,
        limits: undefined
      }
      void awaitTeardown(initPid === null ? undefined : Number(initPid[1])).then(() => {
        resolve(outcome)
        for (const waiter of closedWaiters.splice(0)) waiter()
      })
    }
    child.on("error", (error: NodeJS.ErrnoException) => {
      spawnError = error
      // No process: no "close" may follow; finish now.
      if (child.pid === undefined) finish(null)
    })
    child.on("close", (code) => finish(code))
  })

  const stop = () =>
    new Promise<void>((resolve) => {
      if (closed) return resolve()
      kill()
      const grace = setTimeout(() => {
        // Never seen in practice; the call must end regardless. Streams are dropped so nothing more is read.
        for (const stream of child.stdio) stream?.destroy()
        resolve()
      }, KILL_GRACE_MS)
      closedWaiters.push(() => {
        clearTimeout(grace)
        resolve()
      })
    })

  return { done, stop }
}
