import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber, Result } from "effect"
import { spawnSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import * as Sandbox from "../../adapters/providers/execute/sandbox.ts"
import { type Provider, ProviderFailure } from "../../src/capabilities/Provider.ts"
import type { ExecuteInput } from "../../src/capabilities/schemas.ts"

/**
 * The built-in sandbox, for real: bubblewrap runs every program below, and
 * each escape attempt is checked from the host side as well as from inside
 * (connections a listener saw, files left on the host, processes still
 * alive, the host's environment).
 */

const PRICE = 250n
const unitPrice = { per: "second", priceMicroUsd: PRICE } as const

/** Set in this process before any sandbox starts; must never be seen from inside one. */
const MARKER_VAR = "SPENDGATE_SANDBOX_TEST_MARKER"
const MARKER = `host-secret-${randomUUID()}`

let root = ""
let provider: Sandbox.SandboxProvider

beforeAll(async () => {
  process.env[MARKER_VAR] = MARKER
  // The per-call directories go here, so the tests can see them come and go.
  root = mkdtempSync(path.join(tmpdir(), "sandbox-test-"))
  chmodSync(root, 0o755)
  provider = await Effect.runPromise(Sandbox.make({ unitPrice, tempDir: root, maxTimeoutMs: 30_000 }))
})

afterAll(() => {
  delete process.env[MARKER_VAR]
  if (root !== "") rmSync(root, { recursive: true, force: true })
})

// ---------------------------------------------------------------------------
// Helpers

const input = (language: ExecuteInput["language"], code: string, timeout?: number): ExecuteInput =>
  timeout === undefined ? { language, code } : { language, code, timeout }

const quoteOf = (p: Provider<"execute">, request: ExecuteInput) => {
  const quoted = p.quote(request)
  if (Result.isFailure(quoted)) return assert.fail(`quote refused: ${String(quoted.failure)}`)
  return quoted.success
}

/** One call, quoted first, with a hard bound on the wait whatever the sandbox does. */
const execute = (request: ExecuteInput, p: Provider<"execute"> = provider) =>
  Effect.gen(function*() {
    const quote = quoteOf(p, request)
    const startedAt = Date.now()
    const metered = yield* p.run(request, quote).pipe(
      Effect.timeoutOrElse({ duration: "20 seconds", orElse: () => Effect.die(new Error("the call did not finish within 20 s")) })
    )
    return { ...metered, quote, elapsedMs: Date.now() - startedAt }
  })

const failureOf = (request: ExecuteInput, p: Provider<"execute">) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(p.run(request, quoteOf(p, request)))
    if (Exit.isSuccess(exit)) return assert.fail(`expected a failure, got ${JSON.stringify(exit.value.output)}`)
    assert.isFalse(Cause.hasDies(exit.cause), `a defect: ${Cause.pretty(exit.cause)}`)
    const error = Cause.squash(exit.cause)
    assert.instanceOf(error, ProviderFailure)
    return error as ProviderFailure
  })

/**
 * Live (non-zombie) processes of this file's sandboxes: in another PID
 * namespace than this one, with a call directory under `root` mounted (so
 * that sandboxes of anything else running on the machine are not counted).
 */
const sandboxedProcesses = (): number => {
  const own = readlinkSync("/proc/self/ns/pid")
  const mark = `/${path.basename(root)}/spendgate-sandbox-`
  let count = 0
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (readlinkSync(`/proc/${entry}/ns/pid`) === own) continue
      const state = /^State:\s+(\S)/m.exec(readFileSync(`/proc/${entry}/status`, "utf8"))?.[1]
      if (state === "Z" || state === "X") continue
      if (readFileSync(`/proc/${entry}/mountinfo`, "utf8").includes(mark)) count++
    } catch {
      // Exited while being looked at.
    }
  }
  return count
}

const callDirs = () => readdirSync(root).filter((name) => name.startsWith("spendgate-sandbox-"))

/** After every call: no process left and no directory left. */
const assertCleanedUp = () => {
  assert.strictEqual(sandboxedProcesses(), 0, "no sandboxed process outlives its call")
  assert.deepStrictEqual(callDirs(), [], "the call's directory was removed")
}

/** Largest gap between ticks of a 20 ms timer while `effect` runs: how responsive this process stayed. */
const withLagProbe = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    let last = Date.now()
    let worst = 0
    let peak = 0
    const timer = setInterval(() => {
      const now = Date.now()
      worst = Math.max(worst, now - last)
      last = now
      peak = Math.max(peak, sandboxedProcesses())
    }, 20)
    const result = yield* Effect.ensuring(effect, Effect.sync(() => clearInterval(timer)))
    return { result, worstLagMs: worst, peakProcesses: peak }
  })

// ---------------------------------------------------------------------------

describe("sandbox: running code", () => {
  it.live("the probe found bubblewrap and every interpreter working", () =>
    Effect.sync(() => {
      assert.deepStrictEqual(provider.status, { ok: true, unavailable: {} })
      assert.strictEqual(provider.name, "sandbox")
      assert.strictEqual(provider.capability, "execute")
    }))

  it.live("Python: stdout, stderr and the exit code", () =>
    Effect.gen(function*() {
      const result = yield* execute(input("python", "import sys\nprint('hello from python')\nprint('to stderr', file=sys.stderr)\nsys.exit(3)\n"))
      assert.strictEqual(result.output.stdout, "hello from python\n")
      assert.strictEqual(result.output.stderr, "to stderr\n")
      assert.strictEqual(result.output.exitCode, 3)
      assert.isFalse(result.output.timedOut)
      assert.isFalse(result.output.truncated)
      assert.isAbove(result.output.durationMs, 0)
      assert.strictEqual(result.actualMicroUsd, PRICE, "a quick call costs one second")
      assert.strictEqual(result.quote.microUsd, PRICE * 10n, "the quote assumes the default 10 s")
      assertCleanedUp()
    }))

  it.live("JavaScript runs on the gateway's own Node", () =>
    Effect.gen(function*() {
      const result = yield* execute(input("javascript", "console.log(process.version)\nconsole.error('oops')\nprocess.exitCode = 4\n"))
      assert.strictEqual(result.output.stdout, `${process.version}\n`)
      assert.strictEqual(result.output.stderr, "oops\n")
      assert.strictEqual(result.output.exitCode, 4)
      assertCleanedUp()
    }))

  it.live("bash: echo, stderr, exit codes, and exit 0", () =>
    Effect.gen(function*() {
      const failed = yield* execute(input("bash", "echo from bash\necho oops >&2\nexit 7\n"))
      assert.strictEqual(failed.output.stdout, "from bash\n")
      assert.strictEqual(failed.output.stderr, "oops\n")
      assert.strictEqual(failed.output.exitCode, 7)
      const ok = yield* execute(input("bash", "printf 'é ✓\\n'"))
      assert.strictEqual(ok.output.stdout, "é ✓\n")
      assert.strictEqual(ok.output.exitCode, 0)
      assertCleanedUp()
    }))

  it.live("the code is a file in the private /tmp, which is also the working directory; the environment is tiny", () =>
    Effect.gen(function*() {
      const secret = `code-text-${randomUUID()}`
      const result = yield* execute(input(
        "bash",
        `# ${secret}\npwd\nls /tmp\ntr '\\0' ' ' < /proc/$$/cmdline; echo\nenv | sort\nid -u; id -g\n`
      ))
      const [pwd, listing, cmdline, ...rest] = result.output.stdout.split("\n")
      assert.strictEqual(pwd, "/tmp")
      assert.strictEqual(listing, "main.sh")
      assert.match(cmdline, /^\S*bash \/tmp\/main\.sh $/)
      assert.notInclude(cmdline, secret)
      const env = rest.filter((line) => line.includes("="))
      assert.includeMembers(env, ["HOME=/tmp", "LANG=C.UTF-8", "PATH=/usr/local/bin:/usr/bin:/bin"])
      // Nothing beyond what bash sets itself.
      for (const line of env) assert.match(line, /^(HOME|LANG|PATH|PWD|SHLVL|_)=/)
      assert.include(result.output.stdout, "65534\n65534\n")
      assertCleanedUp()
    }))

  it.live("quotes the whole timeout, capped at the maximum", () =>
    Effect.sync(() => {
      assert.strictEqual(quoteOf(provider, input("python", "1", 1)).microUsd, PRICE)
      assert.strictEqual(quoteOf(provider, input("python", "1", 2500)).microUsd, PRICE * 3n)
      assert.strictEqual(quoteOf(provider, input("python", "1", 60_000)).microUsd, PRICE * 30n)
    }))
})

describe("sandbox: escapes are contained", () => {
  it.live("a fork bomb stops at the process limit and dies with the sandbox", () =>
    Effect.gen(function*() {
      // The classic one-liner: the shell returns at once and the whole PID namespace goes with it.
      const classic = yield* withLagProbe(execute(input("bash", ":(){ :|:& };:", 2000)))
      assert.isBelow(classic.result.elapsedMs, 5000)
      assert.isAtMost(classic.peakProcesses, Sandbox.DEFAULT_MAX_PROCESSES)
      assert.isBelow(classic.worstLagMs, 1000, "the gateway stayed responsive")
      assertCleanedUp()

      // The same with the shell kept alive: it runs into the deadline and is killed with every fork.
      const kept = yield* withLagProbe(execute(input("bash", ":(){ :|:& };:\nsleep 10\n", 2000)))
      assert.isTrue(kept.result.output.timedOut)
      assert.isNull(kept.result.output.exitCode)
      assert.include(kept.result.output.stderr, "Resource temporarily unavailable", "forks were refused")
      assert.isBelow(kept.result.elapsedMs, 2000 + 3000)
      assert.isAbove(kept.peakProcesses, 8, "the bomb did fork")
      assert.isAtMost(kept.peakProcesses, Sandbox.DEFAULT_MAX_PROCESSES)
      assert.isBelow(kept.worstLagMs, 1000, "the gateway stayed responsive")
      assertCleanedUp()
      const host = spawnSync("/bin/true")
      assert.strictEqual(host.status, 0, "the host can still start processes")
    }))

  it.live("an infinite loop is killed at the timeout and billed the timeout", () =>
    Effect.gen(function*() {
      const python = yield* execute(input("python", "while True:\n    pass\n", 1500))
      assert.isTrue(python.output.timedOut)
      assert.isNull(python.output.exitCode)
      assert.isAtLeast(python.output.durationMs, 1500)
      assert.isBelow(python.elapsedMs, 1500 + 2000)
      assert.strictEqual(python.actualMicroUsd, PRICE * 2n, "price × ceil(1.5 s)")
      assert.strictEqual(python.actualMicroUsd, python.quote.microUsd)
      assertCleanedUp()

      const node = yield* execute(input("javascript", "console.log('spinning'); for (;;) {}", 1000))
      assert.isTrue(node.output.timedOut)
      assert.strictEqual(node.output.stdout, "spinning\n", "output written before the deadline is kept")
      assert.strictEqual(node.actualMicroUsd, PRICE)
      assertCleanedUp()
    }))

  it.live("background and detached processes do not outlive the program", () =>
    Effect.gen(function*() {
      const result = yield* execute(input("bash", "setsid sleep 60 &\nnohup sleep 60 >/dev/null 2>&1 &\n(trap '' HUP TERM; sleep 60) &\necho started\n"))
      assert.strictEqual(result.output.stdout, "started\n")
      assert.strictEqual(result.output.exitCode, 0)
      assert.isBelow(result.elapsedMs, 5000)
      assertCleanedUp()
    }))

  it.live("no network: the host's listener sees no connection, and names do not resolve", () =>
    Effect.gen(function*() {
      const connections: Array<string> = []
      const server = net.createServer((socket) => {
        connections.push(String(socket.remoteAddress))
        socket.destroy()
      })
      const port = yield* Effect.promise(() =>
        new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port)))
      )
      yield* Effect.addFinalizer(() => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve()))))

      const python = yield* execute(input(
        "python",
        [
          "import socket, urllib.request",
          "try:",
          `    urllib.request.urlopen("http://127.0.0.1:${port}/", timeout=3)`,
          "    print('CONNECTED')",
          "except Exception as e:",
          "    print('http failed:', e)",
          "try:",
          "    print(socket.getaddrinfo('example.com', 80))",
          "except Exception as e:",
          "    print('dns failed:', e)",
          "print('interfaces:', [name for _, name in socket.if_nameindex()])",
          ""
        ].join("\n")
      ))
      assert.notInclude(python.output.stdout, "CONNECTED")
      assert.include(python.output.stdout, "http failed:")
      assert.include(python.output.stdout, "dns failed:")
      assert.include(python.output.stdout, "interfaces: ['lo']")

      const node = yield* execute(input(
        "javascript",
        `fetch("http://127.0.0.1:${port}/").then(() => console.log("CONNECTED"), (e) => console.log("fetch failed:", e.cause?.code ?? e.message))`
      ))
      assert.include(node.output.stdout, "fetch failed: ECONNREFUSED")

      const bash = yield* execute(input("bash", `echo hi > /dev/tcp/127.0.0.1/${port} && echo CONNECTED; test -e /etc/resolv.conf && echo HAS_RESOLV_CONF; exit 0`))
      assert.notInclude(bash.output.stdout, "CONNECTED")
      assert.notInclude(bash.output.stdout, "HAS_RESOLV_CONF")

      assert.deepStrictEqual(connections, [], "the listener on the host's 127.0.0.1 saw nothing")
      assertCleanedUp()
    }))

  it.live("writes outside /tmp fail; /tmp works and is gone afterwards", () =>
    Effect.gen(function*() {
      const name = `sandbox-escape-${randomUUID()}`
      const script = [
        `echo x > /usr/${name}; echo "usr=$?"`,
        `echo x > /etc/${name}; echo "etc=$?"`,
        `echo x > /${name}; echo "root=$?"`,
        `echo x > /proc/${name}; echo "proc=$?"`,
        `echo x > /tmp/x; echo "tmp=$?"`,
        // A tree the gateway must still remove: a locked directory with a file inside.
        "mkdir -p /tmp/d/e && echo deep > /tmp/d/e/f && chmod 000 /tmp/d/e /tmp/d && echo locked",
        "sleep 1"
      ].join("\n")
      const fiber = yield* Effect.forkChild(execute(input("bash", script, 10_000)))
      // While it runs, the file is in the call's directory on the host.
      let seen = false
      for (let i = 0; i < 100 && !seen; i++) {
        seen = callDirs().some((dir) => existsSync(path.join(root, dir, "x")))
        if (!seen) yield* Effect.sleep("20 millis")
      }
      assert.isTrue(seen, "/tmp/x was written into the host directory made for the call")
      const result = yield* Fiber.join(fiber)
      const lines = result.output.stdout.split("\n")
      for (const place of ["usr", "etc", "root", "proc"]) {
        const line = lines.find((l) => l.startsWith(`${place}=`))
        assert.isDefined(line)
        assert.notStrictEqual(line, `${place}=0`, `writing to ${place} must fail`)
      }
      assert.include(lines, "tmp=0")
      assert.include(lines, "locked")
      assert.include(result.output.stderr, "Read-only file system")
      for (const file of [`/usr/${name}`, `/etc/${name}`, `/${name}`]) assert.isFalse(existsSync(file), `${file} on the host`)
      assertCleanedUp()
    }))

  it.live("/etc/shadow, /root, /home and the gateway's files are not there", () =>
    Effect.gen(function*() {
      const bash = yield* execute(input(
        "bash",
        `cat /etc/shadow; echo "shadow=$?"\nls /root; echo "root=$?"\nls /home; echo "home=$?"\nls ${process.cwd()}; echo "cwd=$?"\nls /etc\n`
      ))
      for (const probe of ["shadow", "root", "home", "cwd"]) {
        assert.notInclude(bash.output.stdout.split("\n"), `${probe}=0`, `${probe} must not be readable`)
      }
      assert.include(bash.output.stderr, "/etc/shadow: No such file or directory")
      assert.deepStrictEqual(bash.output.stdout.split("\n").slice(4).filter((l) => l !== ""), ["alternatives", "ld.so.cache"])
      const python = yield* execute(input("python", "try:\n    print(open('/etc/shadow').read())\nexcept OSError as e:\n    print(type(e).__name__)\n"))
      assert.strictEqual(python.output.stdout, "FileNotFoundError\n")
      assertCleanedUp()
    }))

  it.live("/proc shows only the sandbox: PID 1 is its own init, and the host's environment never appears", () =>
    Effect.gen(function*() {
      assert.strictEqual(process.env[MARKER_VAR], MARKER)
      const result = yield* execute(input(
        "bash",
        [
          "echo \"environ=[$(tr '\\0' ' ' < /proc/1/environ)]\"",
          "echo \"pid1=$(sed -n 's/^Name:[[:space:]]*//p' /proc/1/status)\"",
          "echo \"pids=$(ls /proc | grep -cE '^[0-9]+$')\"",
          "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'",
          "env",
          ""
        ].join("\n")
      ))
      const everything = result.output.stdout + result.output.stderr
      assert.notInclude(everything, MARKER, "the host's environment leaked")
      assert.notInclude(everything, MARKER_VAR)
      assert.include(result.output.stdout, "environ=[]")
      assert.include(result.output.stdout, "pid1=bwrap")
      const pids = Number(/pids=(\d+)/.exec(result.output.stdout)?.[1])
      assert.isBelow(pids, 10, "only the sandbox's few processes are visible")
      const python = yield* execute(input("python", "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit())[:2])\nprint(os.environ.get('" + MARKER_VAR + "'))\n"))
      assert.strictEqual(python.output.stdout, "[1, 2]\nNone\n")
      assertCleanedUp()
    }))

  it.live("100 MB of output is cut at the cap and the call returns promptly", () =>
    Effect.gen(function*() {
      const flood = yield* execute(input("python", "print('x' * 100_000_000)\n", 20_000))
      assert.isTrue(flood.output.truncated)
      assert.strictEqual(flood.output.stdout.length, Sandbox.DEFAULT_MAX_OUTPUT_BYTES)
      assert.match(flood.output.stdout, /^x+$/)
      assert.isNull(flood.output.exitCode, "killed for writing past the discard limit")
      assert.isFalse(flood.output.timedOut)
      assert.isBelow(flood.elapsedMs, 5000)
      assertCleanedUp()

      // Somewhat past the cap: the rest is read and thrown away, and the program finishes normally.
      const chatty = yield* execute(input("python", "import sys\nsys.stderr.write('é' * 1_500_000)\nprint('done')\n"))
      assert.isTrue(chatty.output.truncated)
      assert.strictEqual(chatty.output.exitCode, 0)
      assert.strictEqual(chatty.output.stdout, "done\n")
      assert.strictEqual(chatty.output.stderr.length, Sandbox.DEFAULT_MAX_OUTPUT_BYTES / 2, "cut on a character boundary")
      assert.match(chatty.output.stderr, /^é+$/)
      assertCleanedUp()
    }))

  it.live("a 4 GB allocation fails inside the sandbox", () =>
    Effect.gen(function*() {
      const python = yield* execute(input("python", "data = bytearray(4 * 1024 ** 3)\nprint('ALLOCATED')\n"))
      assert.notInclude(python.output.stdout, "ALLOCATED")
      assert.include(python.output.stderr, "MemoryError")
      assert.strictEqual(python.output.exitCode, 1)

      // Shared anonymous memory is not data memory; the address-space limit stops it.
      const shared = yield* execute(input("python", "import mmap\nm = mmap.mmap(-1, 4 * 1024 ** 3)\nprint('MAPPED')\n"))
      assert.notInclude(shared.output.stdout, "MAPPED")
      assert.include(shared.output.stderr, "Cannot allocate memory")

      const node = yield* execute(input("javascript", "const b = Buffer.alloc(4 * 1024 ** 3); console.log('ALLOCATED', b.length)"))
      assert.notInclude(node.output.stdout, "ALLOCATED")
      assert.include(node.output.stderr, "Array buffer allocation failed")

      const heap = yield* execute(input("javascript", "const a = []; for (;;) a.push(new Array(1e6).fill(1.5))", 20_000))
      assert.isFalse(heap.output.timedOut)
      assert.notStrictEqual(heap.output.exitCode, 0)
      assert.include(heap.output.stderr, "heap out of memory")
      assertCleanedUp()
    }))

  it.live("an interrupted call kills the sandbox and removes its directory", () =>
    Effect.gen(function*() {
      const fiber = yield* Effect.forkChild(execute(input("bash", "echo x > /tmp/started\nsleep 30\n", 25_000)))
      let running = false
      for (let i = 0; i < 200 && !running; i++) {
        running = callDirs().some((dir) => existsSync(path.join(root, dir, "started")))
        if (!running) yield* Effect.sleep("20 millis")
      }
      assert.isTrue(running)
      assert.isAbove(sandboxedProcesses(), 0)
      const startedAt = Date.now()
      yield* Fiber.interrupt(fiber)
      assert.isBelow(Date.now() - startedAt, 3000)
      assertCleanedUp()
    }))
})

/**
 * A directory of the test's own (removed with its scope) holding a stand-in `bwrap`, a shell
 * script whose body `script` gives (told the directory), and an empty `calls` directory for the
 * sandbox's call directories.
 */
const fakeBwrap = (name: string, script: (dir: string) => string) =>
  Effect.gen(function*() {
    const dir = mkdtempSync(path.join(tmpdir(), `sandbox-test-${name}-`))
    chmodSync(dir, 0o755)
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    const fake = path.join(dir, "bwrap")
    writeFileSync(fake, `#!/bin/sh\n${script(dir)}\n`, { mode: 0o755 })
    const calls = path.join(dir, "calls")
    mkdirSync(calls, { mode: 0o755 })
    return { dir, fake, calls }
  })

describe("sandbox: the start-up probe", () => {
  it.live("is the one the configuration gives, run once for the provider and the health endpoint", () =>
    Effect.gen(function*() {
      // A bwrap that would fail: had the provider probed for itself, it would not find the given verdict.
      const options = { unitPrice, tempDir: root, bwrapPath: "/nonexistent/bwrap" }
      let runs = 0
      const given = Effect.sync((): Sandbox.SandboxStatus => {
        runs++
        return { ok: true, unavailable: { python: "python: not here" } }
      })
      const probed = yield* Effect.cached(Effect.andThen(Effect.sleep("50 millis"), given))
      // The provider and the status asked at once, as the two start-up layers do.
      const [provider, status] = yield* Effect.all([Sandbox.make(options, probed), probed], { concurrency: "unbounded" })
      assert.strictEqual(runs, 1)
      assert.deepStrictEqual(provider.status, status)
      assert.deepStrictEqual(provider.status, { ok: true, unavailable: { python: "python: not here" } })
      const error = yield* failureOf(input("python", "print(1)"), provider)
      assert.strictEqual(error.reason, "unavailable")
      assert.strictEqual(error.message, "python: not here")
    }))

  it.live("under way (makeProbing): the provider is built at once, and a call waits for the verdict, then acts on it", () =>
    Effect.gen(function*() {
      const options = { unitPrice, tempDir: root, maxTimeoutMs: 30_000 }
      const verdict = yield* Deferred.make<Sandbox.SandboxStatus>()
      let runs = 0
      const probed = yield* Effect.cached(Effect.andThen(Effect.sync(() => runs++), Deferred.await(verdict)))
      // Built while the probe has no verdict yet: nothing waits for it, nor runs it (the
      // configuration runs it once the server listens).
      const probing = yield* Sandbox.makeProbing(options, probed).pipe(
        Effect.timeoutOrElse({ duration: "5 seconds", orElse: () => Effect.die(new Error("makeProbing waited for the probe")) })
      )
      yield* Effect.sleep("50 millis")
      assert.strictEqual(runs, 0, "building the provider does not start the probe")
      assert.notProperty(probing, "status", "the configuration's ProviderStatuses reports the verdict, not the provider")
      const call = yield* Effect.forkChild(failureOf(input("python", "print(1)"), probing))
      yield* Effect.sleep("100 millis")
      assert.isUndefined(call.pollUnsafe(), "a call made before the verdict waits for it")
      assert.strictEqual(runs, 1, "a call that needs the verdict runs the probe if nothing has")
      yield* Deferred.succeed(verdict, { ok: false, reason: "bubblewrap is not installed here" })
      const error = yield* Fiber.join(call)
      assert.strictEqual(error.reason, "unavailable")
      assert.strictEqual(error.message, "bubblewrap is not installed here")
      // A working verdict: the same kind of provider runs code.
      const working = yield* Sandbox.makeProbing(options, Effect.succeed<Sandbox.SandboxStatus>({ ok: true, unavailable: {} }))
      const ran = yield* execute(input("python", "print(6 * 7)"), working)
      assert.strictEqual(ran.output.stdout, "42\n")
    }))

  it.live("runs every language at once, and a failing launcher makes the sandbox unavailable", () =>
    Effect.gen(function*() {
      // bwrap that records its start, waits (at most 10 s) until three have started, records its end,
      // then fails like a refused namespace. Probed one after another, the first would end alone
      // (and, bash failing, no other would start); side by side, all three start before any ends.
      // Its log is writable by whichever user the probe starts it as.
      const { dir, fake, calls } = yield* fakeBwrap(
        "launcher",
        (dir) =>
          [
            `log=${dir}/logs/log`,
            `echo start >> $log`,
            `i=0; while [ "$(grep -c start $log)" -lt 3 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done`,
            `echo end >> $log`,
            `echo "bwrap: No permissions to create new namespace" >&2`,
            `exit 1`
          ].join("\n")
      )
      const logs = path.join(dir, "logs")
      mkdirSync(logs)
      chmodSync(logs, 0o777)
      const status = yield* Sandbox.probe({ unitPrice, tempDir: calls, bwrapPath: fake })
      if (status.ok) return assert.fail("expected not ok")
      assert.include(status.reason, "No permissions to create new namespace")
      assert.strictEqual(readFileSync(path.join(logs, "log"), "utf8"), "start\nstart\nstart\nend\nend\nend\n")
    }))
})

describe("sandbox: unavailable", () => {
  it.live("a missing bwrap: unavailable with the reason, and nothing runs", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(path.join(tmpdir(), "sandbox-test-missing-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const options = { unitPrice, tempDir: dir, bwrapPath: "/nonexistent/bwrap" }
      const probed = yield* Sandbox.probe(options)
      assert.isFalse(probed.ok)
      const broken = yield* Sandbox.make(options)
      assert.deepStrictEqual(broken.status, probed)
      if (broken.status.ok) return assert.fail("expected not ok")
      assert.match(broken.status.reason, /bubblewrap is not installed: no executable at \/nonexistent\/bwrap/)
      const error = yield* failureOf(input("bash", `echo ran > ${dir}/ran`), broken)
      assert.strictEqual(error.reason, "unavailable")
      assert.strictEqual(error.message, broken.status.reason)
      assert.strictEqual(error.provider, "sandbox")
      assert.deepStrictEqual(readdirSync(dir), [], "no directory was made and nothing ran")
    }))

  it.live("a bwrap that cannot create the namespaces: unavailable with what it said", () =>
    Effect.gen(function*() {
      const { fake, calls } = yield* fakeBwrap("denied", () => "echo 'bwrap: No permissions to create new namespace' >&2\nexit 1")
      const broken = yield* Sandbox.make({ unitPrice, tempDir: calls, bwrapPath: fake })
      if (broken.status.ok) return assert.fail("expected not ok")
      assert.include(broken.status.reason, "bubblewrap could not create the sandbox: bwrap: No permissions to create new namespace")
      const error = yield* failureOf(input("python", "print(1)"), broken)
      assert.strictEqual(error.reason, "unavailable")
      assert.include(error.message, "No permissions to create new namespace")
    }))

  it.live("a missing interpreter makes only its language unavailable", () =>
    Effect.gen(function*() {
      const partial = yield* Sandbox.make({ unitPrice, tempDir: root, pythonPath: "/nonexistent/python3" })
      if (!partial.status.ok) return assert.fail(partial.status.reason)
      assert.strictEqual(partial.status.unavailable.python, "python: /nonexistent/python3 does not exist")
      assert.isUndefined(partial.status.unavailable.bash)
      const error = yield* failureOf(input("python", "print(1)"), partial)
      assert.strictEqual(error.reason, "unavailable")
      const bash = yield* execute(input("bash", "echo fine"), partial)
      assert.strictEqual(bash.output.stdout, "fine\n")
      assertCleanedUp()
    }))

  it.live("when every sandbox is busy, a call waits at most its timeout", () =>
    Effect.gen(function*() {
      const single = yield* Sandbox.make({ unitPrice, tempDir: root, maxConcurrent: 1 })
      const busy = yield* Effect.forkChild(execute(input("bash", "sleep 5", 1500), single))
      yield* Effect.sleep("200 millis")
      const error = yield* failureOf(input("bash", "echo second", 500), single)
      assert.strictEqual(error.reason, "rate_limited")
      const first = yield* Fiber.join(busy)
      assert.isTrue(first.output.timedOut)
      assertCleanedUp()
    }))
})
