// Preloaded with `node --import` by test/process/start-modules.test.ts: records
// every module the process loads and, at exit, writes them as JSON to the file
// named by MODULE_RECORD, with the internal modules Node loaded (among them its
// TypeScript stripper, if it was needed). Plain JavaScript on purpose: a
// TypeScript file here would itself load the stripper.
import { registerHooks } from "node:module"
import { writeFileSync } from "node:fs"

const loaded = new Set()
registerHooks({
  load(url, context, nextLoad) {
    loaded.add(url)
    return nextLoad(url, context)
  }
})
process.on("exit", () => {
  const internal = process.moduleLoadList.filter((name) => name.startsWith("NativeModule internal/"))
  writeFileSync(process.env.MODULE_RECORD, JSON.stringify({ loaded: [...loaded], internal }))
})
