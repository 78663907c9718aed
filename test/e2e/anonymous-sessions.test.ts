// With auth off, a 2025-era session is its own principal, `anonymous:<session id>`, and its Mcp-Session-Id is
// all it takes to use the session and its tasks. Neither the audit lines nor the admin API show the id: they
// show the fingerprint the logs use everywhere (`sha256:` and 12 hex digits of the id's SHA-256).
import { describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { logFingerprint } from '../../src/observability/logger.ts'
import { demoStdio, gatewayForSuite } from '../helpers/gateway.ts'
import { injectInitialize, postRpc } from '../helpers/inject.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const ADMIN = { authorization: 'Bearer admin-token-anonymous-0123' }

describe('a session without auth', () => {
  const gw = gatewayForSuite({
    upstreams: [demoStdio()],
    tasks: { pollInterval: '50ms' },
    admin: { port: 0, tokenSha256: sha256Hex('admin-token-anonymous-0123') },
  }, { listen: false })

  /** A task of demo__echo created and read to its end by a new session; its session id and task id. */
  async function finishedTask (): Promise<{ session: string, taskId: string }> {
    const initialized = await injectInitialize(gw.app, undefined)
    const session = String(initialized.headers['mcp-session-id'])
    const headers = { 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' }
    const created = await postRpc(gw.app, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'demo__echo', arguments: { text: 'hi' }, task: { ttl: 60_000 } } }, headers)
    const taskId = String(((created.body.result as Json).task as Json).taskId)
    await until('the task to complete', async () => {
      const got = await postRpc(gw.app, { jsonrpc: '2.0', id: 3, method: 'tasks/get', params: { taskId } }, headers)
      return (got.body.result as Json).status === 'completed' ? true : undefined
    })
    const result = await postRpc(gw.app, { jsonrpc: '2.0', id: 4, method: 'tasks/result', params: { taskId } }, headers)
    expect(JSON.stringify(result.body)).toContain('hi')
    return { session, taskId }
  }

  it('is named by its fingerprint in every audit line, never by its id', async () => {
    const { session, taskId } = await finishedTask()
    const audit = gw.logs().filter((line) => line.taskId === taskId && typeof line.audit === 'string')
    expect(audit.map((line) => line.audit)).toEqual(expect.arrayContaining(['task.created', 'task.finished', 'task.retrieved']))
    for (const line of audit) expect(line.principal).toBe(`anonymous:${logFingerprint(session)}`)
    expect(JSON.stringify(gw.logs())).not.toContain(session)
  })

  it('is named by its fingerprint in the admin API\'s task list, detail and cancel, never by its id', async () => {
    const { session, taskId } = await finishedTask()
    const admin = gw.gateway.admin!
    const list = await admin.inject({ method: 'GET', url: '/admin/tasks', headers: ADMIN })
    const detail = await admin.inject({ method: 'GET', url: `/admin/tasks/${taskId}`, headers: ADMIN })
    const cancel = await admin.inject({ method: 'POST', url: `/admin/tasks/${taskId}/cancel`, headers: ADMIN })
    for (const response of [list, detail, cancel]) expect(response.body).not.toContain(session)
    expect(list.json<{ tasks: Json[] }>().tasks.find((task) => task.id === taskId)).toMatchObject({ principal: `anonymous:${logFingerprint(session)}` })
    expect(detail.json<Json>()).toMatchObject({ id: taskId, principal: `anonymous:${logFingerprint(session)}`, sessionId: logFingerprint(session) })
    // The fingerprint cannot be searched for: a filter with it is refused, saying so, rather than finding nothing.
    const filtered = await admin.inject({ method: 'GET', url: `/admin/tasks?principal=anonymous:${logFingerprint(session)}`, headers: ADMIN })
    expect(filtered.statusCode).toBe(400)
    expect(filtered.json<{ error: Json }>().error.message).toContain('cannot be searched for')
  })
})
