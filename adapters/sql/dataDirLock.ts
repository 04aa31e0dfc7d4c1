import { Data, Effect, type Scope } from "effect"
import { closeSync, mkdirSync, openSync, readSync } from "node:fs"
import { join, resolve } from "node:path"
import { DatabaseSync } from "node:sqlite"

/**
 * One process at a time on a data directory.
 *
 * Embedded PGlite is a single-user PostgreSQL: two processes opening the same
 * directory each believe they own it, and each overwrites the other's pages
 * (an account created through one of them is gone after a restart). Its own
 * `postmaster.pid` does not protect it: PGlite removes a stale one on open,
 * whoever wrote it.
 *
 * The lock is a kernel advisory lock, so the kernel releases it when the
 * holder dies, however it dies (kill -9 included), and there is no stale lock
 * to judge by pid, start time or age: a process that can take the lock is by
 * construction the only one alive holding the directory. Node has no flock()
 * without a native addon, but it ships SQLite (`node:sqlite`), whose unix VFS
 * locks with fcntl() (LockFileEx on Windows): `DATA_DIR/spendgate.lock` is a
 * one-page SQLite database opened in EXCLUSIVE locking mode, and the write
 * that records the holder's pid (in the header's user_version field) takes
 * the exclusive lock, which the connection then keeps until it is closed or
 * the process ends. The lock file itself stays; only the lock goes.
 *
 * A second process gets SQLITE_BUSY at once (no busy timeout), reads the
 * holder's pid from the header (byte 60, big-endian; plain reads are not
 * blocked by advisory locks) and reports it. Locks are per file, not per path:
 * a relative path, a symlink or a bind mount of the same directory meet the
 * same lock; processes in other PID namespaces (containers) on the same
 * kernel too. fcntl locks on network file systems are only as good as the
 * server's lock manager.
 */

export const LOCK_FILE = "spendgate.lock"

/** Another live process holds the directory; `pid` is what it recorded (undefined if unreadable). */
export class DataDirInUse extends Data.TaggedError("DataDirInUse")<{
  readonly dataDir: string
  readonly pid: number | undefined
}> {
  override get message(): string {
    return `Cannot start: DATA_DIR ${this.dataDir} is in use by another Spendgate process (${
      this.pid === undefined ? "pid unknown" : `pid ${this.pid}`
    }); stop it first, or give this server its own DATA_DIR`
  }
}

/** The lock could not be taken for another reason (permissions, a damaged lock file, …). */
export class DataDirLockFailed extends Data.TaggedError("DataDirLockFailed")<{
  readonly dataDir: string
  readonly reason: string
}> {
  override get message(): string {
    return `Cannot start: cannot lock DATA_DIR ${this.dataDir}: ${this.reason}`
  }
}

const isBusy = (error: unknown): boolean =>
  typeof error === "object" && error !== null &&
  ((error as { errcode?: unknown }).errcode === 5 || (error as { errcode?: unknown }).errcode === 6 ||
    /database is locked|database table is locked/i.test(String((error as { message?: unknown }).message)))

/** The pid in the lock file's header, if there is one. */
const readHolderPid = (path: string): number | undefined => {
  let fd: number | undefined
  try {
    fd = openSync(path, "r")
    const header = Buffer.alloc(4)
    if (readSync(fd, header, 0, 4, 60) !== 4) return undefined
    const pid = header.readUInt32BE(0)
    return pid > 0 ? pid : undefined
  } catch {
    return undefined
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
}

/**
 * Takes the lock on `dataDir` (created if missing), or fails without having
 * written anything when another process holds it.
 */
export const acquire = (dataDir: string): Effect.Effect<DatabaseSync, DataDirInUse | DataDirLockFailed> =>
  Effect.suspend((): Effect.Effect<DatabaseSync, DataDirInUse | DataDirLockFailed> => {
    const absolute = resolve(dataDir)
    const path = join(absolute, LOCK_FILE)
    let db: DatabaseSync | undefined
    try {
      mkdirSync(absolute, { recursive: true })
      db = new DatabaseSync(path, { timeout: 0 })
      // No journal file: the only write is the header's pid.
      db.exec("PRAGMA journal_mode = MEMORY")
      db.exec("PRAGMA locking_mode = EXCLUSIVE")
      db.exec(`PRAGMA user_version = ${process.pid}`)
      return Effect.succeed(db)
    } catch (error) {
      try {
        db?.close()
      } catch {
        // nothing held
      }
      if (isBusy(error)) return Effect.fail(new DataDirInUse({ dataDir: absolute, pid: readHolderPid(path) }))
      return Effect.fail(
        new DataDirLockFailed({
          dataDir: absolute,
          reason: `${error instanceof Error ? error.message : String(error)} (${path})`
        })
      )
    }
  })

/** Holds the lock on `dataDir` for the life of the scope. */
export const scoped = (dataDir: string): Effect.Effect<void, DataDirInUse | DataDirLockFailed, Scope.Scope> =>
  Effect.asVoid(
    Effect.acquireRelease(acquire(dataDir), (db) =>
      Effect.sync(() => {
        try {
          db.close()
        } catch {
          // the process is ending anyway; the kernel drops the lock with it
        }
      }))
  )
