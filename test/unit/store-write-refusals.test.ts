import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.ts'
import { SqliteTaskStore } from '../../src/store/sqlite/sqlite-task-store.ts'
import { WriteRefusals, type Refusal } from '../../src/store/write-refusals.ts'
import { task } from '../contract/task-records.ts'

const dirs: string[] = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})
afterEach(() => { vi.restoreAllMocks() })

const diskFull = (): Error => new Database.SqliteError('database or disk is full', 'SQLITE_FULL')

describe('write refusals', () => {
  it('records the first refused write with its time, keeps it through reads, and ends it when a refused operation succeeds', async () => {
    const heard: Array<Refusal | undefined> = []
    let now = 1_000
    const refusals = new WriteRefusals((refusal) => heard.push(refusal), () => now)
    let full = true
    const part = refusals.watch({
      write: async () => { if (full) throw new Error('full') },
      read: async () => 'value',
    }, 'part', (err) => (err as Error).message === 'full' ? 'the disk is full' : undefined)

    await expect(part.write()).rejects.toThrow('full')
    now = 2_000
    await expect(part.write()).rejects.toThrow('full')
    expect(await part.read()).toBe('value')
    expect(refusals.current).toEqual({ at: 1_000, reason: 'the disk is full' })
    expect(refusals.health({ ok: true, kind: 'x' })).toEqual({ ok: false, kind: 'x', detail: 'the disk is full (since 1970-01-01T00:00:01.000Z)' })

    full = false
    await part.write()
    expect(refusals.current).toBeUndefined()
    expect(refusals.health({ ok: true, kind: 'x' })).toEqual({ ok: true, kind: 'x' })
    expect(heard).toEqual([{ at: 1_000, reason: 'the disk is full' }, undefined])
  })
})

describe('sqlite store with a full disk', () => {
  it('is not ready while writes fail with SQLITE_FULL, naming the reason, and ready again once a write succeeds', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-full-'))
    dirs.push(dir)
    const store = new SqliteStore(join(dir, 'gateway.db'))
    expect(await store.health()).toEqual({ ok: true, kind: 'sqlite' })

    vi.spyOn(SqliteTaskStore.prototype, 'create').mockRejectedValueOnce(diskFull())
    await expect(store.tasks.create(task())).rejects.toThrow('database or disk is full')
    const refused = await store.health()
    expect(refused.ok).toBe(false)
    expect(refused.detail).toMatch(/^SQLite refuses writes: the database or disk is full \(SQLITE_FULL\) \(since /)

    await store.tasks.create(task())
    expect(await store.health()).toEqual({ ok: true, kind: 'sqlite' })
    await store.close()
  })
})
