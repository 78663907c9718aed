import { execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { promisify } from 'node:util'
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import Database from 'better-sqlite3'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js'
import { afterEach, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { REPO_ROOT } from '../fixtures/spawn-upstream.ts'
import { GATEWAY_MAIN } from '../helpers/built.ts'
import { demoStdioYaml, startGatewayProcess, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { dropSchema, freshSchema, POSTGRES_URL } from '../helpers/postgres.ts'
import { privateRedis, stopRedis, type PrivateRedis } from '../helpers/private-redis.ts'
import { runTask } from '../helpers/tasks.ts'
import { until } from '../helpers/until.ts'

const TOKEN = 'backup-test-token'

const STATE_SECRET = 'the secret every gateway process of this test shares'

function config (database: string, store = `{ kind: sqlite, path: ${JSON.stringify(database)} }`): string {
  return `
store: ${store}
server: { stateSecret: ${STATE_SECRET} }
logging: { level: info }
auth:
  tokens: [{ principal: ops, sha256: ${sha256Hex(TOKEN)} }]
upstreams:
${demoStdioYaml()}
`
}

async function connect (url: string): Promise<Client> {
  const client = new Client({ name: 'backup-test', version: '1.0.0' }, { capabilities: {} })
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }))
  return client
}

/** Runs the real CLI's `backup` command; resolves with its exit code and output. */
async function backupCommand (configFile: string, to: string): Promise<{ code: number | null, stdout: string, stderr: string }> {
  const child = spawn(process.execPath, [GATEWAY_MAIN, 'backup', '--config', configFile, '--to', to], { cwd: REPO_ROOT })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  const [code] = await once(child, 'close') as [number | null]
  return { code, stdout, stderr }
}

interface Completed { taskId: string, result: unknown }

/** Every task of `tasks` is served completed, with its result (asked all at once: they are independent). */
async function expectServed (reader: Client, tasks: Completed[]): Promise<void> {
  await Promise.all(tasks.map(async (task) => {
    expect(await reader.experimental.tasks.getTask(task.taskId)).toMatchObject({ taskId: task.taskId, status: 'completed' })
    expect(await reader.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)).toEqual(task.result)
  }))
}

/** Tasks created and completed back to back by a few workers until `stop()`; what completed, in order. */
function load (client: Client): { completed: Completed[], stop: () => Promise<void>, next: (n: number) => Promise<void> } {
  const completed: Completed[] = []
  const waiters: Array<{ count: number, resolve: () => void }> = []
  const state = { running: true }
  const worker = async (w: number): Promise<void> => {
    for (let i = 0; state.running; i++) {
      // Echoes carry a text of their own; slow tasks keep some working while the copy is taken.
      const outcome = w === 0
        ? await runTask(client, 'demo__slow', { duration: 120, steps: 2 })
        : await runTask(client, 'demo__echo', { text: `worker ${w}, task ${i}` })
      if (outcome.error !== undefined || outcome.taskId === undefined) throw outcome.error ?? new Error('no task id')
      completed.push({ taskId: outcome.taskId, result: outcome.result })
      for (const waiter of waiters.filter((x) => completed.length >= x.count)) {
        waiters.splice(waiters.indexOf(waiter), 1)
        waiter.resolve()
      }
    }
  }
  const workers = Promise.all([0, 1, 2, 3].map(worker))
  return {
    completed,
    next: async (n) => await new Promise<void>((resolve) => waiters.push({ count: completed.length + n, resolve })),
    stop: async () => {
      state.running = false
      await workers
    },
  }
}

const gateways: GatewayProcess[] = []
const clients: Client[] = []
const redises: PrivateRedis[] = []
afterEach(async () => {
  await Promise.all(clients.splice(0).map(async (client) => await client.close()))
  await stopAll(gateways.splice(0))
  await Promise.all(redises.splice(0).map(stopRedis))
})

/** `redis-cli` as the operator runs it (docs/operations.md, Backup and restore). */
async function redisCli (url: string, ...args: string[]): Promise<string> {
  return (await promisify(execFile)('redis-cli', ['-u', url, ...args])).stdout
}

describe('backup and restore of a SQLite store', () => {
  it('a backup taken under load restores to a gateway that serves every task completed before it, with its result', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-backup-'))
    const database = join(dir, 'gateway.db')
    const file = writeConfig(config(database))
    const first = await startGatewayProcess(file)
    gateways.push(first)
    const client = await connect(first.url)
    clients.push(client)

    const tasks = load(client)
    await tasks.next(20)
    const before = [...tasks.completed]
    const backup = join(dir, 'backups', 'gateway-backup.db')
    const taken = await backupCommand(file, backup)
    console.info(`backup under load: ${taken.stdout.trim()}; ${tasks.completed.length - before.length} tasks completed while the command ran`)
    // Under load: tasks went on completing while the command ran.
    expect(tasks.completed.length).toBeGreaterThan(before.length)
    expect(taken.stderr).toBe('')
    expect(taken.code).toBe(0)
    expect(taken.stdout).toMatch(/gateway-backup\.db: backup of the store taken at \d{4}-\d\d-\d\dT[\d:.]+Z \(\d+ tasks, \d+ bytes, \d+ ms\)/)
    // The gateway went on while the copy was taken, and goes on after it: a task created now is not in the copy.
    await tasks.next(4)
    await tasks.stop()
    const after = await runTask(client, 'demo__echo', { text: 'after the backup' })
    expect(first.lines.some((line) => line.includes('"level":50'))).toBe(false)

    // The restore: stop the gateway, put the backup in place of the file and its log, start it again.
    first.child.kill('SIGTERM')
    expect((await first.exited)[0]).toBe(0)
    for (const suffix of ['', '-wal', '-shm']) rmSync(`${database}${suffix}`, { force: true })
    copyFileSync(backup, database)
    const restored = await startGatewayProcess(file)
    gateways.push(restored)
    const reader = await connect(restored.url)
    clients.push(reader)

    expect(before.length).toBeGreaterThanOrEqual(20)
    await expectServed(reader, before)
    await expect(reader.experimental.tasks.getTask(after.taskId!)).rejects.toMatchObject({ code: -32602 })
  })
})

describe('the backup command', () => {
  it('writes a copy that a second gateway on this host opens while the first still holds the original', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-backup-'))
    const file = writeConfig(config(join(dir, 'gateway.db')))
    const first = await startGatewayProcess(file)
    gateways.push(first)
    const client = await connect(first.url)
    clients.push(client)
    const done = await runTask(client, 'demo__echo', { text: 'kept' })

    const copy = join(dir, 'copy.db')
    expect((await backupCommand(file, copy)).code).toBe(0)
    // The copy holds no trace of the process that holds the original: no GW_ERR_STORE_LOCKED naming it.
    const second = await startGatewayProcess(writeConfig(config(copy)))
    gateways.push(second)
    const reader = await connect(second.url)
    clients.push(reader)
    expect(await reader.experimental.tasks.getTaskResult(done.taskId!, CallToolResultSchema)).toEqual(done.result)
  })

  it('never overwrites a file, and names what to do for a store it does not copy', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-backup-'))
    const existing = join(dir, 'existing.db')
    copyFileSync(writeConfig('# not a database'), existing)
    const source = join(dir, 'gateway.db')
    new Database(source).close()
    const sqlite = await backupCommand(writeConfig(config(source)), existing)
    expect(sqlite.code).toBe(1)
    expect(sqlite.stderr).toContain(`'${existing}' exists already; a backup never overwrites a file`)

    const redis = await backupCommand(writeConfig(`store: { kind: redis, url: "redis://127.0.0.1:1" }\nserver: { stateSecret: a-secret-of-at-least-32-characters-long }\nupstreams:\n${demoStdioYaml()}\n`), join(dir, 'r.db'))
    expect(redis.code).toBe(1)
    expect(redis.stderr).toContain('back it up with Redis itself (BGSAVE')
    const postgres = await backupCommand(writeConfig(`store: { kind: postgres, schema: gw_one }\nserver: { stateSecret: a-secret-of-at-least-32-characters-long }\nupstreams:\n${demoStdioYaml()}\n`), join(dir, 'p.db'))
    expect(postgres.code).toBe(1)
    expect(postgres.stderr).toContain('pg_dump --schema=gw_one; see docs/operations.md#backup-and-restore')
    const memory = await backupCommand(writeConfig(`store: { kind: memory }\nupstreams:\n${demoStdioYaml()}\n`), join(dir, 'm.db'))
    expect(memory.stderr).toContain('nothing to back up')
  })
})

describe('backup and restore of a Redis store', () => {
  it('BGSAVE under load, its dump.rdb copied and a new Redis started on the copy: the gateway serves every task completed before it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-backup-redis-'))
    const live = await privateRedis('noeviction', undefined, undefined, ['--dir', dir])
    redises.push(live)
    const file = writeConfig(config('', `{ kind: redis, url: ${JSON.stringify(live.url)}, prefix: 'gw:' }`))
    const first = await startGatewayProcess(file)
    gateways.push(first)
    const client = await connect(first.url)
    clients.push(client)

    const tasks = load(client)
    await tasks.next(20)
    const before = [...tasks.completed]
    // The recipe: BGSAVE, wait until it is done and succeeded, copy the file it wrote.
    expect(await redisCli(live.url, 'BGSAVE')).toMatch(/Background saving started/)
    const saved = await until('the BGSAVE is done', async () => {
      const info = await redisCli(live.url, 'INFO', 'persistence')
      return info.includes('rdb_bgsave_in_progress:0') ? info : undefined
    })
    expect(saved).toContain('rdb_last_bgsave_status:ok')
    const backup = join(dir, 'backup.rdb')
    copyFileSync(join(dir, 'dump.rdb'), backup)
    await tasks.next(4)
    await tasks.stop()
    const after = await runTask(client, 'demo__echo', { text: 'after the backup' })

    // The restore: a new Redis whose dump.rdb is the copy; the gateway pointed at it.
    first.child.kill('SIGTERM')
    expect((await first.exited)[0]).toBe(0)
    await stopRedis(redises.pop())
    const restoredDir = mkdtempSync(join(tmpdir(), 'gw-restored-redis-'))
    copyFileSync(backup, join(restoredDir, 'dump.rdb'))
    const restoredRedis = await privateRedis('noeviction', undefined, undefined, ['--dir', restoredDir])
    redises.push(restoredRedis)
    const restored = await startGatewayProcess(writeConfig(config('', `{ kind: redis, url: ${JSON.stringify(restoredRedis.url)}, prefix: 'gw:' }`)))
    gateways.push(restored)
    const reader = await connect(restored.url)
    clients.push(reader)

    expect(before.length).toBeGreaterThanOrEqual(20)
    await expectServed(reader, before)
    await expect(reader.experimental.tasks.getTask(after.taskId!)).rejects.toMatchObject({ code: -32602 })
    // A restored Redis keeps the store's epoch: nothing is reported lost.
    expect(restored.lines.some((line) => line.includes('The store lost its data'))).toBe(false)
  })
})

describe('backup and restore of a PostgreSQL store', () => {
  it('pg_dump of the schema under load, the schema dropped and pg_restore run: the gateway serves every task completed before the dump', async () => {
    const run = promisify(execFile)
    const dir = mkdtempSync(join(tmpdir(), 'gw-backup-postgres-'))
    const schema = freshSchema()
    const file = writeConfig(config('', `{ kind: postgres, url: ${JSON.stringify(POSTGRES_URL)}, schema: ${schema} }`))
    try {
      const first = await startGatewayProcess(file)
      gateways.push(first)
      const client = await connect(first.url)
      clients.push(client)

      const tasks = load(client)
      await tasks.next(20)
      const before = [...tasks.completed]
      // The recipe: pg_dump of the store's schema, in the custom format, while the gateway goes on.
      const dump = join(dir, 'gateway.dump')
      await run('pg_dump', [POSTGRES_URL, `--schema=${schema}`, '--format=custom', `--file=${dump}`])
      await tasks.next(4)
      await tasks.stop()
      const after = await runTask(client, 'demo__echo', { text: 'after the backup' })

      // The restore: stop the gateway, drop the schema, pg_restore the dump, start the gateway again.
      first.child.kill('SIGTERM')
      expect((await first.exited)[0]).toBe(0)
      await run('psql', ['-X', '-v', 'ON_ERROR_STOP=1', '-d', POSTGRES_URL, '-c', `DROP SCHEMA ${schema} CASCADE`])
      await run('pg_restore', [`--dbname=${POSTGRES_URL}`, dump])
      const restored = await startGatewayProcess(file)
      gateways.push(restored)
      const reader = await connect(restored.url)
      clients.push(reader)

      expect(before.length).toBeGreaterThanOrEqual(20)
      await expectServed(reader, before)
      await expect(reader.experimental.tasks.getTask(after.taskId!)).rejects.toMatchObject({ code: -32602 })
    } finally {
      await Promise.all(clients.splice(0).map(async (client) => await client.close()))
      await stopAll(gateways.splice(0))
      await dropSchema(schema)
    }
  })
})
