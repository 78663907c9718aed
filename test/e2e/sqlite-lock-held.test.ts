import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { demoStdioYaml, startGatewayProcess, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { RawSession } from '../helpers/raw-session.ts'
import { REPO_ROOT } from '../fixtures/spawn-upstream.ts'

type Json = Record<string, unknown>
const TOKEN = 'sqlite-lock-test-token'

/** Another process holding the file's write lock (as a `sqlite3` shell in `BEGIN IMMEDIATE` does) until told to let go. */
const HOLDER = `
const Database = require('better-sqlite3')
const db = new Database(process.argv[1])
db.pragma('busy_timeout = 10000')
db.exec('BEGIN IMMEDIATE')
console.log('held')
process.stdin.once('data', () => { db.exec('ROLLBACK'); db.close(); console.log('released'); process.exit(0) })
`

class LockHolder {
  readonly #child: ChildProcess
  readonly #lines: AsyncIterator<string>

  private constructor (child: ChildProcess) {
    this.#child = child
    this.#lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]()
  }

  static async hold (database: string): Promise<LockHolder> {
    const holder = new LockHolder(spawn(process.execPath, ['-e', HOLDER, database], { cwd: REPO_ROOT, stdio: ['pipe', 'pipe', 'inherit'] }))
    expect((await holder.#lines.next()).value).toBe('held')
    return holder
  }

  async release (): Promise<void> {
    const exited = once(this.#child, 'exit')
    this.#child.stdin!.write('go\n')
    expect((await this.#lines.next()).value).toBe('released')
    await exited
  }
}

const gateways: GatewayProcess[] = []
afterAll(async () => { await stopAll(gateways) })

interface Started { gateway: GatewayProcess, database: string, session: RawSession }

async function start (busyWait = '5s'): Promise<Started> {
  const database = join(mkdtempSync(join(tmpdir(), 'gw-sqlite-lock-')), 'gateway.db')
  const gateway = await startGatewayProcess(writeConfig(`
store: { kind: sqlite, path: ${JSON.stringify(database)}, busyWait: ${busyWait} }
logging: { level: info }
auth:
  tokens: [{ principal: ops, sha256: ${sha256Hex(TOKEN)} }]
upstreams:
${demoStdioYaml()}
`))
  gateways.push(gateway)
  const session = await RawSession.open(gateway.url, {}, { authorization: `Bearer ${TOKEN}` })
  return { gateway, database, session }
}

async function createTask (session: RawSession): Promise<Json> {
  return await session.request('tools/call', { name: 'demo__slow', arguments: { duration: 10, steps: 1 }, task: { ttl: 600_000 } })
}

/** The status /healthz answers. */
async function healthz (gateway: GatewayProcess): Promise<number> {
  const res = await fetch(new URL('/healthz', gateway.url))
  await res.text()
  return res.status
}

describe('another process holding the sqlite file\'s write lock', () => {
  // Each case has a gateway on a file of its own; both start at once (a start is seconds on a busy machine). The
  // first waits up to 5 s for the lock (room for its probes under load); the second is refused after 1 s.
  let opened: [Started, Started]
  beforeAll(async () => { opened = await Promise.all([start('5s'), start('1s')]) })

  it('leaves the gateway answering; a task created meanwhile is stored once the lock is released', async () => {
    const { gateway, database, session } = opened[0]
    const holder = await LockHolder.hold(database)
    let settled = false
    const creating = createTask(session).finally(() => { settled = true })
    // Probes answered while the creation still waits on the lock: an order of events, not a clock. Before, each
    // write of the process froze it for busy_timeout (5 s), so no probe could be answered before the creation was.
    // Sent at once (the creation is refused after 5 s of waiting, which a loaded machine must not reach first).
    expect(await Promise.all([0, 1, 2].map(async () => await healthz(gateway)))).toEqual([200, 200, 200])
    expect(settled).toBe(false)
    await holder.release()

    const created = await creating
    const taskId = ((created.result as Json | undefined)?.task as Json | undefined)?.taskId
    expect(typeof taskId).toBe('string')
    expect((await session.waitFor(taskId as string, ['completed', 'failed'])).status).toBe('completed')
  })

  it('refuses a task with a clear error once the lock has been held past the bound, and is not ready until it is released', async () => {
    const { gateway, database, session } = opened[1]
    const holder = await LockHolder.hold(database)
    const refused = await createTask(session)
    expect(refused.error).toMatchObject({ code: -32603 })
    expect((refused.error as Json).message).toMatch(/^the store is unavailable: another process has held the write lock of the SQLite file '.*gateway\.db' for 1000 ms \(SQLITE_BUSY\)/)
    const notReady = await fetch(new URL('/readyz', gateway.url))
    expect(notReady.status).toBe(503)
    expect(((await notReady.json()) as { store: Json }).store.detail).toMatch(/another process holds the write lock of the file \(SQLITE_BUSY\)/)
    await holder.release()

    const created = await createTask(session)
    expect(created.error).toBeUndefined()
    const ready = await fetch(new URL('/readyz', gateway.url))
    await ready.text()
    expect(ready.status).toBe(200)
  })
})
