import { mkdtempSync, mkdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { WAL_SIZE_LIMIT_BYTES } from '../../src/store/sqlite/checkpointer.ts'
import { demoStdioYaml, loggedLine, startGatewayProcess, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { legacyTask, RawSession } from '../helpers/raw-session.ts'

type Json = Record<string, unknown>
const TOKEN = 'sqlite-faults-test-token'

const gateways: GatewayProcess[] = []
afterAll(async () => { await stopAll(gateways) })

function config (database: string): string {
  return writeConfig(`
# The lock's heartbeat, which notices the file gone, every 500 ms (a sixth of this) rather than every 5 s.
store: { kind: sqlite, path: ${JSON.stringify(database)}, lockStaleAfter: 3s }
logging: { level: info }
auth:
  tokens: [{ principal: ops, sha256: ${sha256Hex(TOKEN)} }]
upstreams:
${demoStdioYaml()}
`)
}

async function started (file: string, options: { launcher?: string[] } = {}): Promise<{ gateway: GatewayProcess, session: RawSession }> {
  const gateway = await startGatewayProcess(file, [], options)
  gateways.push(gateway)
  return { gateway, session: await RawSession.open(gateway.url, {}, { authorization: `Bearer ${TOKEN}` }) }
}

async function readiness (gateway: GatewayProcess): Promise<{ status: number, detail: unknown }> {
  const res = await fetch(new URL('/readyz', gateway.url))
  return { status: res.status, detail: ((await res.json()) as { store: Json }).store.detail }
}

async function createTask (session: RawSession): Promise<Json> {
  return await session.request('tools/call', { name: 'demo__slow', arguments: { duration: 10, steps: 1 }, task: { ttl: 600_000 } })
}

/** A completed task and its result, and a task still running, stored by a gateway on `database` then killed (kill -9). */
async function storedTasks (database: string): Promise<{ taskId: string, task: Json, result: Json, runningId: string }> {
  const { gateway, session } = await started(config(database))
  const taskId = await legacyTask(session, 'demo__slow', { duration: 10, steps: 1 }, 600_000)
  const task = await session.waitFor(taskId, ['completed'])
  const result = await session.request('tasks/result', { taskId })
  const runningId = await legacyTask(session, 'demo__slow', { duration: 60_000, steps: 2 }, 600_000)
  await session.waitFor(runningId, ['working'])
  gateway.child.kill('SIGKILL')
  await gateway.exited
  return { taskId, task, result, runningId }
}

describe('the sqlite file deleted or replaced under a running gateway', () => {
  // Each case has a gateway on a file of its own; both start at once (a start is seconds on a busy machine).
  const gone = join(mkdtempSync(join(tmpdir(), 'gw-sqlite-gone-')), 'gateway.db')
  const replacedDir = mkdtempSync(join(tmpdir(), 'gw-sqlite-replaced-'))
  let opened: Array<Awaited<ReturnType<typeof started>>>
  beforeAll(async () => { opened = await Promise.all([started(config(gone)), started(config(join(replacedDir, 'gateway.db')))]) })

  it('is logged, makes the gateway not ready and refuses new tasks, naming what happened', async () => {
    const database = gone
    const { gateway, session } = opened[0]!
    const before = await legacyTask(session, 'demo__slow', { duration: 10, steps: 1 }, 600_000)
    await session.waitFor(before, ['completed'])

    rmSync(database)
    const logged = JSON.parse(await loggedLine(gateway, 'The SQLite store takes no new work')) as Json
    expect(logged.level).toBe(50)
    expect(logged.detail).toMatch(/^the SQLite file '.*gateway\.db' was deleted while this gateway process had it open/)
    expect(await readiness(gateway)).toEqual({ status: 503, detail: logged.detail })
    const refused = await createTask(session)
    expect(refused.error).toEqual({ code: -32603, message: `the store is unavailable: ${String(logged.detail)}`, data: { code: 'GW_ERR_STORE_UNAVAILABLE' } })
    // What it already holds is still served.
    expect((await session.request('tasks/get', { taskId: before })).result).toMatchObject({ status: 'completed' })
  })

  it('says so when another file takes its path (a restore copied over it)', async () => {
    const dir = replacedDir
    const database = join(dir, 'gateway.db')
    const { gateway, session } = opened[1]!
    writeFileSync(join(dir, 'other.db'), '')
    renameSync(join(dir, 'other.db'), database)
    const logged = JSON.parse(await loggedLine(gateway, 'The SQLite store takes no new work')) as Json
    expect(logged.detail).toMatch(/^the SQLite file '.*gateway\.db' was replaced by another file while this gateway process had it open/)
    expect((await createTask(session)).error).toMatchObject({ message: expect.stringContaining('was replaced by another file') })
  })
})

describe('a sqlite file on a full disk', () => {
  it('still starts and serves the tasks it holds, refusing new tasks and not ready, the log within its bound', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-sqlite-full-'))
    const { taskId, task, result, runningId } = await storedTasks(join(dir, 'gateway.db'))

    // A private 2 MiB file system (a mount namespace of its own), holding the file and its log, then filled to its
    // last byte. Not the shared-memory index (it is rebuilt from the log): with it, the log's own room would take
    // writes for a while, and without it the file cannot even be opened for writing.
    const mount = join(dir, 'disk')
    mkdirSync(mount)
    const database = join(mount, 'gateway.db')
    const source = join(dir, 'gateway.db')
    const fill = `mount -t tmpfs -o size=2m tmpfs ${mount} && cp ${source} ${source}-wal ${mount}/ && ` +
      `(dd if=/dev/zero of=${mount}/filler bs=4k 2>/dev/null; true) && exec "$@"`
    const { gateway, session } = await started(config(database), { launcher: ['unshare', '--user', '--map-root-user', '--mount', 'sh', '-c', fill, 'sh'] })

    const logged = JSON.parse(await loggedLine(gateway, 'The SQLite store takes no new work')) as Json
    expect(logged.detail).toMatch(/^the disk holding the SQLite file '.*gateway\.db' is full \(SQLITE_/)
    console.log(`started on a full disk: ${String(logged.detail)}`)
    expect(await readiness(gateway)).toEqual({ status: 503, detail: logged.detail })
    expect((await session.request('tasks/get', { taskId })).result).toEqual(task)
    expect((await session.request('tasks/result', { taskId })).result).toEqual(result.result)
    const refused = await createTask(session)
    expect(refused.error).toEqual({ code: -32603, message: `the store is unavailable: ${String(logged.detail)}`, data: { code: 'GW_ERR_STORE_UNAVAILABLE' } })
    // The task the killed process left running cannot be taken over (nothing can be written): it waits for the next start.
    await loggedLine(gateway, 'cannot be taken over while the store refuses writes')
    expect((await session.request('tasks/get', { taskId: runningId })).result).toMatchObject({ status: 'working' })
    // The process's own view of its file system (its mount namespace): the write-ahead log did not grow past its bound.
    const seen = `/proc/${gateway.child.pid}/root${database}`
    expect(statSync(seen).size).toBeGreaterThan(0)
    expect(statSync(`${seen}-wal`, { throwIfNoEntry: false })?.size ?? 0).toBeLessThanOrEqual(WAL_SIZE_LIMIT_BYTES)
  })
})
