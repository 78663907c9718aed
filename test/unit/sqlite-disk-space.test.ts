import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterAll, describe, expect, it } from 'vitest'
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.ts'
import { T0, task } from '../contract/task-records.ts'

const dirs: string[] = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

const MB = 1024 * 1024

/** Bytes of every file in `dir` (the database, its WAL and shared-memory file). */
function dirSize (dir: string): number {
  return readdirSync(dir).reduce((sum, name) => sum + statSync(join(dir, name)).size, 0)
}

describe('sqlite disk space', () => {
  it('gives the space of swept task results back to the file system: database and write-ahead log', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-disk-'))
    dirs.push(dir)
    const store = new SqliteStore(join(dir, 'gateway.db'))
    const before = dirSize(dir)

    // 40 tasks, each completed with a 1 MB result (the results of a busy hour): five times what may stay after the
    // sweep, at two fifths of the writes to disk that 100 took (the database and its log).
    const text = 'x'.repeat(MB)
    for (let i = 0; i < 40; i++) {
      const record = task({ ttlMs: 60_000, createdAt: T0 + i })
      await store.tasks.create(record)
      await store.tasks.transition(record.id, ['working'], 'completed', { outcome: { result: { content: [{ type: 'text', text }] } } }, T0 + i + 1)
    }
    const peak = dirSize(dir)
    console.info(`data directory: ${(before / 1024).toFixed(0)} KB before, ${(peak / MB).toFixed(1)} MB at peak`)
    expect(await store.tasks.sweep(T0 + 61_000)).toBe(40)

    // The space comes back by itself (the file's background maintenance), without a restart.
    let after = peak
    await expect.poll(() => (after = dirSize(dir)), { timeout: 30_000, interval: 200 }).toBeLessThan(before + 8 * MB)
    console.info(`data directory: ${(after / MB).toFixed(1)} MB after the sweep`)
    expect(peak).toBeGreaterThan(40 * MB)
    await store.close()
  }, 60_000)

  it('converts a file written before freed pages were given back, keeping its data', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-disk-'))
    dirs.push(dir)
    const file = join(dir, 'gateway.db')
    const first = new SqliteStore(file)
    await first.sessions.create({ id: 's1', principal: 'p', protocolVersion: '2025-11-25', clientCapabilities: {}, clientInfo: {}, createdAt: 1, lastSeenAt: 1 })
    await first.close()
    const old = new Database(file)
    old.pragma('auto_vacuum = NONE')
    old.exec('VACUUM')
    expect(old.pragma('auto_vacuum', { simple: true })).toBe(0)
    old.close()

    const store = new SqliteStore(file)
    expect(await store.sessions.get('s1')).toMatchObject({ principal: 'p' })
    await store.close()
    const reopened = new Database(file)
    expect(reopened.pragma('auto_vacuum', { simple: true })).toBe(2)
    reopened.close()
  })
})
