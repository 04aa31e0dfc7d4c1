/**
 * The page-parsing worker thread (see parse-pool.ts): runs one task at a time
 * and answers with its result. Loaded by Node's type stripping, so it must
 * stay plain erasable TypeScript.
 */
import { parentPort } from "node:worker_threads"
import { Result } from "effect"
import { scrapeHtml } from "./scrapePage.ts"
import { makeTurndown, readHtml } from "./readPage.ts"
import type { ParseTask, WorkerReply } from "./parse-pool.ts"

const turndown = makeTurndown()

const perform = (task: ParseTask): unknown => {
  switch (task.kind) {
    case "read": {
      const read = readHtml(task.html, task.pageUrl, turndown)
      // Plain data crosses the thread boundary; a Result's prototype would not.
      return Result.isFailure(read) ? { ok: false, failure: read.failure } : { ok: true, output: read.success }
    }
    case "scrape":
      return scrapeHtml(task.html, task.pageUrl, task.input as Parameters<typeof scrapeHtml>[2], task.extraLinks ?? [])
    case "spin": {
      const until = Date.now() + task.ms
      while (Date.now() < until) {
        // Busy on purpose: a parse that never yields.
      }
      return null
    }
  }
}

const port = parentPort
if (port !== null) {
  port.on("message", (message: { readonly id: number; readonly task: ParseTask }) => {
    let reply: WorkerReply
    try {
      reply = { id: message.id, ok: true, value: perform(message.task) }
    } catch (error) {
      reply = { id: message.id, ok: false, message: error instanceof Error ? error.message : String(error) }
    }
    port.postMessage(reply)
  })
}
