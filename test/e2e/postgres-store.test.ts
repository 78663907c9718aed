import { randomUUID } from 'node:crypto'
import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { PostgresStore } from '../../src/store/postgres/postgres-store.ts'
import { SCHEMA_VERSION } from '../../src/store/postgres/postgres-schema.ts'
import type { TaskRecord } from '../../src/store/types.ts'
import { PgRoundTrips } from '../helpers/pg-round-trips.ts'
import { dropSchema, freshSchema, POSTGRES_URL, sql, storeOptions } from '../helpers/postgres.ts'
import { until } from '../helpers/until.ts'

function task (overrides: Partial<TaskRecord> = {}): TaskRecord {
  return {
    id: randomUUID(),
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
    progressToken: null,
    clientCapabilities: {},
    outcome: null,
    traceContext: null,
    resume: null,
    ...overrides,
  }
}

/** What each test opened, closed and dropped after it. */
const opened: PostgresStore[] = []
const schemas: string[] = []

function store (schema: string, options: Parameters<typeof storeOptions>[1] = {}): PostgresStore {
  const created = new PostgresStore(storeOptions(schema, options))
  opened.push(created)
  return created
}

function schema (): string {
  const name = freshSchema()
  schemas.push(name)
  return name
}

afterEach(async () => {
  await Promise.all(opened.splice(0).map(async (s) => { await s.close() }))
  for (const name of schemas.splice(0)) await dropSchema(name)
})

describe('postgres store', () => {
  it('migrates a fresh schema once when two processes start on it at once, and both then share it', async () => {
    const name = schema()
    const [a, b] = [store(name), store(name)]
    await Promise.all([a.ready(), b.ready()])
    const steps = await sql(`SELECT version FROM "${name}".schema_migrations ORDER BY version`)
    expect(steps.rows.map((row: { version: number }) => row.version)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1))
    const record = task()
    await a.tasks.create(record)
    expect(await b.tasks.get(record.id, 1)).toEqual(record)
    // A later start finds the work done.
    const c = store(name)
    await c.ready()
    expect(await c.tasks.get(record.id, 1)).toEqual(record)
    expect((await sql(`SELECT count(*)::int AS n FROM "${name}".schema_migrations`)).rows[0].n).toBe(SCHEMA_VERSION)
  })

  it('refuses a schema a newer gateway migrated, and leaves it untouched', async () => {
    const name = schema()
    await sql(`CREATE SCHEMA "${name}"`)
    await sql(`CREATE TABLE "${name}".schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`)
    await sql(`INSERT INTO "${name}".schema_migrations (version) VALUES ($1)`, [SCHEMA_VERSION + 1])
    await expect(store(name).ready()).rejects.toMatchObject({ code: 'GW_ERR_STORE_SCHEMA' })
    const tables = await sql('SELECT table_name FROM information_schema.tables WHERE table_schema = $1', [name])
    expect(tables.rows).toEqual([{ table_name: 'schema_migrations' }])
  })

  it('reports a closed store with its own code, never the driver\'s message, and keeps the driver error as the cause', async () => {
    const closed = store(schema())
    await closed.ready()
    await closed.close()
    // Each started only when the one before it has failed: none is left rejected with nobody listening yet.
    const attempts = [async () => await closed.tasks.get('t1', 1), async () => await closed.sessions.get('s1'),
      async () => await closed.leases.lapsed(1), async () => await closed.tasks.create(task())]
    for (const attempt of attempts) {
      const failure = await attempt().catch((err: unknown) => err)
      expect(failure).toMatchObject({ code: 'GW_ERR_STORE_UNAVAILABLE', message: 'the store is unavailable: the store was closed' })
      expect((failure as Error).cause).toBeInstanceOf(Error)
    }
    expect(await closed.health()).toMatchObject({ ok: false, kind: 'postgres', detail: 'the store is unavailable: the store was closed' })
  })

  it('refuses an operation that gets no connection within acquireTimeout, saying the pool is exhausted, and works once one is free', async () => {
    const name = schema()
    const small = store(name, { poolSize: 1, acquireTimeout: 200 })
    await small.ready()
    const record = task()
    await small.tasks.create(record)
    // Another client holds the task's row: the store's one connection waits for it inside a move.
    const holder = new pg.Client({ connectionString: POSTGRES_URL })
    await holder.connect()
    try {
      await holder.query('BEGIN')
      await holder.query(`SELECT 1 FROM "${name}".tasks WHERE id = $1 FOR UPDATE`, [record.id])
      const move = small.tasks.transition(record.id, ['working'], 'completed', { outcome: { result: { content: [] } } }, 2)
      await until('the move waits for the row', async () => {
        const waiting = await sql("SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1", [`%"${name}".tasks%`])
        return waiting.rowCount! > 0 ? true : undefined
      })
      const refused = await small.tasks.get(record.id, 2).catch((err: unknown) => err)
      expect(refused).toMatchObject({
        code: 'GW_ERR_STORE_UNAVAILABLE',
        message: 'the store is unavailable: the pool of 1 PostgreSQL connections is exhausted: none came free within 0.2 s (store.poolSize, store.acquireTimeout)',
      })
      expect(await small.health()).toMatchObject({ ok: false, detail: expect.stringContaining('is exhausted') })
      await holder.query('COMMIT')
      expect(await move).toMatchObject({ status: 'completed' })
      expect(await small.tasks.get(record.id, 2)).toMatchObject({ status: 'completed' })
    } finally {
      await holder.end()
    }
  })

  it('replaces connections the server ended by itself: the next operations work', async () => {
    const application = `gw-test-${randomUUID()}`
    const name = schema()
    const killed = store(name, { url: `${POSTGRES_URL}?application_name=${application}`, poolSize: 2 })
    await killed.ready()
    const record = task()
    await killed.tasks.create(record)
    // The pool's two connections and the bus's LISTEN connection; the bus opens a new one by itself.
    const ended = await sql('SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [application])
    expect(ended.rowCount).toBe(3)
    const pids = ended.rows.map((row: { pid: number }) => row.pid)
    await until('the ended connections are gone', async () => {
      const left = await sql('SELECT 1 FROM pg_stat_activity WHERE pid = ANY($1)', [pids])
      return left.rowCount === 0 ? true : undefined
    })
    expect(await killed.tasks.get(record.id, 1)).toEqual(record)
    expect(await killed.tasks.transition(record.id, ['working'], 'input_required', { statusMessage: 'asking' }, 2)).toMatchObject({ status: 'input_required' })
    expect(await killed.health()).toEqual({ ok: true, kind: 'postgres' })
  })

  it('creates a task in one round trip however many the account has running, and reads one in one', async () => {
    const proxy = new PgRoundTrips({ host: '127.0.0.1', port: 5432 })
    const port = await proxy.listen()
    const name = schema()
    // One connection, so every statement is counted in order; the 200 creates queue for it, which on a loaded
    // machine takes longer than the default acquire timeout (a refusal here would prove nothing about round trips).
    const counted = store(name, { url: `postgres://postgres@127.0.0.1:${port}/postgres`, poolSize: 1, acquireTimeout: 120_000 })
    try {
      await counted.ready()
      await Promise.all(Array.from({ length: 200 }, async () => { await counted.tasks.create(task(), { maxActive: 1000 }) }))
      const record = task()
      const before = proxy.count
      await counted.tasks.create(record, { maxActive: 1000, maxStoredBytes: 1_000_000 })
      expect(proxy.count - before).toBe(1)
      expect(await counted.tasks.get(record.id, 1)).toEqual(record)
      expect(proxy.count - before).toBe(2)
    } finally {
      await counted.close()
      await proxy.close()
    }
  })

  it('reads the tasks and sessions asked for at once in one round trip each, every caller getting its own record', async () => {
    const proxy = new PgRoundTrips({ host: '127.0.0.1', port: 5432 })
    const port = await proxy.listen()
    const counted = store(schema(), { url: `postgres://postgres@127.0.0.1:${port}/postgres`, poolSize: 4 })
    try {
      await counted.ready()
      const tasks = Array.from({ length: 40 }, (_, i) => task({ ttlMs: i === 0 ? 10 : null, createdAt: 1 }))
      for (const record of tasks) await counted.tasks.create(record)
      const sessions = Array.from({ length: 20 }, (_, i) => {
        const clientInfo = { name: 'c', version: '1' }
        return { id: randomUUID(), principal: `p${i}`, protocolVersion: '2025-11-25', clientCapabilities: {}, clientInfo, createdAt: 1, lastSeenAt: 1 }
      })
      for (const session of sessions) await counted.sessions.create(session)

      let before = proxy.count
      // Every task twice, some unknown ids, and the one with a TTL asked both before and after it ends (createdAt 1 + 10 ms).
      const asked = [...tasks.map((t) => [t.id, 5] as const), ...tasks.map((t) => [t.id, 5] as const), ['unknown-1', 5], ['unknown-2', 5],
        [tasks[0]!.id, 11]] as const
      const read = await Promise.all(asked.map(async ([id, now]) => await counted.tasks.get(id, now)))
      expect(proxy.count - before).toBe(1)
      expect(read.slice(0, 80)).toEqual([...tasks, ...tasks])
      expect(read.slice(80)).toEqual([null, null, null])
      // Two callers of one task never share an object: what one changes, the other does not see.
      expect(read[1]).not.toBe(read[41])
      expect(read[1]!.request).not.toBe(read[41]!.request)

      before = proxy.count
      const sessionsRead = await Promise.all([...sessions, ...sessions].map(async (s) => await counted.sessions.get(s.id)))
      expect(sessionsRead).toEqual([...sessions, ...sessions])
      expect(proxy.count - before).toBe(1)

      // A statement asks for 500 ids at most: 600 at once take two.
      before = proxy.count
      const many = await Promise.all(Array.from({ length: 600 }, async (_, i) => await counted.tasks.get(i === 599 ? tasks[1]!.id : `unknown-${i}`, 5)))
      expect(proxy.count - before).toBe(2)
      expect(many.filter((found) => found !== null)).toEqual([tasks[1]])
    } finally {
      await counted.close()
      await proxy.close()
    }
  })

  it('keeps the limit of unfinished tasks of accounts an older gateway stored, once migrated', async () => {
    const name = schema()
    const older = store(name)
    await older.ready()
    const running = [task(), task()]
    for (const record of running) await older.tasks.create(record)
    await older.tasks.create(task({ status: 'completed' }))
    // The schema as the gateway before the count of unfinished tasks per account left it.
    await sql(`ALTER TABLE "${name}".accounts DROP COLUMN active`)
    await sql(`DROP FUNCTION "${name}".create_task`)
    // Migration 3 added the count (later steps run again after it, as on such a schema).
    await sql(`DELETE FROM "${name}".schema_migrations WHERE version >= 3`)
    await older.close()
    const newer = store(name)
    await newer.ready()
    await expect(newer.tasks.create(task(), { maxActive: 2 })).rejects.toMatchObject({ code: 'GW_ERR_TASK_LIMIT' })
    await newer.tasks.transition(running[0]!.id, ['working'], 'cancelled', {}, 2)
    await newer.tasks.create(task(), { maxActive: 2 })
    await expect(newer.tasks.create(task(), { maxActive: 2 })).rejects.toMatchObject({ code: 'GW_ERR_TASK_LIMIT' })
  })
})
