// A task on an upstream reached by OAuth token exchange outlives its gateway process: the process is killed with
// SIGKILL while the call runs upstream; the next one on the same SQLite file runs the (idempotent) tool again for
// the task's principal without its caller (nobody has sent it the caller's token), from the grant the first process
// sealed into the store; the upstream, which takes only tokens made for it, sees the same principal both times.
// Neither the caller's token nor any token the authorization server issued is in the database.
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CALLER_ISSUER, CLIENTS, GATEWAY_RESOURCE, OAuthServer } from '../helpers/oauth-server.ts'
import { OAuthUpstream } from '../helpers/oauth-upstream.ts'
import { startGatewayProcess, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { legacyTask, RawSession } from '../helpers/raw-session.ts'
import { STATE_SECRET } from '../helpers/redis.ts'
import { expectCompleted } from '../helpers/resume.ts'
import { until } from '../helpers/until.ts'

const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange'

describe('token exchange credentials of a task run again after kill -9', () => {
  const as = new OAuthServer()
  let upstream: OAuthUpstream
  let dir: string
  const processes: GatewayProcess[] = []

  beforeAll(async () => {
    await as.start()
    as.issueRefreshTokens = true
    upstream = new OAuthUpstream({ issuer: as.issuer, jwksUri: as.jwksUri, metadataAt: 'hidden' })
    await upstream.start()
    as.resources.push(upstream.url)
    dir = await mkdtemp(join(tmpdir(), 'gw-oauth-restart-'))
  })

  afterAll(async () => {
    upstream?.release()
    await stopAll(processes)
    await upstream?.stop()
    await as.stop()
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  })

  it('reaches the upstream as the task\'s principal from the next process, with a token renewed from the sealed grant', { timeout: 120_000 }, async () => {
    const secretFile = join(dir, 'client-secret')
    await writeFile(secretFile, `${as.secret}\n`)
    await chmod(secretFile, 0o600)
    const database = join(dir, 'gateway.db')
    const file = writeConfig(`
server: { stateSecret: ${JSON.stringify(STATE_SECRET)} }
store: { kind: sqlite, path: ${JSON.stringify(database)} }
tasks: { pollInterval: 50ms }
auth:
  oauth:
    issuer: ${JSON.stringify(CALLER_ISSUER)}
    jwksUri: ${JSON.stringify(as.callerJwksUri)}
    resource: ${JSON.stringify(GATEWAY_RESOURCE)}
upstreams:
  - name: personal
    transport: streamable-http
    url: ${JSON.stringify(upstream.url)}
    credentials:
      kind: oauth
      grant: token_exchange
      clientId: ${CLIENTS.basic}
      clientSecretFile: ${JSON.stringify(secretFile)}
    resume: off
    toolSettings: { hold: { idempotent: true } }
`)
    const callerToken = await as.callerToken('alice')
    const first = await startGatewayProcess(file)
    processes.push(first)
    const session = await RawSession.open(first.url, {}, { authorization: `Bearer ${callerToken}` })
    const taskId = await legacyTask(session, 'personal__hold')
    await until('the first process\'s call reached the upstream', () => upstream.held.length === 1 ? true : undefined)
    const exchanges = as.clientGrants.filter((g) => g.grant === EXCHANGE).length
    first.child.kill('SIGKILL')
    await first.exited

    const refreshes = as.clientGrants.filter((g) => g.grant === 'refresh_token').length
    const second = await startGatewayProcess(file)
    processes.push(second)
    await until('the next process ran the task again', () => upstream.held.length === 2 ? true : undefined, { timeoutMs: 60_000 })
    expect(upstream.held).toEqual(['alice', 'alice'])
    // Renewed from the stored grant (one refresh), not exchanged again: the second process never saw alice's token.
    expect(as.clientGrants.filter((g) => g.grant === EXCHANGE).length).toBe(exchanges)
    expect(as.clientGrants.filter((g) => g.grant === 'refresh_token').length).toBe(refreshes + 1)
    upstream.release()
    await expectCompleted(session.on(second.url), [taskId], () => 'alice')
    // The store holds a sealed grant, never a token in clear.
    const stored = Buffer.concat(await Promise.all([database, `${database}-wal`].map(async (part) => await readFile(part).catch(() => Buffer.alloc(0)))))
    expect(stored.includes(Buffer.from(callerToken))).toBe(false)
    expect(stored.toString('latin1')).not.toMatch(/eyJ[\w-]+\.[\w-]+\./)
  })
})
