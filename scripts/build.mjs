// `npm run build` (and `npm pack` through prepack): JavaScript and .d.ts for
// src/ and adapters/ into dist/, plus the files the code reads at run time.
import { execFileSync } from "node:child_process"
import { cpSync, mkdirSync, rmSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const dist = join(root, "dist")

rmSync(dist, { recursive: true, force: true })
execFileSync(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", join(root, "tsconfig.build.json")], {
  cwd: root,
  stdio: "inherit"
})

// Read at run time relative to the module that reads them (import.meta.url):
// adapters/priceCards.ts reads ../config/prices.json; the dashboard's server
// (adapters/http/dashboard/static.ts) serves the files of its web/ folder.
const assets = ["config/prices.json", "adapters/http/dashboard/web"]
for (const file of assets) {
  mkdirSync(dirname(join(dist, file)), { recursive: true })
  cpSync(join(root, file), join(dist, file), { recursive: true })
}
