import { Effect, Exit } from "effect"
import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { DataDirInUse, LOCK_FILE, scoped } from "../../adapters/sql/dataDirLock.ts"
import * as PgliteClient from "../../adapters/sql/PgliteClient.ts"
import { Reactivity } from "effect/reactivity"

/**
 * The DATA_DIR lock within one process (the process tests cover two
 * processes and kill -9): a held directory cannot be opened again, by the
 * lock or by PGlite, and is free once the holder's scope closes.
 */

describe("the DATA_DIR lock", () => {
  const root = mkdtempSync(join(tmpdir(), "spendgate-lockunit-"))
  afterAll(() => rmSync(root, { recursive: true, force: true }))

  it("refuses a second holder, naming this process, and is free again once released", async () => {
    const dir = join(root, "a")
    const outcome = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      yield* scoped(dir)
      return yield* Effect.exit(Effect.scoped(scoped(dir)))
    })))
    expect(Exit.isFailure(outcome)).toBe(true)
    const error = Exit.isFailure(outcome) ? outcome.cause.reasons[0] : undefined
    const failure = error?._tag === "Fail" ? error.error : undefined
    expect(failure).toBeInstanceOf(DataDirInUse)
    expect((failure as DataDirInUse).pid).toBe(process.pid)
    expect((failure as DataDirInUse).message).toContain(dir)
    expect(readdirSync(dir)).toEqual([LOCK_FILE])

    // Released with its scope.
    await Effect.runPromise(Effect.scoped(scoped(dir)))
  })

  it("is taken by PgliteClient before PGlite opens the directory", async () => {
    const dir = join(root, "b")
    const outcome = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      yield* scoped(dir)
      return yield* Effect.exit(Effect.scoped(PgliteClient.make({ dataDir: dir })))
    })).pipe(Effect.provide(Reactivity.layer)))
    expect(Exit.isFailure(outcome)).toBe(true)
    // PGlite never ran: the directory holds the lock file only.
    expect(readdirSync(dir)).toEqual([LOCK_FILE])
  })
})
