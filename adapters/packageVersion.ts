import { readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

/**
 * The version of the package a module belongs to, found by walking up from
 * the module's own folder to the nearest package.json named `name`
 * (default "spendgate"). The same module sits at different depths in the
 * sources (adapters/http/otlp.ts) and in the build (dist/adapters/http/otlp.js),
 * so no fixed relative path fits both; a package.json of another name on the
 * way (a nested one, or a consumer's) is passed over. Undefined when none is
 * found or it has no version.
 */
export const packageVersion = (moduleUrl: string | URL, name = "spendgate"): string | undefined => {
  let folder = dirname(fileURLToPath(moduleUrl))
  for (;;) {
    const found = readPackage(join(folder, "package.json"))
    if (found !== undefined && found.name === name) {
      return typeof found.version === "string" ? found.version : undefined
    }
    const parent = dirname(folder)
    if (parent === folder) return undefined
    folder = parent
  }
}

const readPackage = (path: string): { name?: unknown; version?: unknown } | undefined => {
  try {
    const json: unknown = JSON.parse(readFileSync(path, "utf8"))
    return typeof json === "object" && json !== null ? json : undefined
  } catch {
    return undefined
  }
}
