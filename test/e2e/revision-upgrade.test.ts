import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { CountingProxy } from '../helpers/counting-proxy.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { startGatewayProcess, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { legacyTask, next, RawSession } from '../helpers/raw-session.ts'
import { REDIS_URL, STATE_SECRET } from '../helpers/redis.ts'
import { sql } from '../helpers/postgres.ts'
import { readStore, SHARED_KINDS, sharedStore, type SharedStore } from '../helpers/shared-store.ts'
import { recordedInSqlite, recordedInStore, startPair } from '../helpers/resume.ts'
import { SCHEMA_VERSION as SQLITE_SCHEMA } from '../../src/store/sqlite/sqlite-schema.ts'

type Json = Record<string, unknown>

/** The steps that named the eras by revision (released steps keep their numbers): SQLite's 11th, PostgreSQL's 4th. */
const SQLITE_REVISION_STEP = 11
const POSTGRES_REVISION_STEP = 4

/** The SQL that puts back the names the previous version stored: the era `legacy`/`modern`, in the column and the resume address. */
const PREVIOUS_NAMES_SQL = [
  "UPDATE $.tasks SET era = CASE era WHEN '2025-11-25' THEN 'legacy' ELSE 'modern' END",
  'UPDATE $.tasks SET resume = replace(replace(resume, \'"era":"2025-11-25"\', \'"era":"legacy"\'), \'"era":"2026-07-28"\', \'"era":"modern"\')',
]

/** What the tasks store as their eras: the column (or the body's field) and the resume address's. */
interface StoredEras { era: string, resume: string | undefined }

/**
 * A store written by the version before revisions named the eras: a 2025-11-25 client's task on a 2026-07-28
 * upstream that runs it as its own task stored era `legacy` and a resume address of era `modern`. The gateway
 * migrates such records at start and reads them also when a process of the previous version writes them
 * afterwards (a rolling deploy): the task still delivers to its session, and its upstream task is still polled.
 */
describe('tasks stored with the previous names of the eras', () => {
  let upstream: RunningGateway
  let proxy: CountingProxy
  const processes: GatewayProcess[] = []

  beforeAll(async () => {
    upstream = await startGateway({ upstreams: [demoStdio()], tasks: { decide: 'always', pollInterval: '50ms' } })
    proxy = new CountingProxy(upstream.url)
    await proxy.listen()
  })

  afterEach(async () => { await stopAll(processes) })

  afterAll(async () => {
    await stopAll(processes)
    await proxy?.close()
    await upstream?.close()
  })

  const upstreamYaml = (): string => `upstreams:\n  - { name: u, transport: streamable-http, url: ${JSON.stringify(proxy.url)}, era: auto }\n`

  /**
   * What a 2025-11-25 client sees of its task after the takeover, through `adopter`: the upstream's question and
   * (answered) the result on tasks/result, and the task's status notification on the GET stream of its session.
   */
  async function servedToItsSession (session: RawSession, adopter: string, taskId: string): Promise<void> {
    const via = session.on(adopter)
    const controller = new AbortController()
    try {
      const get = await via.stream('get', controller.signal)
      const results = await via.stream({ taskResult: taskId }, controller.signal)
      const question = await next(results, (m) => m.method === 'elicitation/create')
      expect((question.params as Json).message).toBe('Which revision?')
      expect((await via.post({ jsonrpc: '2.0', id: question.id, result: { action: 'accept', content: { name: '2025-11-25' } } })).status).toBe(202)
      const result = await next(results, (m) => 'result' in m || 'error' in m)
      expect(JSON.stringify(result.result ?? result), 'the result of tasks/result').toContain('Hello, 2025-11-25!')
      const status = await next(get, (m) => m.method === 'notifications/tasks/status' && (m.params as Json).status === 'completed')
      expect(status.params).toMatchObject({ taskId })
    } finally {
      controller.abort()
    }
  }

  it('on SQLite, a file of the previous version is migrated at start, and its task completes through its session', { timeout: 60_000 }, async () => {
    const database = join(mkdtempSync(join(tmpdir(), 'gw-revision-')), 'gateway.db')
    const config = writeConfig(`store: { kind: sqlite, path: ${JSON.stringify(database)} }\ntasks: { pollInterval: 50ms }\n${upstreamYaml()}`)
    const first = await startGatewayProcess(config)
    processes.push(first)
    const session = await RawSession.open(first.url)
    const taskId = await legacyTask(session, 'u__demo__ask_user', { message: 'Which revision?' })
    await recordedInSqlite(database, [taskId], 'native')
    await session.waitFor(taskId, ['input_required'])
    first.child.kill('SIGKILL')
    await first.exited

    // The file as the previous version left it: its names, at the schema version before this one.
    const file = new Database(database)
    for (const statement of PREVIOUS_NAMES_SQL) file.exec(statement.replace('$.', ''))
    file.pragma(`user_version = ${SQLITE_REVISION_STEP - 1}`)
    const eras = (): StoredEras => {
      const row = file.prepare<[string], { era: string, resume: string | null }>('SELECT era, resume FROM tasks WHERE id = ?').get(taskId)!
      return { era: row.era, resume: row.resume === null ? undefined : (JSON.parse(row.resume) as Json).era as string }
    }
    expect(eras()).toEqual({ era: 'legacy', resume: 'modern' })
    file.close()

    const second = await startGatewayProcess(config)
    processes.push(second)
    await servedToItsSession(session, second.url, taskId)
    const reader = new Database(database, { readonly: true })
    try {
      expect(reader.pragma('user_version', { simple: true })).toBe(SQLITE_SCHEMA)
      // The resume address is cleared as the task ends; the era stays, named by its revision.
      expect(reader.prepare('SELECT era FROM tasks WHERE id = ?').get(taskId)).toEqual({ era: '2025-11-25' })
    } finally {
      reader.close()
    }
  })

  describe.each(SHARED_KINDS)('on %s', (kind) => {
    let shared: SharedStore
    let redis: Redis | undefined

    beforeAll(() => {
      shared = sharedStore(kind, 'mcpgw-revision')
      if (kind === 'redis') redis = new Redis(REDIS_URL)
    })

    afterAll(async () => {
      await stopAll(processes)
      await redis?.quit()
      await shared.drop()
    })

    /** Writes the task's eras as the previous version did (and, with `again`, forgets that the store was migrated). */
    async function previousNames (taskId: string, again: boolean): Promise<void> {
      if (kind === 'postgres') {
        const schema = `"${String(shared.config.schema)}"`
        for (const statement of PREVIOUS_NAMES_SQL) await sql(`${statement.replace('$', schema)} WHERE id = $1`, [taskId])
        if (again) await sql(`DELETE FROM ${schema}.schema_migrations WHERE version >= $1`, [POSTGRES_REVISION_STEP])
        return
      }
      const key = `${String(shared.config.prefix)}task:${taskId}`
      const [body, res] = await redis!.hmget(key, 'body', 'res')
      await redis!.hset(key, 'body', body!.replace('"era":"2025-11-25"', '"era":"legacy"'), 'res', res!.replace('"era":"2026-07-28"', '"era":"modern"'))
      if (again) await redis!.del(`${String(shared.config.prefix)}revisions`)
    }

    async function storedEras (taskId: string): Promise<StoredEras> {
      if (kind === 'postgres') {
        const { rows } = await sql(`SELECT era, resume FROM "${String(shared.config.schema)}".tasks WHERE id = $1`, [taskId])
        return { era: rows[0].era, resume: (JSON.parse(rows[0].resume) as Json).era as string }
      }
      const [body, res] = await redis!.hmget(`${String(shared.config.prefix)}task:${taskId}`, 'body', 'res')
      return { era: (JSON.parse(body!) as Json).era as string, resume: (JSON.parse(res!) as Json).era as string }
    }

    it('migrates the records at start, reads those a previous process writes after, and the task completes through its session', { timeout: 60_000 }, async () => {
      const config = writeConfig(`store: ${shared.yaml}\nserver: { stateSecret: ${JSON.stringify(STATE_SECRET)} }\ntasks: { pollInterval: 50ms, ownerLease: 2s }\n${upstreamYaml()}`)
      const [a, b] = await startPair(config, processes)
      const session = await RawSession.open(a.url)
      const taskId = await legacyTask(session, 'u__demo__ask_user', { message: 'Which revision?' })
      await readStore(shared, async (store) => { await recordedInStore(store, [taskId], 'native') })
      // Waiting for its answer, the task is not written again until it comes.
      await session.waitFor(taskId, ['input_required'])

      // A store the previous version wrote, migrated by the first start of this one.
      await previousNames(taskId, true)
      expect(await storedEras(taskId)).toEqual({ era: 'legacy', resume: 'modern' })
      const read = await readStore(shared, async (store) => await store.tasks.get(taskId, Date.now()))
      expect(await storedEras(taskId)).toEqual({ era: '2025-11-25', resume: '2026-07-28' })
      expect(read).toMatchObject({ era: '2025-11-25', resume: { kind: 'native', era: '2026-07-28' } })

      // A process of the previous version writes the previous names after the migration: the survivor reads them right.
      await previousNames(taskId, false)
      a.child.kill('SIGKILL')
      await a.exited
      await servedToItsSession(session, b.url, taskId)
    })
  })
})
