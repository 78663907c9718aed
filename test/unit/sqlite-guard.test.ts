import Database from 'better-sqlite3'
import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../src/errors.ts'
import { SqliteGuard, type StoreFault } from '../../src/store/sqlite/sqlite-guard.ts'

const busy = (): Error => new Database.SqliteError('database is locked', 'SQLITE_BUSY')
const OPERATIONS = { writes: new Set(['create', 'transition']), creations: new Set(['create']) }

/** A store part whose writes fail with SQLITE_BUSY (as a GatewayError carrying it, as the task store throws) the first `times` calls. */
interface Part {
  calls: () => number
  create: () => Promise<string>
  transition: () => Promise<string>
  get: () => Promise<string>
}

function part (times: number): Part {
  let calls = 0
  const write = async (): Promise<string> => {
    calls++
    if (calls <= times) throw new GatewayError('GW_ERR_STORE_UNAVAILABLE', ['SQLITE_BUSY'], { cause: busy() })
    return 'written'
  }
  return { calls: () => calls, create: write, transition: write, get: async () => 'read' }
}

describe('sqlite guard', () => {
  it('tries an operation that found the file locked again until it succeeds', async () => {
    const target = part(3)
    const guarded = new SqliteGuard('/data/gateway.db', () => undefined, 5000).wrap(target, OPERATIONS)
    expect(await guarded.create()).toBe('written')
    expect(target.calls()).toBe(4)
  })

  it('refuses it once the lock has been held past the bound, naming the file and the lock, the SQLite failure as its cause', async () => {
    const target = part(Number.MAX_SAFE_INTEGER)
    const guarded = new SqliteGuard('/data/gateway.db', () => undefined, 100).wrap(target, OPERATIONS)
    const refused = await guarded.transition().catch((err: unknown) => err) as GatewayError
    expect(refused.code).toBe('GW_ERR_STORE_UNAVAILABLE')
    expect(refused.message).toMatch(/^the store is unavailable: another process has held the write lock of the SQLite file '\/data\/gateway\.db' for 100 ms \(SQLITE_BUSY\)/)
    expect(refused.cause).toBeInstanceOf(Database.SqliteError)
    expect(refused.cause).toMatchObject({ code: 'SQLITE_BUSY' })
    expect(target.calls()).toBeGreaterThan(1)
  })

  it('does not try again a failure other than a held lock', async () => {
    let calls = 0
    const guarded = new SqliteGuard('/data/gateway.db', () => undefined).wrap({
      create: async () => { calls++; throw new Database.SqliteError('database or disk is full', 'SQLITE_FULL') },
    }, OPERATIONS)
    await expect(guarded.create()).rejects.toThrow('database or disk is full')
    expect(calls).toBe(1)
  })

  it('refuses new work on a fault of the file, and every write on one that stops all writing; reads go on', async () => {
    let fault: StoreFault | undefined = { detail: 'the file was deleted', refuses: 'creations' }
    const target = part(0)
    const guarded = new SqliteGuard('/data/gateway.db', () => fault).wrap(target, OPERATIONS)
    await expect(guarded.create()).rejects.toThrow('the store is unavailable: the file was deleted')
    expect(await guarded.transition()).toBe('written')
    fault = { detail: 'the disk is full', refuses: 'writes' }
    await expect(guarded.transition()).rejects.toThrow('the store is unavailable: the disk is full')
    expect(await guarded.get()).toBe('read')
    expect(target.calls()).toBe(1)
  })
})
