/**
 * The sandbox's per-call directories: made with `mkdtemp` under the
 * configured temp dir (mode 0700, owned by the sandbox's uid when the
 * gateway is root), bound as the sandbox's /tmp, and removed afterwards
 * whatever the code did to them. Directories a killed gateway left behind are
 * swept at start-up.
 */
import * as fs from "node:fs/promises"
import * as path from "node:path"

export const CALL_DIR_PREFIX = "spendgate-sandbox-"
/** A call directory untouched for this long belongs to no running call. */
const STALE_AFTER_MS = 10 * 60 * 1000

export interface CallDirSettings {
  readonly tempDir: string
  /** The owner of the directory when the gateway is root. */
  readonly dropTo: { readonly uid: number; readonly gid: number } | undefined
}

export const makeCallDir = (settings: CallDirSettings): Promise<string> =>
  fs.mkdtemp(path.join(settings.tempDir, CALL_DIR_PREFIX)).then(async (dir) => {
    try {
      await fs.chmod(dir, 0o700)
      if (settings.dropTo !== undefined) await fs.chown(dir, settings.dropTo.uid, settings.dropTo.gid)
      return dir
    } catch (error) {
      await removeTree(dir)
      throw error
    }
  })

/**
 * Makes every directory of the tree writable and searchable again (the code
 * may have locked some), never through a symbolic link. Only needed when the
 * gateway is not root (root removes locked directories anyway); it runs once
 * the sandbox is gone, so nothing swaps a directory for a link meanwhile.
 */
const unlockTree = async (dir: string): Promise<void> => {
  try {
    if (!(await fs.lstat(dir)).isDirectory()) return
    await fs.chmod(dir, 0o700)
    for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) await unlockTree(path.join(dir, entry.name))
    }
  } catch {
    // Whatever cannot be unlocked is reported by the removal that follows.
  }
}

export const removeTree = async (dir: string): Promise<void> => {
  try {
    await fs.rm(dir, { recursive: true, force: true, maxRetries: 2 })
  } catch (error) {
    if (process.getuid?.() === 0) throw error
    await unlockTree(dir)
    await fs.rm(dir, { recursive: true, force: true, maxRetries: 2 })
  }
}

/**
 * Removes call directories left behind by a gateway that was killed mid-call
 * (SIGKILL, power loss). Only those untouched for `STALE_AFTER_MS`: no call
 * lives that long, so a directory of another running gateway is never taken.
 */
export const sweepStale = async (settings: Pick<CallDirSettings, "tempDir">): Promise<number> => {
  let removed = 0
  const now = Date.now()
  for (const entry of await fs.readdir(settings.tempDir, { withFileTypes: true })) {
    if (!entry.isDirectory() || !entry.name.startsWith(CALL_DIR_PREFIX)) continue
    const dir = path.join(settings.tempDir, entry.name)
    try {
      const stat = await fs.lstat(dir)
      if (now - stat.mtimeMs < STALE_AFTER_MS) continue
      await removeTree(dir)
      removed++
    } catch {
      // Gone already, or not ours to remove.
    }
  }
  return removed
}
