import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { buildServerBundle, ENTRIES } from "../../scripts/server-bundle.mjs"

/**
 * The bundle's guard: a package left out of the bundle that itself imports a
 * bundled one (Effect, say) would load a second copy of it beside the
 * bundle's, whose services the first would not share; the build refuses such
 * a bundle and names the package. Built in a scratch project whose two entries
 * import one package from its own node_modules: with Effect among that
 * package's dependencies (or peer dependencies) the build fails; without, it
 * succeeds and lists the package as left out.
 */

const scratch = mkdtempSync(join(tmpdir(), "spendgate-bundle-guard-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

const project = (name: string, manifest: Record<string, unknown>) => {
  const root = join(scratch, name)
  for (const entry of Object.values(ENTRIES)) {
    mkdirSync(join(root, entry, ".."), { recursive: true })
    writeFileSync(join(root, entry), `import { greet } from "left-out"\nexport const main = () => greet()\n`)
  }
  const pkg = join(root, "node_modules", "left-out")
  mkdirSync(pkg, { recursive: true })
  writeFileSync(join(pkg, "package.json"), JSON.stringify({ name: "left-out", version: "1.0.0", main: "index.js", ...manifest }))
  writeFileSync(join(pkg, "index.js"), "exports.greet = () => 'hello'\n")
  return root
}

describe("the server bundle's guard against a second copy of a bundled package", () => {
  it("builds when the left-out package imports nothing bundled, and lists it as left out", async () => {
    const root = project("plain", { dependencies: { "left-pad": "1.0.0" } })
    const dir = join(root, "node_modules", ".cache", "bundle")
    await buildServerBundle(root, dir)
    const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8"))
    expect(manifest.externalPackages).toEqual(["left-out"])
  }, 60_000)

  it.each([
    ["dependencies", { dependencies: { effect: "^4.0.0" } }, "effect"],
    ["peerDependencies", { peerDependencies: { "@effect/sql-pg": "^4.0.0", effect: "^4.0.0" } }, "effect, @effect/sql-pg"]
  ])("refuses the bundle when the left-out package has a bundled one in its %s", async (field, manifest, shared) => {
    const root = project(`shared-${field}`, manifest)
    await expect(buildServerBundle(root, join(root, "node_modules", ".cache", "bundle"))).rejects.toThrow(
      `left-out is left out of the bundle but imports ${shared}, which is bundled`
    )
  }, 60_000)
})
