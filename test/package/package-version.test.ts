import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { serviceVersion } from "../../adapters/http/otlp.ts"
import { packageVersion } from "../../adapters/packageVersion.ts"

/**
 * The package's version as the code finds it at run time (the OTLP
 * resource's service.version, the version `npm run dev:pay` reports): from
 * the sources (adapters/http/otlp.ts) and from the build
 * (dist/adapters/http/otlp.js), which sits one folder deeper.
 */

const root = join(import.meta.dirname, "..", "..")
const pkg = (await import(pathToFileURL(join(root, "package.json")).href, { with: { type: "json" } })).default as {
  version: string
}

const dir = mkdtempSync(join(tmpdir(), "spendgate-version-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** A package folder: its package.json, and an empty module at `file` inside it. */
const layout = (name: string, files: Record<string, unknown>) => {
  const base = join(dir, name)
  for (const [file, json] of Object.entries(files)) {
    mkdirSync(join(base, file, ".."), { recursive: true })
    writeFileSync(join(base, file), json === null ? "" : JSON.stringify(json))
  }
  return (file: string) => pathToFileURL(join(base, file)).href
}

describe("the package's version at run time", () => {
  it("from the sources: the OTLP service.version is this package's", () => {
    expect(serviceVersion()).toBe(pkg.version)
    expect(packageVersion(pathToFileURL(join(root, "adapters/cli/dev-pay.ts")))).toBe(pkg.version)
  })

  it("from the build's layout (dist/adapters/http/otlp.js, dist/adapters/cli/dev-pay.js)", () => {
    const at = layout("built", {
      "package.json": { name: "spendgate", version: "9.8.7" },
      "dist/adapters/http/otlp.js": null,
      "dist/adapters/cli/dev-pay.js": null
    })
    expect(packageVersion(at("dist/adapters/http/otlp.js"))).toBe("9.8.7")
    expect(packageVersion(at("dist/adapters/cli/dev-pay.js"))).toBe("9.8.7")
  })

  it("installed in a project: the package's own package.json, past a nested one of another name", () => {
    const at = layout("consumer", {
      "package.json": { name: "consumer", version: "1.0.0" },
      "node_modules/spendgate/package.json": { name: "spendgate", version: "2.3.4" },
      "node_modules/spendgate/dist/package.json": { type: "module" },
      "node_modules/spendgate/dist/adapters/http/otlp.js": null
    })
    expect(packageVersion(at("node_modules/spendgate/dist/adapters/http/otlp.js"))).toBe("2.3.4")
  })

  it("none found: undefined", () => {
    const at = layout("elsewhere", { "package.json": { name: "other", version: "1.0.0" }, "a/b.js": null })
    expect(packageVersion(at("a/b.js"))).toBeUndefined()
  })
})
