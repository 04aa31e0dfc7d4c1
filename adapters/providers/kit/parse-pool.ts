/**
 * Page parsing off the event loop. linkedom + Readability + turndown are
 * synchronous and, on a hostile page, slow (seconds of CPU for wide or deep
 * markup): run on the gateway's event loop they would stall every request.
 * Here each parse runs in a worker thread (`parse-worker.ts`) of a small
 * pool shared by the built-in reader and scraper:
 *
 * - At most `maxWorkers` threads (default 2) parse at once; at most
 *   `maxQueued` parses (default 32) wait for one. A parse that finds the
 *   queue full fails at once (`rate_limited`).
 * - Every parse has a deadline (default 10 s), counted from when it was
 *   asked for, queue wait included. A parse still waiting then is dropped; a
 *   parse still running has its worker terminated (a new one is started for
 *   the next parse). The call fails with `timeout`, so its hold is released.
 * - An interrupted call drops its parse the same way.
 * - Each worker's V8 heap is capped (`heapMb`, default 512 MiB); a page that
 *   needs more kills only its worker and fails as `too_large`.
 *
 * The worker is a `.ts` file loaded by Node's own type stripping, as the
 * gateway itself is (`node adapters/http/main.ts`).
 */
import { Effect } from "effect"
import { Worker } from "node:worker_threads"

export const DEFAULT_PARSE_DEADLINE_MS = 10_000
export const DEFAULT_MAX_WORKERS = 2
export const DEFAULT_MAX_QUEUED = 32
export const DEFAULT_WORKER_HEAP_MB = 512

/** What a worker is asked to do: the same functions the providers used to call in place. */
export type ParseTask =
  | { readonly kind: "read"; readonly html: string; readonly pageUrl: string }
  | {
    readonly kind: "scrape"
    readonly html: string
    readonly pageUrl: string
    readonly input: { readonly selectors?: Readonly<Record<string, string>> | undefined; readonly includeHtml?: boolean | undefined }
    readonly extraLinks?: ReadonlyArray<string>
  }
  /** For tests: keeps the worker busy for `ms` (a stand-in for a page that takes that long to parse). */
  | { readonly kind: "spin"; readonly ms: number }

/** A worker's answer: the task's value (structured-cloned), or what the task threw. */
export type WorkerReply =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly id: number; readonly ok: false; readonly message: string }

/** Why a parse produced nothing. */
export interface ParseFailure {
  readonly reason: "timeout" | "rate_limited" | "too_large" | "malformed"
  readonly message: string
}

export interface PoolOptions {
  readonly maxWorkers?: number | undefined
  readonly maxQueued?: number | undefined
  readonly heapMb?: number | undefined
}

interface Job {
  readonly id: number
  readonly task: ParseTask
  readonly done: (outcome: { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly failure: ParseFailure }) => void
  worker: Worker | undefined
  finished: boolean
}

// The worker sits next to this module: `.ts` when run from the sources, `.js` once built (dist/).
const WORKER_URL = new URL(import.meta.url.endsWith(".ts") ? "./parse-worker.ts" : "./parse-worker.js", import.meta.url)

export interface ParsePool {
  /** Runs `task` in a worker, failing after `deadlineMs`. */
  readonly run: (task: ParseTask, deadlineMs: number) => Effect.Effect<unknown, ParseFailure>
  /** Threads alive now (idle or busy), and parses waiting. */
  readonly stats: () => { readonly workers: number; readonly busy: number; readonly queued: number }
  /** Starts one worker ahead of the first parse (loading the parser takes a moment). */
  readonly warm: () => void
  /** Terminates every worker; waiting and running parses fail. */
  readonly close: () => Promise<void>
}

export const makePool = (options: PoolOptions = {}): ParsePool => {
  const maxWorkers = Math.max(1, Math.floor(options.maxWorkers ?? DEFAULT_MAX_WORKERS))
  const maxQueued = Math.max(0, Math.floor(options.maxQueued ?? DEFAULT_MAX_QUEUED))
  const heapMb = Math.max(32, Math.floor(options.heapMb ?? DEFAULT_WORKER_HEAP_MB))
  const idle: Array<Worker> = []
  const busy = new Map<Worker, Job>()
  const queue: Array<Job> = []
  let nextId = 1

  const finish = (job: Job, outcome: Parameters<Job["done"]>[0]) => {
    if (job.finished) return
    job.finished = true
    job.done(outcome)
  }

  /** A worker that may still be running a job is never reused: it is terminated and forgotten. */
  const discard = (worker: Worker) => {
    busy.delete(worker)
    const at = idle.indexOf(worker)
    if (at >= 0) idle.splice(at, 1)
    worker.removeAllListeners()
    // An error after this (it is being terminated) must not become an uncaught exception.
    worker.on("error", () => {})
    void worker.terminate().catch(() => undefined)
  }

  const spawn = (): Worker => {
    const worker = new Worker(WORKER_URL, {
      // Test runners may add loaders to this process; the worker needs only Node's own type stripping.
      execArgv: [],
      resourceLimits: { maxOldGenerationSizeMb: heapMb },
      stdout: false,
      stderr: false
    })
    worker.unref()
    worker.on("message", (reply: WorkerReply) => {
      const job = busy.get(worker)
      if (job === undefined || job.id !== reply.id) return
      busy.delete(worker)
      idle.push(worker)
      finish(job, reply.ok ? { ok: true, value: reply.value } : { ok: false, failure: { reason: "malformed", message: reply.message } })
      pump()
    })
    const lost = (failure: ParseFailure) => {
      const job = busy.get(worker)
      discard(worker)
      if (job !== undefined) finish(job, { ok: false, failure })
      pump()
    }
    worker.on("error", (error: Error & { code?: string }) =>
      lost(
        error.code === "ERR_WORKER_OUT_OF_MEMORY"
          ? { reason: "too_large", message: `the page needs more than ${heapMb} MiB to parse` }
          : { reason: "malformed", message: `the parser failed: ${error.message}` }
      ))
    worker.on("exit", (code) => lost({ reason: "malformed", message: `the parser exited (${code})` }))
    return worker
  }

  const pump = () => {
    while (queue.length > 0) {
      let worker = idle.pop()
      if (worker === undefined) {
        if (busy.size + idle.length >= maxWorkers) return
        worker = spawn()
      }
      const job = queue.shift()!
      job.worker = worker
      busy.set(worker, job)
      worker.ref()
      worker.postMessage({ id: job.id, task: job.task })
    }
  }

  /** The job is no longer wanted (deadline, interruption): out of the queue, or its worker terminated. */
  const abandon = (job: Job) => {
    const at = queue.indexOf(job)
    if (at >= 0) queue.splice(at, 1)
    if (job.worker !== undefined && busy.get(job.worker) === job) discard(job.worker)
    pump()
  }

  // Idle workers do not keep the process alive; busy ones do, until their job ends.
  const refresh = () => {
    for (const worker of idle) worker.unref()
  }

  const run = (task: ParseTask, deadlineMs: number): Effect.Effect<unknown, ParseFailure> =>
    Effect.callback<unknown, ParseFailure>((resume) => {
      if (queue.length >= maxQueued && idle.length === 0 && busy.size + idle.length >= maxWorkers) {
        resume(Effect.fail({ reason: "rate_limited", message: `the page parser is busy (${maxQueued} pages waiting)` }))
        return
      }
      let timer: ReturnType<typeof setTimeout> | undefined
      const job: Job = {
        id: nextId++,
        task,
        worker: undefined,
        finished: false,
        done: (outcome) => {
          if (timer !== undefined) clearTimeout(timer)
          refresh()
          resume(outcome.ok ? Effect.succeed(outcome.value) : Effect.fail(outcome.failure))
        }
      }
      timer = setTimeout(() => {
        if (job.finished) return
        abandon(job)
        finish(job, { ok: false, failure: { reason: "timeout", message: `the page took longer than ${deadlineMs} ms to parse` } })
      }, deadlineMs)
      queue.push(job)
      pump()
      return Effect.sync(() => {
        if (job.finished) return
        job.finished = true
        if (timer !== undefined) clearTimeout(timer)
        abandon(job)
      })
    })

  return {
    run,
    stats: () => ({ workers: idle.length + busy.size, busy: busy.size, queued: queue.length }),
    warm: () => {
      if (idle.length + busy.size === 0) idle.push(spawn())
    },
    close: async () => {
      for (const job of queue.splice(0)) finish(job, { ok: false, failure: { reason: "rate_limited", message: "the page parser was closed" } })
      const all = [...idle, ...busy.keys()]
      for (const [worker, job] of [...busy]) {
        discard(worker)
        finish(job, { ok: false, failure: { reason: "rate_limited", message: "the page parser was closed" } })
      }
      idle.length = 0
      await Promise.all(all.map((worker) => worker.terminate().catch(() => undefined)))
    }
  }
}

let shared: ParsePool | undefined
/** The process's pool, made on first use. */
export const sharedPool = (): ParsePool => (shared ??= makePool())
