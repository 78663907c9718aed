// A task of a principal on an upstream with per-principal keys outlives its gateway process: the process is
// killed with SIGKILL while the call runs, the next one on the same SQLite file runs the (idempotent) tool again,
// and the upstream gets that principal's key again, not the gateway's own and not none. The principal is stored
// with the task; its key is read from the key file by the new process, never from the store.
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { startApiKeyUpstream, type ApiKeyUpstream } from '../fixtures/api-key-upstream.ts'
import { startGatewayProcess, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { legacyTask, RawSession } from '../helpers/raw-session.ts'
import { expectCompleted } from '../helpers/resume.ts'
import { until } from '../helpers/until.ts'

const TOKEN = 'alice-token-for-the-restart-test'
const KEYS = { gateway: 'gw-key-restart-91ab', alice: 'alice-key-restart-4c2d' }

describe('per-principal credentials of a task run again after kill -9', () => {
  let dir: string
  let crm: ApiKeyUpstream
  const processes: GatewayProcess[] = []

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gw-credentials-restart-'))
    crm = await startApiKeyUpstream('x-api-key', undefined, [KEYS.gateway, KEYS.alice])
  })

  afterAll(async () => {
    crm?.release()
    await stopAll(processes)
    await crm?.close()
    await rm(dir, { recursive: true, force: true })
  })

  it('reaches the upstream with the principal\'s key from the next process', { timeout: 120_000 }, async () => {
    const keyFile = join(dir, 'keys.yaml')
    await writeFile(keyFile, `alice: ${KEYS.alice}\n`)
    await chmod(keyFile, 0o600)
    const database = join(dir, 'gateway.db')
    const file = writeConfig(`
store: { kind: sqlite, path: ${JSON.stringify(database)} }
tasks: { pollInterval: 50ms }
auth:
  tokens: [{ principal: alice, sha256: ${sha256Hex(TOKEN)} }]
upstreams:
  - name: crm
    transport: streamable-http
    url: ${JSON.stringify(crm.url)}
    headers: { X-Api-Key: ${KEYS.gateway} }
    credentials: { kind: per-principal, header: x-api-key, file: ${JSON.stringify(keyFile)} }
    resume: off
    toolSettings: { hold: { idempotent: true } }
`)
    const first = await startGatewayProcess(file)
    processes.push(first)
    const session = await RawSession.open(first.url, {}, { authorization: `Bearer ${TOKEN}` })
    const taskId = await legacyTask(session, 'crm__hold')
    await until('the first process\'s call reached the upstream', () => crm.held.length === 1 ? true : undefined)
    first.child.kill('SIGKILL')
    await first.exited

    const second = await startGatewayProcess(file)
    processes.push(second)
    await until('the next process ran the task again', () => crm.held.length === 2 ? true : undefined, { timeoutMs: 60_000 })
    expect(crm.held).toEqual([KEYS.alice, KEYS.alice])
    crm.release()
    await expectCompleted(session.on(second.url), [taskId], () => 'released')
    // The store holds the principal, never the key.
    for (const part of [database, `${database}-wal`]) {
      const bytes = await readFile(part).catch(() => Buffer.alloc(0))
      expect(bytes.includes(Buffer.from(KEYS.alice))).toBe(false)
    }
  })
})
