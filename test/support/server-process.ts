import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

/**
 * The real `npm start` entry point (adapters/http/main.ts) as a child
 * process on an ephemeral port, for tests that restart or kill it.
 *
 * Unless the test gives it a TMPDIR, each server gets a temporary directory
 * of its own, removed once it has exited: a server killed while its
 * sandbox's start-up check runs leaves that check's call directories there,
 * not in the machine's temporary directory. Node's compile cache stays where
 * it would be, so starts keep it.
 */

const root = join(import.meta.dirname, "..", "..")

export interface ServerProcess {
  readonly child: ChildProcess
  readonly baseUrl: string
  readonly output: () => string
  /** SIGTERM, and waits for the exit. */
  readonly stop: () => Promise<void>
  /** SIGKILL (`kill -9`), and waits for the exit. */
  readonly kill9: () => Promise<void>
}

/** `args`: what Node runs (default: the server's own entry point; `["bin/spendgate.js", "serve"]` is `npm start`). */
export const startServerProcess = (
  env: Record<string, string>,
  timeoutMs = 30_000,
  args: ReadonlyArray<string> = [join(root, "adapters/http/main.ts")]
): Promise<ServerProcess> =>
  new Promise((resolve, reject) => {
    const ownTemp = env["TMPDIR"] === undefined ? mkdtempSync(join(tmpdir(), "spendgate-server-")) : undefined
    const temp = ownTemp === undefined ? {} : { TMPDIR: ownTemp, NODE_COMPILE_CACHE: join(tmpdir(), "node-compile-cache") }
    const child = spawn(process.execPath, args, {
      cwd: root,
      env: { PATH: process.env["PATH"] ?? "", PORT: "0", ...temp, ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    const exited = new Promise<void>((done) =>
      child.once("exit", () => {
        if (ownTemp !== undefined) rmSync(ownTemp, { recursive: true, force: true, maxRetries: 3 })
        done()
      })
    )
    const signal = (name: NodeJS.Signals) => () => {
      if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
      child.kill(name)
      return exited
    }
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`server did not start:\n${out}`))
    }, timeoutMs)
    const onData = (chunk: Buffer) => {
      out += chunk.toString()
      // Bounded: a long-running server keeps only the last 200 kB of its output.
      if (out.length > 400_000) out = out.slice(-200_000)
      const match = /Listening on (http:\/\/[^\s"]+)/.exec(out)
      if (match) {
        clearTimeout(timer)
        child.removeListener("exit", onEarlyExit)
        resolve({
          child,
          baseUrl: match[1]!.replace("[::]", "127.0.0.1").replace("0.0.0.0", "127.0.0.1"),
          output: () => out,
          stop: signal("SIGTERM"),
          kill9: signal("SIGKILL")
        })
      }
    }
    const onEarlyExit = (code: number | null) => {
      clearTimeout(timer)
      reject(new Error(`server exited with ${code}:\n${out}`))
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    child.once("exit", onEarlyExit)
  })
