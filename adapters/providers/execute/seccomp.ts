/**
 * The sandbox's seccomp filter: a classic-BPF program, built here, that
 * bubblewrap installs (`--seccomp FD`) on the code it runs, after setting up
 * the sandbox and before the launcher starts. Every process of the sandbox
 * inherits it and none can remove it.
 *
 * What it does, for x86_64 only (the program checks the architecture of
 * every system call first):
 *
 * - A call made through another ABI (i386 `int 0x80`, x32) fails with EPERM:
 *   the numbers below mean other calls there.
 * - The calls in `DENIED` fail with EPERM: tracing and reading other
 *   processes' memory (ptrace, process_vm_readv/writev), mounting and
 *   namespaces (mount, umount2, pivot_root, the new mount API, unshare,
 *   setns), kernel modules and kexec, BPF and perf events, the kernel
 *   keyring (keyctl, add_key, request_key), userfaultfd, io_uring, and the
 *   administrator's calls (reboot, swap, clock, quota, accounting, syslog,
 *   I/O ports, handle-based opens).
 * - `clone` with any namespace flag fails with EPERM; a plain fork or thread
 *   is allowed. `clone3` fails with ENOSYS: its flags are behind a pointer
 *   the filter cannot read, and the C library then falls back to `clone`.
 * - `personality` is allowed only to query (0xffffffff): no turning off
 *   address-space randomisation or other execution domains.
 * - Everything else is allowed.
 */

/** struct sock_filter: u16 code, u8 jt, u8 jf, u32 k (little-endian on x86_64). */
interface Instruction {
  readonly code: number
  readonly jt: number
  readonly jf: number
  readonly k: number
}

// Classic BPF opcodes (linux/filter.h, linux/bpf_common.h).
const BPF_LD_W_ABS = 0x00 | 0x00 | 0x20
const BPF_JMP_JEQ_K = 0x05 | 0x10 | 0x00
const BPF_JMP_JGE_K = 0x05 | 0x30 | 0x00
const BPF_JMP_JSET_K = 0x05 | 0x40 | 0x00
const BPF_RET_K = 0x06 | 0x00

// Return values (linux/seccomp.h).
const SECCOMP_RET_ALLOW = 0x7fff0000
const SECCOMP_RET_ERRNO = 0x00050000
const EPERM = 1
const ENOSYS = 38

// struct seccomp_data offsets: int nr; u32 arch; u64 instruction_pointer; u64 args[6].
const OFFSET_NR = 0
const OFFSET_ARCH = 4
/** The low 32 bits of the first argument. */
const OFFSET_ARG0_LOW = 16

/** AUDIT_ARCH_X86_64: EM_X86_64 (62) | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE. */
export const AUDIT_ARCH_X86_64 = 0xc000003e
/** x32 system calls are x86_64 numbers with this bit set. */
const X32_SYSCALL_BIT = 0x40000000

/** CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET. */
export const CLONE_NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
const PERSONALITY_QUERY = 0xffffffff

/** x86_64 system call numbers (asm/unistd_64.h). */
export const SYSCALLS = {
  ptrace: 101,
  syslog: 103,
  uselib: 134,
  personality: 135,
  vhangup: 153,
  pivot_root: 155,
  _sysctl: 156,
  adjtimex: 159,
  acct: 163,
  settimeofday: 164,
  mount: 165,
  umount2: 166,
  swapon: 167,
  swapoff: 168,
  reboot: 169,
  iopl: 172,
  ioperm: 173,
  create_module: 174,
  init_module: 175,
  delete_module: 176,
  get_kernel_syms: 177,
  query_module: 178,
  quotactl: 179,
  nfsservctl: 180,
  lookup_dcookie: 212,
  clock_settime: 227,
  kexec_load: 246,
  add_key: 248,
  request_key: 249,
  keyctl: 250,
  unshare: 272,
  perf_event_open: 298,
  open_by_handle_at: 304,
  clock_adjtime: 305,
  setns: 308,
  process_vm_readv: 310,
  process_vm_writev: 311,
  finit_module: 313,
  kexec_file_load: 320,
  bpf: 321,
  userfaultfd: 323,
  io_uring_setup: 425,
  io_uring_enter: 426,
  io_uring_register: 427,
  open_tree: 428,
  move_mount: 429,
  fsopen: 430,
  fsconfig: 431,
  fsmount: 432,
  fspick: 433,
  clone3: 435,
  mount_setattr: 442,
  clone: 56
} as const

/** Refused outright with EPERM. */
export const DENIED: ReadonlyArray<keyof typeof SYSCALLS> = [
  "ptrace", "process_vm_readv", "process_vm_writev",
  "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
  "unshare", "setns",
  "init_module", "finit_module", "delete_module", "create_module", "get_kernel_syms", "query_module",
  "kexec_load", "kexec_file_load",
  "bpf", "perf_event_open",
  "keyctl", "add_key", "request_key",
  "userfaultfd",
  "io_uring_setup", "io_uring_enter", "io_uring_register",
  "reboot", "swapon", "swapoff", "syslog", "acct", "quotactl", "settimeofday", "clock_settime", "adjtimex",
  "clock_adjtime", "iopl", "ioperm", "open_by_handle_at", "lookup_dcookie", "vhangup", "uselib", "nfsservctl", "_sysctl"
]

const load = (offset: number): Instruction => ({ code: BPF_LD_W_ABS, jt: 0, jf: 0, k: offset })
const ret = (value: number): Instruction => ({ code: BPF_RET_K, jt: 0, jf: 0, k: value >>> 0 })
const jump = (code: number, k: number, jt: number, jf: number): Instruction => ({ code, jt, jf, k: k >>> 0 })
const errno = (value: number) => ret(SECCOMP_RET_ERRNO | value)

/** The filter's instructions, in order. */
export const filterInstructions = (): ReadonlyArray<Instruction> => {
  const program: Array<Instruction> = [
    load(OFFSET_ARCH),
    // Not x86_64: refuse (skip the next instruction when it is).
    jump(BPF_JMP_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
    errno(EPERM),
    load(OFFSET_NR),
    // x32 numbers: refuse.
    jump(BPF_JMP_JGE_K, X32_SYSCALL_BIT, 0, 1),
    errno(EPERM)
  ]
  for (const name of DENIED) {
    program.push(jump(BPF_JMP_JEQ_K, SYSCALLS[name], 0, 1), errno(EPERM))
  }
  // clone3: ENOSYS, so that the C library uses clone, whose flags can be checked.
  program.push(jump(BPF_JMP_JEQ_K, SYSCALLS.clone3, 0, 1), errno(ENOSYS))
  // clone: refuse any namespace flag; otherwise allow.
  program.push(
    jump(BPF_JMP_JEQ_K, SYSCALLS.clone, 0, 4),
    load(OFFSET_ARG0_LOW),
    jump(BPF_JMP_JSET_K, CLONE_NAMESPACE_FLAGS, 0, 1),
    errno(EPERM),
    ret(SECCOMP_RET_ALLOW)
  )
  // personality: only the query.
  program.push(
    jump(BPF_JMP_JEQ_K, SYSCALLS.personality, 0, 4),
    load(OFFSET_ARG0_LOW),
    jump(BPF_JMP_JEQ_K, PERSONALITY_QUERY, 1, 0),
    errno(EPERM),
    ret(SECCOMP_RET_ALLOW)
  )
  program.push(ret(SECCOMP_RET_ALLOW))
  return program
}

/** The compiled program, as bubblewrap reads it from `--seccomp FD`: 8 bytes per instruction. */
export const compileFilter = (): Buffer => {
  const instructions = filterInstructions()
  const bytes = Buffer.alloc(instructions.length * 8)
  instructions.forEach((instruction, i) => {
    bytes.writeUInt16LE(instruction.code, i * 8)
    bytes.writeUInt8(instruction.jt, i * 8 + 2)
    bytes.writeUInt8(instruction.jf, i * 8 + 3)
    bytes.writeUInt32LE(instruction.k, i * 8 + 4)
  })
  return bytes
}

/** Why the filter cannot be used here, or undefined when it can. */
export const seccompProblem = (): string | undefined =>
  process.arch !== "x64"
    ? `the seccomp filter is built for x86_64 only; this machine is ${process.arch}`
    : process.platform !== "linux"
    ? "seccomp needs Linux"
    : undefined
