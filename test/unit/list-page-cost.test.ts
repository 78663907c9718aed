// What one tasks/list page costs each store, counted by the store itself (records looked at) or by the
// database's own plan: it must not grow with the tasks stored, nor with the tasks past their TTL that wait for
// the sweep. No clock: the counts are deterministic.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterAll, describe, expect, it } from 'vitest'
import { MemoryStore } from '../../src/store/memory/memory-store.ts'
import type { TaskRecord, TaskStore } from '../../src/store/types.ts'
import { MIGRATIONS } from '../../src/store/sqlite/sqlite-schema.ts'
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.ts'
import { LIST_AFTER, LIST_FIRST } from '../../src/store/sqlite/sqlite-task-store.ts'
import { SWEEP_ACCOUNT_BYTES } from '../../src/store/sqlite/sqlite-account-bytes.ts'
import type { RedisTaskStore } from '../../src/store/redis/redis-task-store.ts'
import { task, T0 } from '../contract/task-records.ts'
import { isolatedRedisStore } from '../helpers/redis.ts'
import { dropSchema, freshSchema, sql, storeOptions } from '../helpers/postgres.ts'
import { PostgresStore } from '../../src/store/postgres/postgres-store.ts'
import { listStatement } from '../../src/store/postgres/postgres-task-store.ts'

const PRINCIPAL = 'principal:many'
/** The schema steps that put each task's expiry in a principal's list index (released steps keep their numbers). */
const SQLITE_LIST_STEP = 12
const POSTGRES_LIST_STEP = 5
const YEAR_MS = 365 * 86_400_000

/** `expired` tasks past their TTL at T0 (the oldest), then `live` ones (every other one with a TTL), all of PRINCIPAL, created in bulk. */
async function fill (tasks: TaskStore, expired: number, live: number, batch = 1000): Promise<TaskRecord[]> {
  const created: TaskRecord[] = []
  for (let i = 0; i < expired + live; i++) {
    const old = i < expired
    created.push(task({ id: `${old ? 'old' : 'live'}-${String(i).padStart(7, '0')}`, principal: PRINCIPAL, createdAt: i, lastUpdatedAt: i, ttlMs: old ? 10 : i % 2 === 0 ? null : YEAR_MS }))
  }
  for (let i = 0; i < created.length; i += batch) await Promise.all(created.slice(i, i + batch).map((t) => tasks.create(t)))
  return created.filter((t) => t.ttlMs !== 10)
}

describe('tasks/list page cost, memory store', () => {
  const visitsOfPages = async (expired: number, live: number): Promise<{ visits: number, first: string[] }> => {
    const store = new MemoryStore()
    const liveTasks = await fill(store.tasks, expired, live)
    const before = store.tasks.listVisits
    const first = await store.tasks.list(PRINCIPAL, undefined, 20, T0)
    const middle = liveTasks[Math.floor(live / 2)]!
    await store.tasks.list(PRINCIPAL, { createdAt: middle.createdAt, id: middle.id }, 20, T0)
    return { visits: store.tasks.listVisits - before, first: first.map((t) => t.id) }
  }

  it('looks at the same records for a first and a middle page with 1,000 or 20,000 tasks stored (the order itself: task-order.test.ts, 100,000)', async () => {
    const small = await visitsOfPages(0, 1000)
    const large = await visitsOfPages(0, 20_000)
    expect(small.visits).toBe(40)
    expect(large.visits).toBe(40)
  })

  it('returns the live tasks behind 20,000 expired unswept ones after looking at no more than a block of the expired', async () => {
    const few = await visitsOfPages(100, 1000)
    const many = await visitsOfPages(20_000, 1000)
    expect(many.first).toEqual(Array.from({ length: 20 }, (_, i) => `live-${String(20_000 + i).padStart(7, '0')}`))
    expect(many.visits).toBeLessThanOrEqual(few.visits + 1024)
  })

  it('sweeps the expired tasks and nothing else, and pages the same afterwards', async () => {
    const store = new MemoryStore()
    await fill(store.tasks, 3000, 100)
    expect(await store.tasks.sweep(T0)).toBe(3000)
    expect(await store.tasks.sweep(T0)).toBe(0)
    const page = await store.tasks.list(PRINCIPAL, undefined, 200, T0)
    expect(page).toHaveLength(100)
    expect(page[0]!.id).toBe('live-0003000')
  })
})

describe('tasks/list page cost, Redis store', () => {
  it('looks at the same index entries for a first and a middle page with 1,000 or 20,000 tasks stored', async () => {
    const visitsOfPages = async (live: number): Promise<number> => {
      const store = await isolatedRedisStore()
      try {
        const liveTasks = await fill(store.tasks, 0, live)
        const tasks = store.tasks as RedisTaskStore
        const before = tasks.listVisits
        expect(await tasks.list(PRINCIPAL, undefined, 20, T0)).toHaveLength(20)
        const middle = liveTasks[Math.floor(live / 2)]!
        const page = await tasks.list(PRINCIPAL, { createdAt: middle.createdAt, id: middle.id }, 20, T0)
        expect(page[0]!.id).toBe(liveTasks[Math.floor(live / 2) + 1]!.id)
        return tasks.listVisits - before
      } finally {
        await store.close()
      }
    }
    expect(await visitsOfPages(1000)).toBe(40)
    expect(await visitsOfPages(20_000)).toBe(40)
  })

  it('passes over 20,000 expired unswept tasks once: the next first page looks at the page only', async () => {
    const store = await isolatedRedisStore()
    try {
      await fill(store.tasks, 20_000, 100)
      const tasks = store.tasks as RedisTaskStore
      const first = await tasks.list(PRINCIPAL, undefined, 20, T0)
      expect(first.map((t) => t.id)).toEqual(Array.from({ length: 20 }, (_, i) => `live-${String(20_000 + i).padStart(7, '0')}`))
      const before = tasks.listVisits
      expect(await tasks.list(PRINCIPAL, undefined, 20, T0)).toEqual(first)
      expect(tasks.listVisits - before).toBe(20)
      // The sweep still finds and removes every one of them.
      expect(await tasks.sweep(T0)).toBe(20_000)
    } finally {
      await store.close()
    }
  })
})

describe('tasks/list page cost, SQLite store', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gw-list-cost-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  const plan = (db: Database.Database, sql: string): string =>
    db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all({ principal: 'p', now: 1, limit: 20, createdAt: 1, id: 'x' }).map((row) => (row as { detail: string }).detail).join(' | ')

  it('reads a page from an index that holds each task\'s expiry, from the cursor on, unsorted', async () => {
    const file = join(dir, 'plan.db')
    await new SqliteStore(file).close()
    const db = new Database(file, { readonly: true })
    try {
      for (const sql of [LIST_FIRST, LIST_AFTER]) {
        const used = plan(db, sql)
        expect(used).toMatch(/^SEARCH tasks USING INDEX tasks_principal_list \(principal=\?/)
        expect(used).not.toMatch(/SCAN|TEMP B-TREE/)
      }
      expect(plan(db, LIST_AFTER)).toContain('created_at>?')
      // The expiry is in the index: a task past its TTL is passed over without reading its row.
      const columns = db.pragma('index_info(tasks_principal_list)') as Array<{ name: string }>
      expect(columns.map((c) => c.name)).toEqual(['principal', 'created_at', 'id', 'expires_at'])
      // The sweep's count of freed bytes reads the expired tasks only, not every task of their accounts.
      expect(plan(db, SWEEP_ACCOUNT_BYTES)).toMatch(/SEARCH tasks USING INDEX tasks_expires \(expires_at<\?\)/)
      expect(plan(db, SWEEP_ACCOUNT_BYTES)).not.toMatch(/SCAN tasks|SCAN account_bytes/)
    } finally {
      db.close()
    }
  })

  it('upgrades a database of the previous layout: its tasks are listed, in order, through the new index', async () => {
    const file = join(dir, 'upgrade.db')
    const old = new Database(file)
    for (const step of MIGRATIONS.slice(0, SQLITE_LIST_STEP - 1)) old.exec(step)
    old.pragma(`user_version = ${SQLITE_LIST_STEP - 1}`)
    const insert = old.prepare(`INSERT INTO tasks (id, principal, era, status, created_at, last_updated_at, ttl_ms, expires_at, poll_interval_ms, upstream, tool,
      request, client_capabilities, account) VALUES (?, 'p', '2025-11-25', 'working', ?, ?, ?, ?, 1000, 'demo', 'echo', '{}', '{}', 'p')`)
    insert.run('b', 2, 2, null, null)
    insert.run('a', 2, 2, null, null)
    insert.run('gone', 1, 1, 5, 6)
    insert.run('c', 3, 3, 100, 103)
    old.close()
    const store = new SqliteStore(file)
    try {
      expect((await store.tasks.list('p', undefined, 10, 50)).map((t) => t.id)).toEqual(['a', 'b', 'c'])
      expect((await store.tasks.list('p', { createdAt: 2, id: 'a' }, 10, 50)).map((t) => t.id)).toEqual(['b', 'c'])
    } finally {
      await store.close()
    }
    const db = new Database(file, { readonly: true })
    try {
      expect(plan(db, LIST_FIRST)).toContain('tasks_principal_list')
    } finally {
      db.close()
    }
  })
})

interface PlanNode { 'Node Type': string, 'Index Name'?: string, 'Index Cond'?: string, Filter?: string, Plans?: PlanNode[] }

function nodes (node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(nodes)]
}

describe('tasks/list page cost, PostgreSQL store', () => {
  const opened = async (name: string): Promise<PostgresStore> => {
    const store = new PostgresStore(storeOptions(name))
    await store.ready()
    return store
  }

  it('reads a page in two index scans that check each task\'s expiry in the index, behind 2,000 expired unswept tasks', async () => {
    const name = freshSchema()
    const schema = `"${name}"`
    const store = await opened(name)
    try {
      await fill(store.tasks, 2000, 2000, 50)
      await sql(`ANALYZE ${schema}.tasks`)
      const first = await store.tasks.list(PRINCIPAL, undefined, 20, T0)
      expect(first.map((t) => t.id)).toEqual(Array.from({ length: 20 }, (_, i) => `live-${String(2000 + i).padStart(7, '0')}`))
      for (const [after, values] of [[false, [PRINCIPAL, T0, 20]], [true, [PRINCIPAL, T0, 3000, 'live-0003000', 20]]] as const) {
        const [row] = (await sql(`EXPLAIN (FORMAT JSON) ${listStatement(schema, after)}`, [...values])).rows as Array<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>
        const plan = nodes(row!['QUERY PLAN'][0]!.Plan)
        const scans = plan.filter((node) => node['Node Type'].includes('Scan') && node['Node Type'] !== 'Subquery Scan')
        expect(scans.map((node) => node['Index Name'])).toEqual(['tasks_principal_list', 'tasks_principal_list'])
        for (const scan of scans) {
          expect(scan['Index Cond']).toMatch(/expires_at/)
          expect(scan.Filter).toBeUndefined()
        }
        expect(plan.some((node) => node['Node Type'] === 'Seq Scan')).toBe(false)
      }
    } finally {
      await store.close()
      await dropSchema(name)
    }
  })

  it('upgrades a schema of the previous layout: its tasks are listed, in order, through the new index', async () => {
    const name = freshSchema()
    const schema = `"${name}"`
    const store = await opened(name)
    try {
      await fill(store.tasks, 3, 5, 50)
      await sql(`DROP INDEX ${schema}.tasks_principal_list`)
      await sql(`CREATE INDEX tasks_principal_created ON ${schema}.tasks (principal, created_at, id)`)
      await sql(`DELETE FROM ${schema}.schema_migrations WHERE version >= $1`, [POSTGRES_LIST_STEP])
      const upgraded = await opened(name)
      try {
        expect((await upgraded.tasks.list(PRINCIPAL, undefined, 10, T0)).map((t) => t.id)).toEqual(Array.from({ length: 5 }, (_, i) => `live-${String(3 + i).padStart(7, '0')}`))
      } finally {
        await upgraded.close()
      }
      const indexes = await sql('SELECT indexname FROM pg_indexes WHERE schemaname = $1', [name])
      expect(indexes.rows.map((r) => (r as { indexname: string }).indexname)).toContain('tasks_principal_list')
      expect(indexes.rows.map((r) => (r as { indexname: string }).indexname)).not.toContain('tasks_principal_created')
    } finally {
      await store.close()
      await dropSchema(name)
    }
  })
})
