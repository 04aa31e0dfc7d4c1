/**
 * The bwrap command line of one call: the launcher script that sets the
 * per-process limits, and bubblewrap's arguments (see sandbox.ts).
 */
import { BLOCK_FD, SECCOMP_FD } from "./bwrap-process.ts"
import { type Interpreter, type Language, OPEN_FILES, SANDBOX_GID, SANDBOX_PATH, SANDBOX_UID, type SandboxOptions, type Settings, settingsOf, SHM_BYTES } from "./settings.ts"

// ---------------------------------------------------------------------------
// The command line
// ---------------------------------------------------------------------------

const KiB = (bytes: number) => String(Math.max(1, Math.floor(bytes / 1024)))

/**
 * Sets the limits (hard and soft), closes every inherited descriptor above
 * stderr, then becomes the interpreter. A limit that cannot be set stops the
 * run: the code never starts without them.
 */
export const launcherScript = (settings: Settings, interpreter: Interpreter): string =>
  [
    `ulimit -c 0 -n ${OPEN_FILES} -f ${KiB(settings.maxFileBytes)} -d ${KiB(interpreter.dataBytes)}` +
    ` -v ${KiB(interpreter.addressBytes)} -u ${settings.cgroups === undefined ? settings.maxProcesses : settings.maxProcesses * 2}` +
    ` || { echo "sandbox: the resource limits could not be set" >&2; exit 125; }`,
    // No redirection here: bash would park stderr on a spare descriptor, which the loop would then close.
    `for f in /proc/self/fd/*; do n=\${f##*/}; if [ "$n" -gt 2 ] && [ -e "$f" ]; then eval "exec $n>&-"; fi; done`,
    `exec "$@"`
  ].join("\n")

/** bwrap's arguments for one run of `language`, with `dir` as /tmp. */
export const sandboxArguments = (settings: Settings, language: Language, dir: string): Array<string> => {
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
