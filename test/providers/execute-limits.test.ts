import { assert, describe, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { probeCgroups } from "../../adapters/providers/execute/cgroup.ts"
import * as Sandbox from "../../adapters/providers/execute/sandbox.ts"
import { compileFilter, DENIED, filterInstructions, SYSCALLS } from "../../adapters/providers/execute/seccomp.ts"
import type { ExecuteInput } from "../../src/capabilities/schemas.ts"

/**
 * The sandbox's kernel-enforced limits, for real: a cgroup per call (memory
 * of the whole sandbox, CPU quota, process count) and the seccomp filter;
 * and the degraded report when the machine does not allow them.
 */

const unitPrice = { per: "second", priceMicroUsd: 1n } as const
const cgroupsHere = probeCgroups()
const seccompHere = process.arch === "x64"

let root = ""
beforeAll(() => {
  root = mkdtempSync(path.join(tmpdir(), "sandbox-limits-"))
  chmodSync(root, 0o755)
})
afterAll(() => {
  if (root !== "") rmSync(root, { recursive: true, force: true })
})

const make = (options: Partial<Sandbox.SandboxOptions> = {}) => Sandbox.make({ unitPrice, tempDir: root, ...options })

const run = (provider: Sandbox.SandboxProvider, language: ExecuteInput["language"], code: string, timeout = 10_000) =>
  Effect.gen(function*() {
    const request: ExecuteInput = { language, code, timeout }
    const quote = provider.quote(request)
    if (Result.isFailure(quote)) return assert.fail("quote refused")
    const metered = yield* provider.run(request, quote.success).pipe(
      Effect.timeoutOrElse({ duration: "30 seconds", orElse: () => Effect.die(new Error("the call did not finish within 30 s")) })
    )
    return metered.output
  })

/** No call cgroup is left behind under the sandbox's parent cgroups. */
const assertNoCgroupsLeft = () => {
  if (!cgroupsHere.ok) return
  for (const parent of cgroupsHere.cgroups.parents) {
    const mine = existsSync(parent)
      ? readdirSync(parent, { withFileTypes: true }).filter((e) => e.isDirectory() && e.name.startsWith(`${process.pid}-`))
      : []
    assert.deepStrictEqual(mine.map((e) => e.name), [], `no call cgroup left in ${parent}`)
  }
}

describe.skipIf(!cgroupsHere.ok)("sandbox cgroup limits", () => {
  it.live("the probe finds cgroups and seccomp here: nothing degraded", () =>
    Effect.gen(function*() {
      const provider = yield* make()
      if (!provider.status.ok) return assert.fail(provider.status.reason)
      if (seccompHere) assert.isUndefined(provider.status.degraded)
      const inside = yield* run(provider, "bash", "cat /proc/self/cgroup")
      assert.match(inside.stdout, /spendgate-sandbox\/\d+-/, "the code runs in its call's cgroup")
      assertNoCgroupsLeft()
    }))

  it.live("a process that allocates beyond the sandbox's memory is killed, and the answer says so", () =>
    Effect.gen(function*() {
      // 256 MiB per process (rlimit) but 96 MiB for the whole sandbox (cgroup): the cgroup is what stops it.
      const provider = yield* make({ sandboxMemoryBytes: 96 * 1024 * 1024 })
      const output = yield* run(
        provider,
        "python",
        "import sys\nprint('start', flush=True)\nblocks = []\nfor i in range(20):\n    blocks.append(b'x' * (10 * 1024 * 1024))\nprint('survived', len(blocks))\n"
      )
      assert.include(output.stdout, "start")
      assert.notInclude(output.stdout, "survived")
      assert.strictEqual(output.exitCode, 128 + 9, "killed by SIGKILL")
      assert.include(output.stderr, "[sandbox] memory limit reached (96 MiB for the whole sandbox): 1 process was killed")
      assertNoCgroupsLeft()
    }))

  it.live("the memory limit covers all the sandbox's processes together", () =>
    Effect.gen(function*() {
      // Each child stays under the per-process limit; together they are over the sandbox's.
      const provider = yield* make({ sandboxMemoryBytes: 160 * 1024 * 1024 })
      const output = yield* run(
        provider,
        "python",
        [
          "import os, time",
          "children = []",
          "for i in range(4):",
          "    pid = os.fork()",
          "    if pid == 0:",
          "        block = b'x' * (60 * 1024 * 1024)",
          "        time.sleep(1.5)",
          "        os._exit(0)",
          "    children.append(pid)",
          "killed = sum(1 for pid in children if os.waitpid(pid, 0)[1] & 0x7f == 9)",
          "print('killed', killed)"
        ].join("\n")
      )
      assert.match(output.stdout, /killed [1-4]/)
      assert.notInclude(output.stdout, "killed 0")
      assert.include(output.stderr, "[sandbox] memory limit reached")
    }))

  it.live("a CPU hog is throttled to the sandbox's share of a core", () =>
    Effect.gen(function*() {
      const provider = yield* make({ cpus: 0.2 })
      const output = yield* run(
        provider,
        "python",
        "import time\nwall = time.time(); cpu = time.process_time()\nwhile time.time() - wall < 2.0:\n    pass\nprint(round((time.process_time() - cpu) / (time.time() - wall), 3))\n"
      )
      const share = Number(output.stdout.trim())
      assert.isAbove(share, 0.05, "it did run")
      assert.isAtMost(share, 0.3, `CPU time per wall time ${share} stays near the 0.2 quota`)
    }))

  it.live("a fork bomb is stopped by the cgroup's process limit, and the answer says so", () =>
    Effect.gen(function*() {
      const provider = yield* make({ maxProcesses: 32 })
      const output = yield* run(provider, "bash", ":(){ :|:& };:\nsleep 3\n", 2000)
      assert.isTrue(output.timedOut)
      assert.include(output.stderr, "Resource temporarily unavailable")
      assert.match(output.stderr, /\[sandbox\] process limit reached \(32\): \d+ forks? (was|were) refused/)
      assertNoCgroupsLeft()
    }))
})

describe.skipIf(!seccompHere)("sandbox seccomp filter", () => {
  /** Each probe prints `name=<errno>` (0: the call succeeded). */
  const PROBES = [
    "import ctypes, os, threading, subprocess",
    "libc = ctypes.CDLL(None, use_errno=True)",
    "libc.syscall.restype = ctypes.c_long",
    "def call(name, nr, *args):",
    "    ctypes.set_errno(0)",
    "    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])",
    "    print(f'{name}={0 if r >= 0 else ctypes.get_errno()}', flush=True)",
    "print([l for l in open('/proc/self/status').read().splitlines() if l.startswith('Seccomp:')][0].replace('\\t', ' '))",
    `call('ptrace', ${SYSCALLS.ptrace}, 0, 0, 0, 0)`,
    `call('personality', ${SYSCALLS.personality}, 0x0040000)`,
    `call('personality_query', ${SYSCALLS.personality}, 0xffffffff)`,
    "buf = ctypes.create_string_buffer(16)",
    "class iovec(ctypes.Structure): _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]",
    "local = iovec(ctypes.addressof(buf), 8); remote = iovec(ctypes.addressof(buf), 8)",
    `call('process_vm_readv', ${SYSCALLS.process_vm_readv}, os.getpid(), ctypes.addressof(local), 1, ctypes.addressof(remote), 1, 0)`,
    "os.makedirs('/tmp/m', exist_ok=True)",
    `call('mount', ${SYSCALLS.mount}, ctypes.addressof(ctypes.create_string_buffer(b'none')), ctypes.addressof(ctypes.create_string_buffer(b'/tmp/m')), ctypes.addressof(ctypes.create_string_buffer(b'tmpfs')), 0, 0)`,
    `call('unshare', ${SYSCALLS.unshare}, 0x10000000)`,
    `call('clone_newuser', ${SYSCALLS.clone}, 0x10000000 | 17, 0, 0, 0, 0)`,
    `call('bpf', ${SYSCALLS.bpf}, 0, 0, 0)`,
    `call('keyctl', ${SYSCALLS.keyctl}, 0, 0, 0, 0, 0)`,
    `call('userfaultfd', ${SYSCALLS.userfaultfd}, 0)`,
    `call('clone3', ${SYSCALLS.clone3}, 0, 0)`,
    "t = threading.Thread(target=lambda: print('thread=0', flush=True)); t.start(); t.join()",
    "print('fork=' + subprocess.run(['sh', '-c', 'echo 0'], capture_output=True, text=True).stdout.strip(), flush=True)"
  ].join("\n")

  const resultsOf = (stdout: string) =>
    Object.fromEntries(stdout.split("\n").filter((l) => l.includes("=")).map((l) => l.split("=") as [string, string]))

  it.live("ptrace, mount, namespaces, BPF, keyrings and the rest fail with EPERM; threads and forks still work", () =>
    Effect.gen(function*() {
      const provider = yield* make()
      const output = yield* run(provider, "python", PROBES)
      assert.include(output.stdout, "Seccomp: 2", "a filter is installed")
      const results = resultsOf(output.stdout)
      const EPERM = "1"
      for (const name of ["ptrace", "personality", "process_vm_readv", "mount", "unshare", "clone_newuser", "bpf", "keyctl", "userfaultfd"]) {
        assert.strictEqual(results[name], EPERM, `${name} is refused with EPERM (${output.stdout} ${output.stderr})`)
      }
      assert.strictEqual(results["clone3"], "38", "clone3 is ENOSYS, so the C library falls back to clone")
      assert.strictEqual(results["personality_query"], "0", "querying the personality is allowed")
      assert.strictEqual(results["thread"], "0")
      assert.strictEqual(results["fork"], "0")
    }))

  it.live("without the filter the same ptrace, personality and process_vm_readv calls succeed (what the filter adds)", () =>
    Effect.gen(function*() {
      const provider = yield* make({ seccomp: false })
      if (!provider.status.ok) return assert.fail(provider.status.reason)
      assert.include(provider.status.degraded ?? "", "no seccomp filter: the seccomp filter is turned off by configuration")
      const output = yield* run(provider, "python", PROBES)
      assert.include(output.stdout, "Seccomp: 0")
      const results = resultsOf(output.stdout)
      assert.strictEqual(results["ptrace"], "0")
      assert.strictEqual(results["personality"], "0")
      assert.strictEqual(results["process_vm_readv"], "0")
    }))

  it("the program checks the architecture first and ends by allowing", () => {
    const program = filterInstructions()
    assert.deepStrictEqual(program[0], { code: 0x20, jt: 0, jf: 0, k: 4 }, "loads seccomp_data.arch")
    assert.deepStrictEqual(program[1], { code: 0x15, jt: 1, jf: 0, k: 0xc000003e }, "x86_64 or refuse")
    assert.deepStrictEqual(program.at(-1), { code: 0x06, jt: 0, jf: 0, k: 0x7fff0000 })
    assert.strictEqual(compileFilter().byteLength, program.length * 8)
    assert.isBelow(program.length, 4096, "within the kernel's BPF_MAXINSNS")
    for (const name of ["ptrace", "mount", "umount2", "kexec_load", "init_module", "finit_module", "bpf", "perf_event_open", "keyctl", "add_key", "request_key", "unshare", "setns", "process_vm_readv", "process_vm_writev", "userfaultfd"] as const) {
      assert.include(DENIED, name)
    }
  })
})

describe("sandbox degraded", () => {
  it.live("a cgroup root that is not a writable cgroup file system: degraded with the reason, and code still runs", () =>
    Effect.gen(function*() {
      const fake = mkdtempSync(path.join(tmpdir(), "not-a-cgroup-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(fake, { recursive: true, force: true })))
      for (const cgroupRoot of [fake, "/nonexistent/cgroup"]) {
        const provider = yield* make({ cgroupRoot })
        if (!provider.status.ok) return assert.fail(provider.status.reason)
        assert.include(provider.status.degraded ?? "", "no cgroup limits (memory, CPU, processes of the whole sandbox)")
        assert.include(provider.status.degraded ?? "", cgroupRoot)
        const output = yield* run(provider, "bash", "echo still sandboxed; grep -c spendgate-sandbox /proc/self/cgroup || true")
        assert.strictEqual(output.stdout, "still sandboxed\n0\n")
      }
      assert.deepStrictEqual(readdirSync(fake), [], "nothing was written under a root that is no cgroup file system")
    }))

  it.live("a cgroup v2 hierarchy without the memory, cpu and pids controllers: degraded, naming what is missing", () =>
    Effect.gen(function*() {
      // On a hybrid host the unified hierarchy holds none of them (they are bound to the v1 hierarchies).
      const unified = "/sys/fs/cgroup/unified"
      const controllers = existsSync(`${unified}/cgroup.controllers`) ? readFileSync(`${unified}/cgroup.controllers`, "utf8") : null
      if (controllers === null || /\bmemory\b/.test(controllers)) return
      const provider = yield* make({ cgroupRoot: unified })
      if (!provider.status.ok) return assert.fail(provider.status.reason)
      assert.include(provider.status.degraded ?? "", `the cgroup v2 hierarchy at ${unified} lacks the memory, cpu, pids controller(s)`)
    }))
})
