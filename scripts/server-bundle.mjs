// The server's bundle: `npm start` in a clone loads one bundled file (and the
// chunks of what it loads on use) instead of the 761 TypeScript and package
// modules a start loads from the sources (on PostgreSQL, the dev rails and one
// provider), which Node would resolve, read and link one by one at every start
// (docs/performance.md, "A bundled start"); the `spendgate` command's other
// subcommands (`spendgate mcp` among them) run from its second entry point.
//
// Made by `npm install` / `npm ci` (the "prepare" script, after the PGlite
// template) and by `npm run bundle`, into node_modules/.cache/spendgate/server-bundle/.
// It never fails the install: without a bundle, `npm start` runs the sources.
//
// The bundle is used only while it is what is checked out: its manifest lists
// every file it was made from (the project's sources and the packages bundled
// into it) with its size and modification time, and bin/spendgate.js runs the
// bundle only when every one still matches. Any edit, checkout or install that
// touches one of them sets the bundle aside until the next `npm run bundle`
// (or install); `SPENDGATE_BUNDLE=off` sets it aside always.
//
// Plain JavaScript, imported by bin/spendgate.js: nothing here loads esbuild
// unless a bundle is being built.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import { dirname, join, relative, resolve, sep } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

/** Bumped when the manifest's shape or the build's options change: an older bundle is not used. */
export const BUNDLE_FORMAT = 2

/**
 * The bundle's entry points: the server (what `npm start` runs) and the
 * command line (every other `spendgate` command, `spendgate mcp` among
 * them). They share chunks.
 */
export const ENTRIES = { server: "adapters/http/main.ts", cli: "adapters/cli/main.ts" }
const MANIFEST = "manifest.json"

/**
 * Packages bundled into the server (ECMAScript modules with no files of their
 * own to find at run time): Effect above all, whose hundreds of modules are
 * most of what a start resolves. Every other package stays a package, loaded
 * from node_modules as it is from the sources: CommonJS ones (pg, stripe,
 * nodemailer, ...), and those that read files beside themselves (PGlite's
 * WebAssembly, linkedom through createRequire).
 */
export const BUNDLED_PACKAGES = [
  "effect",
  "@effect/platform-node",
  "@effect/platform-node-shared",
  "@effect/sql-pg",
  "@noble/curves",
  "@noble/hashes",
  "@scure/base"
]

/** The project's root: the folder above scripts/. */
export const projectRoot = () => resolve(dirname(fileURLToPath(import.meta.url)), "..")

/**
 * Where the bundle lives: node_modules/.cache/spendgate/server-bundle, or
 * SPENDGATE_BUNDLE_DIR. It must be inside the project's folder, so that the
 * packages left out of the bundle resolve from its node_modules.
 */
export const bundleDir = (root = projectRoot()) =>
  process.env.SPENDGATE_BUNDLE_DIR !== undefined && process.env.SPENDGATE_BUNDLE_DIR !== ""
    ? resolve(process.env.SPENDGATE_BUNDLE_DIR)
    : join(root, "node_modules", ".cache", "spendgate", "server-bundle")

/** A file's identity as the manifest records it: size and modification time (ms). */
const fingerprint = (file) => {
  const stat = statSync(file)
  return [stat.size, stat.mtimeMs]
}

/**
 * The bundle's entry (`which`: "server" or "cli") as a file URL when it is
 * there and made from exactly the files now checked out; otherwise
 * undefined, with the reason (for tests and `npm run bundle -- --check`).
 */
export const freshBundle = (root = projectRoot(), dir = bundleDir(root), which = "server") => {
  if (process.env.SPENDGATE_BUNDLE === "off") return { entry: undefined, reason: "SPENDGATE_BUNDLE=off" }
  let manifest
  try {
    manifest = JSON.parse(readFileSync(join(dir, MANIFEST), "utf8"))
  } catch {
    return { entry: undefined, reason: "no bundle" }
  }
  if (manifest === null || typeof manifest !== "object" || manifest.format !== BUNDLE_FORMAT) {
    return { entry: undefined, reason: "a bundle of another format" }
  }
  if (manifest.root !== root) return { entry: undefined, reason: "a bundle made for another folder" }
  const inputs = manifest.inputs
  if (inputs === null || typeof inputs !== "object") return { entry: undefined, reason: "a damaged manifest" }
  for (const [file, recorded] of Object.entries(inputs)) {
    let now
    try {
      now = fingerprint(join(root, file))
    } catch {
      return { entry: undefined, reason: `${file} is gone` }
    }
    if (!Array.isArray(recorded) || recorded[0] !== now[0] || recorded[1] !== now[1]) {
      return { entry: undefined, reason: `${file} changed since the bundle was made` }
    }
  }
  const named = manifest.entries?.[which]
  if (typeof named !== "string") return { entry: undefined, reason: `the bundle has no ${which} entry` }
  const entry = join(dir, named)
  if (!existsSync(entry)) return { entry: undefined, reason: "the bundle's entry is missing" }
  return { entry: pathToFileURL(entry), reason: "fresh" }
}

/** The package a bare specifier names: `@scope/name` or `name`. */
const packageOf = (specifier) => {
  const parts = specifier.split("/")
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]
}

const isBare = (specifier) =>
  !specifier.startsWith(".") && !specifier.startsWith("/") && !specifier.startsWith("node:") && !/^[a-z]+:/i.test(specifier)

/**
 * Builds the bundle into `dir` (made aside in `dir`.building-PID, then moved in) and
 * returns its manifest. Throws when esbuild is not installed or the build fails.
 */
export const buildServerBundle = async (root = projectRoot(), dir = bundleDir(root)) => {
  const staging = `${dir}.building-${process.pid}`
  try {
    return await buildInto(root, dir, staging)
  } finally {
    rmSync(staging, { recursive: true, force: true })
  }
}

const buildInto = async (root, dir, staging) => {
  const esbuild = await import("esbuild")
  const { builtinModules } = await import("node:module")
  const builtins = new Set(builtinModules)
  const externalPackages = new Set()
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: { main: join(root, ENTRIES.server), cli: join(root, ENTRIES.cli) },
    outdir: staging,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node24",
    metafile: true,
    logLevel: "silent",
    // Chunks keep readable names in stack traces; nothing is minified.
    entryNames: "[name]-[hash]",
    chunkNames: "[name]-[hash]",
    plugins: [
      {
        name: "spendgate-bundle",
        setup(build) {
          // Packages not in BUNDLED_PACKAGES are loaded from node_modules at run time.
          build.onResolve({ filter: /^[^./]/ }, (args) => {
            if (!isBare(args.path) || builtins.has(args.path)) return undefined
            const name = packageOf(args.path)
            if (BUNDLED_PACKAGES.includes(name)) return undefined
            externalPackages.add(name)
            return { path: args.path, external: true }
          })
          // A project module that finds files beside itself (import.meta.url)
          // keeps finding them where they are in the sources: its own file URL
          // is written in place of import.meta.url.
          build.onLoad({ filter: /\.ts$/ }, (args) => {
            if (args.path.split(sep).includes("node_modules")) return undefined
            const source = readFileSync(args.path, "utf8")
            return {
              contents: source.replaceAll("import.meta.url", JSON.stringify(pathToFileURL(args.path).href)),
              loader: "ts"
            }
          })
        }
      }
    ]
  })
  // A package left out that itself imports a bundled one would load a second
  // copy of it (two Effects do not share services): refuse such a bundle.
  for (const name of externalPackages) {
    const manifestFile = join(root, "node_modules", name, "package.json")
    if (!existsSync(manifestFile)) continue
    const pkg = JSON.parse(readFileSync(manifestFile, "utf8"))
    const needs = { ...pkg.dependencies, ...pkg.peerDependencies }
    const shared = BUNDLED_PACKAGES.filter((bundled) => bundled in needs)
    if (shared.length > 0) {
      throw new Error(`${name} is left out of the bundle but imports ${shared.join(", ")}, which is bundled`)
    }
  }
  const inputs = {}
  for (const input of Object.keys(result.metafile.inputs).sort()) {
    inputs[input] = fingerprint(join(root, input))
  }
  const chunks = {}
  for (const [output, meta] of Object.entries(result.metafile.outputs)) {
    chunks[relative(staging, join(root, output))] = Object.keys(meta.inputs).sort()
  }
  const entries = {}
  for (const [which, source] of Object.entries(ENTRIES)) {
    const output = Object.entries(result.metafile.outputs).find(([, meta]) => meta.entryPoint === source)
    if (output === undefined) throw new Error(`esbuild's output names no entry point for ${source}`)
    entries[which] = relative(staging, join(root, output[0]))
  }
  const manifest = {
    format: BUNDLE_FORMAT,
    root,
    entries,
    externalPackages: [...externalPackages].sort(),
    inputs,
    chunks
  }
  // Into place without disturbing a server already running an earlier
  // bundle: every file's name holds a hash of its content, so a file already
  // there is the same file and is kept; new ones are renamed in; the manifest
  // is replaced last, in one rename. The files of this bundle and of the one
  // before it are kept, older ones removed.
  mkdirSync(dir, { recursive: true })
  const previous = (() => {
    try {
      return Object.keys(JSON.parse(readFileSync(join(dir, MANIFEST), "utf8")).chunks ?? {})
    } catch {
      return []
    }
  })()
  for (const file of Object.keys(chunks)) {
    if (!existsSync(join(dir, file))) renameSync(join(staging, file), join(dir, file))
  }
  const manifestFile = join(dir, MANIFEST)
  writeFileSync(`${manifestFile}.${process.pid}`, `${JSON.stringify(manifest, null, 1)}\n`)
  renameSync(`${manifestFile}.${process.pid}`, manifestFile)
  const keep = new Set([MANIFEST, ...Object.keys(chunks), ...previous])
  for (const file of readdirSync(dir)) {
    if (!keep.has(file) && !file.startsWith(`${MANIFEST}.`)) rmSync(join(dir, file), { force: true })
  }
  return manifest
}

/**
 * `node scripts/server-bundle.mjs`: build it (exit 1 if it cannot be made);
 * `--if-possible` (the install's): never fail, say why there is none;
 * `--check`: only say whether the bundle is fresh (exit 1 if not).
 */
const runAsScript = async () => {
  const root = projectRoot()
  if (process.argv.includes("--check")) {
    let fresh = true
    for (const which of Object.keys(ENTRIES)) {
      const { entry, reason } = freshBundle(root, bundleDir(root), which)
      console.log(entry === undefined ? `${which}: bundle not used: ${reason}` : `${which}: bundle fresh: ${fileURLToPath(entry)}`)
      fresh &&= entry !== undefined
    }
    process.exitCode = fresh ? 0 : 1
    return
  }
  const started = performance.now()
  try {
    const manifest = await buildServerBundle(root)
    console.log(
      `Server bundle: ${bundleDir(root)} (${Object.keys(manifest.inputs).length} files into ${Object.keys(manifest.chunks).length}, ` +
        `${Math.round(performance.now() - started)} ms)`
    )
  } catch (error) {
    console.log(`Server bundle not made (${error instanceof Error ? error.message : String(error)}); npm start runs the sources`)
    // The install's run never fails: `npm start` runs the sources without it.
    if (!process.argv.includes("--if-possible")) process.exitCode = 1
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await runAsScript()
