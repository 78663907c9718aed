// The admin API: its own listener and token, upstreams, every principal's tasks, a task's detail, cancel, drain.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const ADMIN_TOKEN = 'admin-token-5f1e0c9a7b'
const ADMIN = { authorization: `Bearer ${ADMIN_TOKEN}` }
const ALICE = { authorization: 'Bearer alice-token-0123456789' }
const BOB = { authorization: 'Bearer bob-token-9876543210' }
const ELICIT = { elicitation: { form: {} } }

function adminOf (gw: RunningGateway): FastifyInstance {
  const admin = gw.gateway.admin
  if (admin === undefined) throw new Error('the admin API is not configured')
  return admin
}

async function adminGet (gw: RunningGateway, url: string, headers: Record<string, string> = ADMIN): Promise<LightMyRequestResponse> {
  return await adminOf(gw).inject({ method: 'GET', url, headers })
}

async function adminPost (gw: RunningGateway, url: string, headers: Record<string, string> = ADMIN): Promise<LightMyRequestResponse> {
  return await adminOf(gw).inject({ method: 'POST', url, headers })
}

/** Creates a task, then lets the clock pass its millisecond: the next task is strictly newer. */
async function startTask (client: ModernRaw, name: string, args: Json): Promise<string> {
  const handle = await client.result('tools/call', { name, arguments: args })
  if (handle.resultType !== 'task') throw new Error(`no task created: ${JSON.stringify(handle)}`)
  const created = Date.now()
  while (Date.now() === created) await new Promise((resolve) => setImmediate(resolve))
  return String(handle.taskId)
}

/** Asks the admin API for the task until its status is one of `statuses`. */
async function adminWaitFor (gw: RunningGateway, taskId: string, statuses: string[]): Promise<Json> {
  return await until(`task ${taskId} reaching ${statuses.join('/')}`, async () => {
    const task = (await adminGet(gw, `/admin/tasks/${taskId}`)).json<Json>()
    return statuses.includes(String(task.status)) ? task : undefined
  })
}

const ids = (response: LightMyRequestResponse): string[] => response.json<{ tasks: Json[] }>().tasks.map((t) => String(t.id))

describe('the admin API', () => {
  let gw: RunningGateway
  let alice: ModernRaw
  let bob: ModernRaw

  beforeAll(async () => {
    gw = await startGateway({
      upstreams: [demoStdio()],
      auth: { tokens: [{ principal: 'alice', sha256: sha256Hex('alice-token-0123456789') }, { principal: 'bob', sha256: sha256Hex('bob-token-9876543210') }] },
      tasks: { decide: 'always', pollInterval: '50ms' },
      server: { shutdownGrace: '100ms' },
      admin: { port: 0, tokenSha256: sha256Hex(ADMIN_TOKEN) },
    }, {}, { listen: false })
    alice = ModernRaw.withTasks(gw.app, ELICIT, ALICE)
    bob = ModernRaw.withTasks(gw.app, ELICIT, BOB)
  })

  afterAll(async () => {
    await gw?.close()
  })

  it('refuses every route without the admin token, with a wrong one and with a client token: 401 with a JSON error', async () => {
    const routes: Array<['GET' | 'POST', string]> = [['GET', '/admin/upstreams'], ['GET', '/admin/tasks'], ['GET', '/admin/tasks/abc'], ['POST', '/admin/tasks/abc/cancel'], ['POST', '/admin/drain'], ['GET', '/admin/events'], ['GET', '/admin/problems'], ['GET', '/admin/unknown']]
    for (const [method, url] of routes) {
      const missing = await adminOf(gw).inject({ method, url })
      expect({ url, status: missing.statusCode, body: missing.json<Json>() }).toMatchObject({ url, status: 401, body: { error: { code: 'GW_ERR_ADMIN_TOKEN_MISSING' } } })
      expect(missing.headers['www-authenticate']).toBe('Bearer realm="mcp-task-gateway-admin"')
      for (const authorization of ['Bearer wrong-token', ALICE.authorization, `Basic ${ADMIN_TOKEN}`, `Bearer ${ADMIN_TOKEN}x`]) {
        const wrong = await adminOf(gw).inject({ method, url, headers: { authorization } })
        expect({ url, authorization, status: wrong.statusCode, code: wrong.json<{ error: Json }>().error.code }).toEqual({ url, authorization, status: 401, code: 'GW_ERR_ADMIN_TOKEN_INVALID' })
      }
    }
    // Nothing was done: the refused drain left the gateway ready.
    expect((await gw.gateway.app.inject({ method: 'GET', url: '/readyz' })).json<Json>().status).toBe('ready')
  })

  it('is served on its own listener only: the MCP listener knows no admin route', async () => {
    const onMcp = await gw.gateway.app.inject({ method: 'GET', url: '/admin/upstreams', headers: ADMIN })
    expect(onMcp.statusCode).toBe(404)
    expect((await adminGet(gw, '/admin/upstreams')).statusCode).toBe(200)
  })

  it('lists the upstreams with their state, sessions, processes, load and era', async () => {
    const response = await adminGet(gw, '/admin/upstreams')
    expect(response.statusCode).toBe(200)
    const [demo] = response.json<{ upstreams: Json[] }>().upstreams
    expect(demo).toMatchObject({ name: 'demo', transport: 'stdio', state: 'ready', era: '2025-11-25', calls: { active: 0, waiting: 0 } })
    expect(demo!.sessions).toEqual(expect.any(Number))
    // The gateway's own session is one process, and every client session one more.
    expect(demo!.processes).toBe(Number(demo!.sessions) + 1)
  })

  it('lists the tasks of every principal, filtered by principal, status, upstream and tool, newest first, in pages', async () => {
    const aliceSlow = await startTask(alice, 'demo__slow', { duration: 60_000, steps: 1 })
    const aliceAsk = await startTask(alice, 'demo__ask_user', { message: 'Colour?' })
    const bobSlow = await startTask(bob, 'demo__slow', { duration: 60_000, steps: 1 })
    await adminWaitFor(gw, aliceAsk, ['input_required'])

    const all = await adminGet(gw, '/admin/tasks')
    expect(all.statusCode).toBe(200)
    expect(ids(all)).toEqual([bobSlow, aliceAsk, aliceSlow])
    expect(all.json<{ tasks: Json[] }>().tasks[0]).toMatchObject({ id: bobSlow, principal: 'bob', status: 'working', upstream: 'demo', tool: 'slow', owner: gw.gateway.processId, resultBytes: null })
    expect(ids(await adminGet(gw, '/admin/tasks?principal=alice'))).toEqual([aliceAsk, aliceSlow])
    expect(ids(await adminGet(gw, '/admin/tasks?principal=bob'))).toEqual([bobSlow])
    expect(ids(await adminGet(gw, '/admin/tasks?status=input_required'))).toEqual([aliceAsk])
    expect(ids(await adminGet(gw, '/admin/tasks?status=working&principal=alice'))).toEqual([aliceSlow])
    expect(ids(await adminGet(gw, '/admin/tasks?tool=slow'))).toEqual([bobSlow, aliceSlow])
    expect(ids(await adminGet(gw, '/admin/tasks?upstream=demo&tool=ask_user'))).toEqual([aliceAsk])
    expect(ids(await adminGet(gw, '/admin/tasks?upstream=other'))).toEqual([])

    const first = (await adminGet(gw, '/admin/tasks?limit=2')).json<{ tasks: Json[], nextCursor?: string }>()
    expect(first.tasks.map((t) => t.id)).toEqual([bobSlow, aliceAsk])
    const second = (await adminGet(gw, `/admin/tasks?limit=2&cursor=${first.nextCursor}`)).json<{ tasks: Json[], nextCursor?: string }>()
    expect(second.tasks.map((t) => t.id)).toEqual([aliceSlow])
    expect(second.nextCursor).toBeUndefined()

    const bad = await adminGet(gw, '/admin/tasks?status=running')
    expect(bad.statusCode).toBe(400)
    expect(bad.json<{ error: Json }>().error).toMatchObject({ code: 'GW_ERR_ADMIN_BAD_REQUEST' })
    expect(String(bad.json<{ error: Json }>().error.message)).toContain('status')
    expect((await adminGet(gw, '/admin/tasks?limit=0')).statusCode).toBe(400)
    expect((await adminGet(gw, '/admin/tasks?cursor=not-a-cursor')).statusCode).toBe(400)
  })

  it('shows a task with its input requests, before and after it ends, and cancels a running task as its principal sees it', async () => {
    const ask = await startTask(alice, 'demo__ask_user', { message: 'Favourite colour?' })
    const detail = await adminWaitFor(gw, ask, ['input_required'])
    expect(detail).toMatchObject({ id: ask, principal: 'alice', status: 'input_required', tool: 'ask_user', owner: gw.gateway.processId })
    expect(detail.inputs).toEqual([expect.objectContaining({ method: 'elicitation/create', state: 'pending', params: expect.objectContaining({ message: 'Favourite colour?' }) })])

    // Cancelled, the task keeps its input request in its detail, no longer pending.
    expect((await adminPost(gw, `/admin/tasks/${ask}/cancel`)).statusCode).toBe(200)
    const ended = (await adminGet(gw, `/admin/tasks/${ask}`)).json<Json>()
    expect(ended).toMatchObject({ status: 'cancelled', statusMessage: 'cancelled by the operator' })
    expect(ended.inputs).toEqual([expect.objectContaining({ method: 'elicitation/create', state: 'expired', answer: null })])

    const unknown = await adminGet(gw, '/admin/tasks/no-such-task')
    expect(unknown.statusCode).toBe(404)
    expect(unknown.json<{ error: Json }>().error).toMatchObject({ code: 'GW_ERR_ADMIN_TASK_NOT_FOUND' })

    const slow = await startTask(bob, 'demo__slow', { duration: 60_000, steps: 1 })
    const cancelled = await adminPost(gw, `/admin/tasks/${slow}/cancel`)
    expect(cancelled.statusCode).toBe(200)
    expect(cancelled.json<Json>()).toMatchObject({ id: slow, principal: 'bob', status: 'cancelled' })
    const seen = await bob.result('tasks/get', { taskId: slow })
    expect(seen).toMatchObject({ taskId: slow, status: 'cancelled' })
    const again = await adminPost(gw, `/admin/tasks/${slow}/cancel`)
    expect(again.statusCode).toBe(409)
    expect(again.json<{ error: Json }>().error).toMatchObject({ code: 'GW_ERR_ADMIN_TASK_TERMINAL' })
    expect((await adminPost(gw, '/admin/tasks/no-such-task/cancel')).statusCode).toBe(404)
  })

  it('gives a task\'s timeline: created, each status move with its statusMessage and process, the input round and its answer, the result size', async () => {
    const ask = await startTask(alice, 'demo__ask_user', { message: 'Timeline colour?' })
    const waiting = await alice.waitFor(ask, ['input_required'])
    const [key] = Object.keys(waiting.inputRequests as Json)
    await alice.result('tasks/update', { taskId: ask, inputResponses: { [key!]: { action: 'accept', content: { name: 'Teal' } } } })
    const done = await adminWaitFor(gw, ask, ['completed'])

    const me = gw.gateway.processId
    expect(done.timeline).toEqual([
      { type: 'created', at: done.createdAt, process: me },
      { type: 'input', at: expect.any(String), key, method: 'elicitation/create' },
      { type: 'status', at: expect.any(String), status: 'input_required', statusMessage: 'waiting for the user to answer an elicitation request: Timeline colour?', process: me },
      { type: 'input_settled', at: expect.any(String), key, state: 'answered' },
      { type: 'status', at: expect.any(String), status: 'working', statusMessage: null, process: me },
      { type: 'status', at: done.lastUpdatedAt, status: 'completed', statusMessage: null, process: me, resultBytes: done.resultBytes },
    ])
    expect(done.resultBytes).toBeGreaterThan(0)
    // In order, and no entry is later than the task's last update.
    const times = (done.timeline as Json[]).map((entry) => Date.parse(String(entry.at)))
    expect(times).toEqual([...times].sort((a, b) => a - b))
    expect(done.inputs).toEqual([expect.objectContaining({ key, state: 'answered', answer: { result: { action: 'accept', content: { name: 'Teal' } } } })])
  })

  // Last: the gateway takes no new MCP requests afterwards.
  it('drains the process: /readyz says draining and new MCP requests get 503', async () => {
    const drained = await adminPost(gw, '/admin/drain')
    expect(drained.statusCode).toBe(200)
    expect(drained.json<Json>()).toEqual({ status: 'draining' })
    const ready = await gw.gateway.app.inject({ method: 'GET', url: '/readyz' })
    expect({ status: ready.statusCode, body: ready.json<Json>().status }).toEqual({ status: 503, body: 'draining' })
    const refused = await alice.request('tools/list')
    expect(refused.status).toBe(503)
  })
})

describe('the admin API, not configured', () => {
  it('has no listener and no routes', async () => {
    const gw = await startGateway({ upstreams: [demoStdio()] }, {}, { listen: false })
    try {
      expect(gw.gateway.admin).toBeUndefined()
      expect((await gw.gateway.app.inject({ method: 'GET', url: '/admin/upstreams' })).statusCode).toBe(404)
    } finally {
      await gw.close()
    }
  })
})
