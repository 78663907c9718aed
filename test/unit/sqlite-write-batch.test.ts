import Database from 'better-sqlite3'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { WriteBatch } from '../../src/store/sqlite/write-batch.ts'

describe('WriteBatch (SQLite group commit)', () => {
  let db: Database.Database

  beforeEach(() => {
    db = new Database(':memory:')
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)')
  })

  afterEach(() => {
    if (db.open) db.close()
  })

  const batchOf = (): WriteBatch<{ id: number, v: string | null }> => {
    const insert = db.prepare('INSERT INTO t (id, v) VALUES (@id, @v)')
    return new WriteBatch(db, (item) => {
      insert.run(item)
      if (item.v === 'refused') throw new Error(`refused ${item.id}`)
    }, (err) => new Error(`mapped: ${(err as Error).message}`, { cause: err }))
  }

  const rows = (): Array<{ id: number, v: string }> => db.prepare('SELECT id, v FROM t ORDER BY id').all() as Array<{ id: number, v: string }>

  it('commits the writes of one turn together; one that throws is rolled back alone and rejects with the mapped error', async () => {
    const batch = batchOf()
    const settled = await Promise.allSettled([
      batch.write({ id: 1, v: 'a' }),
      batch.write({ id: 2, v: 'refused' }),
      batch.write({ id: 3, v: 'c' }),
      batch.write({ id: 4, v: null }),
    ])
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected'])
    expect((settled[1] as PromiseRejectedResult).reason.message).toBe('mapped: refused 2')
    expect((settled[3] as PromiseRejectedResult).reason.message).toMatch(/^mapped: NOT NULL constraint failed/)
    expect(rows()).toEqual([{ id: 1, v: 'a' }, { id: 3, v: 'c' }])
  })

  it('does not write before the end of the turn, and writes at once on flush()', async () => {
    const batch = batchOf()
    const written = batch.write({ id: 1, v: 'a' })
    expect(rows()).toEqual([])
    batch.flush()
    expect(rows()).toEqual([{ id: 1, v: 'a' }])
    await written
  })

  it('rejects every write of the batch when its transaction fails', async () => {
    const batch = batchOf()
    const writes = [batch.write({ id: 1, v: 'a' }), batch.write({ id: 2, v: 'b' })]
    db.close()
    const settled = await Promise.allSettled(writes)
    expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected'])
    for (const s of settled) expect((s as PromiseRejectedResult).reason.message).toMatch(/^mapped: /)
  })
})
