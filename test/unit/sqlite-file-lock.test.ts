import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterAll, describe, expect, it } from 'vitest'
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.ts'

const dir = mkdtempSync(join(tmpdir(), 'gw-lock-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let files = 0

/** A fresh file whose holder row says `holder` (the table as a gateway leaves it). */
function fileHeldBy (holder: { host: string, pid: number, since: number, heartbeat: number }): string {
  const file = join(dir, `held-${files++}.db`)
  const db = new Database(file)
  db.exec('CREATE TABLE file_holder (id INTEGER PRIMARY KEY CHECK (id = 1), token TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, since INTEGER NOT NULL, heartbeat INTEGER NOT NULL)')
  db.prepare("INSERT INTO file_holder VALUES (1, 'someone', @host, @pid, @since, @heartbeat)").run(holder)
  db.close()
  return file
}

/** The pid of a process that ran on this host and has exited. */
async function exitedPid (): Promise<number> {
  const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' })
  await once(child, 'exit')
  return child.pid!
}

describe('sqlite file lock', () => {
  it('a second store on the same file is refused with the file and the holder named; the first keeps working', async () => {
    const file = join(dir, 'shared.db')
    const first = new SqliteStore(file)
    const refusal = (() => {
      try {
        return new SqliteStore(file)
      } catch (err) {
        return err
      }
    })()
    expect(refusal).toMatchObject({ code: 'GW_ERR_STORE_LOCKED' })
    const message = (refusal as Error).message
    expect(message).toContain(`'${file}'`)
    expect(message).toMatch(new RegExp(`pid ${process.pid} on host ${hostname()} since \\d{4}-\\d\\d-\\d\\dT`))
    await first.sessions.create({ id: 's1', principal: 'p', protocolVersion: '2025-11-25', clientCapabilities: {}, clientInfo: {}, createdAt: 1, lastSeenAt: 1 })
    expect(await first.health()).toEqual({ ok: true, kind: 'sqlite' })
    await first.close()

    const next = new SqliteStore(file)
    expect(await next.sessions.get('s1')).toMatchObject({ principal: 'p' })
    await next.close()
  })

  it('takes over at once a file whose holder on this host no longer runs (kill -9)', async () => {
    const now = Date.now()
    const store = new SqliteStore(fileHeldBy({ host: hostname(), pid: await exitedPid(), since: now, heartbeat: now }))
    expect(await store.health()).toMatchObject({ ok: true })
    await store.close()
  })

  it('refuses a holder on another host while its heartbeat is fresh, and takes the file over once it is stale', async () => {
    const now = Date.now()
    const file = fileHeldBy({ host: 'other-host', pid: process.pid, since: now - 60_000, heartbeat: now - 1000 })
    expect(() => new SqliteStore(file, { lock: { staleMs: 10_000 } })).toThrow(expect.objectContaining({
      code: 'GW_ERR_STORE_LOCKED',
      message: expect.stringContaining(`pid ${process.pid} on host other-host since ${new Date(now - 60_000).toISOString()}`),
    }))
    const later = new SqliteStore(file, { lock: { staleMs: 10_000, now: () => now + 10_000 } })
    await later.close()
  })

  it('a holder whose file was taken over says so in its health', async () => {
    const file = join(dir, 'taken.db')
    let clock = Date.now()
    const stalled = new SqliteStore(file, { lock: { heartbeatMs: 20, staleMs: 1000, now: () => clock } })
    clock += 5000
    const taker = new SqliteStore(file, { lock: { staleMs: 1000, now: () => clock } })
    await expect.poll(async () => (await stalled.health()).ok).toBe(false)
    expect((await stalled.health()).detail).toContain(`another gateway process took over '${file}'`)
    await stalled.close()
    // The stalled holder's close leaves the new holder's claim alone.
    expect(() => new SqliteStore(file)).toThrow(expect.objectContaining({ code: 'GW_ERR_STORE_LOCKED' }))
    await taker.close()
  })
})
