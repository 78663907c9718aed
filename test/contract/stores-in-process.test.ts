// The store contract suites on the stores inside the gateway process: memory, and SQLite files. Redis and
// PostgreSQL have files of their own, so that the backends run side by side in the suite's workers (a file runs
// in one worker, its tests one after another).
import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterAll, describe, expect, it } from 'vitest'
import { MemoryStore } from '../../src/store/memory/memory-store.ts'
import { MIGRATIONS, SCHEMA_VERSION } from '../../src/store/sqlite/sqlite-schema.ts'
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.ts'
import type { TaskRecord } from '../../src/store/types.ts'
import { sessionStoreContract } from './session-store.contract.ts'
import { taskStoreContract } from './task-store.contract.ts'
import { taskInputStoreContract } from './task-input-store.contract.ts'
import { ownershipContract } from './ownership.contract.ts'
import { homeStoreContract } from './home-store.contract.ts'
import { taskLimitContract } from './task-limit.contract.ts'
import { taskQueryContract } from './task-query.contract.ts'
import { taskTimelineContract } from './task-timeline.contract.ts'
import { storedBytesContract } from './stored-bytes.contract.ts'
import { rateLimitStoreContract } from './rate-limit-store.contract.ts'

const dir = mkdtempSync(join(tmpdir(), 'gw-sqlite-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** A fresh database file for each test. */
function dbFile (): string {
  return join(dir, `${randomUUID()}.db`)
}

sessionStoreContract('memory', async () => new MemoryStore())
taskStoreContract('memory', async () => new MemoryStore())
taskInputStoreContract('memory', async () => new MemoryStore())
ownershipContract('memory', async () => new MemoryStore())
homeStoreContract('memory', async () => new MemoryStore())
taskLimitContract('memory', async () => [new MemoryStore()])
taskQueryContract('memory', async () => new MemoryStore())
taskTimelineContract('memory', async () => new MemoryStore())
storedBytesContract('memory', async () => [new MemoryStore()])
sessionStoreContract('sqlite', async () => new SqliteStore(dbFile()))
taskStoreContract('sqlite', async () => new SqliteStore(dbFile()))
taskInputStoreContract('sqlite', async () => new SqliteStore(dbFile()))
ownershipContract('sqlite', async () => new SqliteStore(dbFile()))
homeStoreContract('sqlite', async () => new SqliteStore(dbFile()))
taskLimitContract('sqlite', async () => [new SqliteStore(dbFile())])
taskQueryContract('sqlite', async () => new SqliteStore(dbFile()))
taskTimelineContract('sqlite', async () => new SqliteStore(dbFile()))
storedBytesContract('sqlite', async () => [new SqliteStore(dbFile())])
rateLimitStoreContract({
  memory: async () => new MemoryStore(),
  sqlite: async () => new SqliteStore(dbFile()),
})

function task (id: string): TaskRecord {
  return {
    id,
    principal: 'p',
    sessionId: null,
    era: '2026-07-28',
    status: 'working',
    statusMessage: null,
    createdAt: 1,
    lastUpdatedAt: 1,
    ttlMs: null,
    pollIntervalMs: 1_000,
    owner: 'gateway-a',
    upstream: 'demo',
    tool: 'echo',
    request: { arguments: { text: 'x' } },
    progressToken: 7,
    clientCapabilities: {},
    outcome: null,
    traceContext: null,
    resume: null,
  }
}

describe('sqlite store', () => {
  it('keeps sessions across a reopen of the same file', async () => {
    const file = dbFile()
    const first = new SqliteStore(file)
    await first.sessions.create({ id: 's1', principal: 'p', protocolVersion: '2025-11-25', clientCapabilities: {}, clientInfo: { name: 'c' }, createdAt: 1, lastSeenAt: 1 })
    await first.close()
    const second = new SqliteStore(file)
    expect(await second.sessions.get('s1')).toMatchObject({ principal: 'p' })
    await second.close()
  })

  it('keeps tasks and inputs across a reopen of the same file', async () => {
    const file = dbFile()
    const first = new SqliteStore(file)
    await first.tasks.create(task('t1'))
    const updated = await first.tasks.transition('t1', ['working'], 'input_required', { statusMessage: 'asking' }, 5)
    const queued = { key: 'in-1', taskId: 't1', principal: 'p', method: 'roots/list', params: {}, state: 'pending' as const, createdAt: 5, answer: null }
    await first.tasks.addInput(queued, 1)
    await first.close()

    const second = new SqliteStore(file)
    expect(await second.tasks.get('t1', 10)).toEqual(updated)
    expect(await second.tasks.unfinished()).toEqual([updated])
    expect(await second.tasks.pendingInputs('t1')).toEqual([queued])
    await expect(second.tasks.addInput({ ...queued, key: 'in-2' }, 1)).rejects.toMatchObject({ code: 'GW_ERR_TASK_INPUT_LIMIT' })
    await second.close()
  })

  it('upgrades a database written by an older gateway in place', async () => {
    const file = dbFile()
    const old = new Database(file)
    for (const step of MIGRATIONS.slice(0, 3)) old.exec(step)
    old.pragma('user_version = 3')
    old.prepare("INSERT INTO sessions VALUES ('s1', 'p', '2025-11-25', '{}', '{}', 1, 1)").run()
    old.prepare(`INSERT INTO tasks (id, principal, era, status, created_at, last_updated_at, poll_interval_ms, upstream, tool, request, client_capabilities)
      VALUES ('t0', 'p', 'legacy', 'working', 1, 1, 1000, 'demo', 'echo', '{}', '{}')`).run()
    old.close()

    const store = new SqliteStore(file)
    expect(await store.sessions.get('s1')).toMatchObject({ principal: 'p' })
    // A task stored before owners were recorded belongs to no process: the next start takes it over.
    expect(await store.tasks.unfinished()).toMatchObject([{ id: 't0', owner: '', traceContext: null }])
    // Its era, stored as \`legacy\`, is named by its revision.
    expect(await store.tasks.get('t0', 1)).toMatchObject({ era: '2025-11-25' })
    // A task stored before timelines were recorded has none.
    expect(await store.tasks.timeline('t0')).toEqual([])
    // What the old file holds counts against its principal's budget of stored bytes: the task's request '{}' and
    // capabilities '{}', and the session's capabilities '{}' and client info '{}'.
    expect(await store.tasks.storedBytes('p')).toBe(8)
    await store.tasks.create(task('t1'))
    expect(await store.tasks.get('t1', 1)).toEqual(task('t1'))
    await store.close()
  })

  it('refuses a database written by a newer gateway', async () => {
    const file = dbFile()
    const newer = new Database(file)
    newer.pragma(`user_version = ${SCHEMA_VERSION + 1}`)
    newer.close()
    expect(() => new SqliteStore(file)).toThrow(expect.objectContaining({ code: 'GW_ERR_STORE_SCHEMA' }))
  })

  it('reports a backend failure with its own code, not the backend message', async () => {
    const store = new SqliteStore(dbFile())
    await store.close()
    const failure = await store.tasks.get('t1', 1).catch((err: unknown) => err)
    expect(failure).toMatchObject({ code: 'GW_ERR_STORE_UNAVAILABLE' })
    expect((failure as Error).cause).toBeInstanceOf(Error)
  })
})
