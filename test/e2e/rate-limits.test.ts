import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import type { FastifyInstance } from 'fastify'
import { fetch } from 'undici'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { DEMO_MAIN } from '../helpers/built.ts'
import { startCluster } from '../helpers/cluster.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { postRpc } from '../helpers/inject.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { RawSession } from '../helpers/raw-session.ts'
import { purge, REDIS_URL, STATE_SECRET } from '../helpers/redis.ts'
import { readSse } from '../helpers/sse.ts'
import { TcpProxy } from '../helpers/tcp-proxy.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const TOKENS = { alice: 'alice-rate-limit-token-0001', bob: 'bob-rate-limit-token-0002' }
const AUTH = { tokens: Object.entries(TOKENS).map(([principal, token]) => ({ principal, sha256: sha256Hex(token) })) }
const bearer = (who: keyof typeof TOKENS): Record<string, string> => ({ authorization: `Bearer ${TOKENS[who]}` })

interface Reply {
  status: number
  retryAfter: string | null
  body: Json
}

/** Where a request goes: a gateway's app (through inject(), no socket) or a URL (a cluster's balancer). */
type Target = string | FastifyInstance

let nextId = 1

/** POSTs one JSON-RPC message; reads a JSON answer, or an SSE answer up to the message with the request's id. */
async function post (target: Target, message: Json, headers: Record<string, string> = {}): Promise<Reply> {
  if (typeof target !== 'string') {
    const reply = await postRpc(target, message, headers)
    const retryAfter = reply.headers['retry-after']
    return { status: reply.status, retryAfter: retryAfter === undefined ? null : String(retryAfter), body: reply.body }
  }
  const res = await fetch(target, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(message),
  })
  const retryAfter = res.headers.get('retry-after')
  if (!(res.headers.get('content-type') ?? '').includes('text/event-stream')) return { status: res.status, retryAfter, body: await res.json() as Json }
  for await (const event of readSse(res.body as ReadableStream<Uint8Array>)) {
    if (event.data === '') continue
    const parsed = JSON.parse(event.data) as Json
    if (parsed.id === message.id) return { status: res.status, retryAfter, body: parsed }
  }
  throw new Error(`no answer to ${String(message.method)}`)
}

/** A 2026-07-28 request (stateless: no session) with its envelope and routing headers. */
async function modern (target: Target, method: string, params: Json = {}, headers: Record<string, string> = {}): Promise<Reply> {
  const envelope = ModernRaw.withTasks('').envelope(params)
  return await post(target, { jsonrpc: '2.0', id: nextId++, method, params: envelope }, { 'mcp-protocol-version': '2026-07-28', 'mcp-method': method, ...headers })
}

/** Asserts a 429 answering the request with `id`; returns its Retry-After in seconds. */
function expectLimited (reply: Reply, option: string, id?: unknown): number {
  expect(reply.status).toBe(429)
  expect(reply.body).toMatchObject({ jsonrpc: '2.0', error: { code: -32056, message: expect.stringContaining(option) } })
  if (id !== undefined) expect(reply.body.id).toBe(id)
  const seconds = Number(reply.retryAfter)
  expect(Number.isInteger(seconds) && seconds >= 1).toBe(true)
  return seconds
}

/** The ids of tasks that run long enough for a test (their gateway's shutdownGrace cancels them). */
async function modernTasks (url: string, headers: Record<string, string>, count: number): Promise<string[]> {
  const client = ModernRaw.withTasks(url, {}, headers)
  return await Promise.all(Array.from({ length: count }, async () => String((await client.result('tools/call', { name: 'demo__slow', arguments: { duration: 30_000, steps: 1 } })).taskId)))
}

describe('rate limits', () => {
  let demo: StartedUpstream
  const gateways: RunningGateway[] = []

  /**
   * An in-process gateway on the shared demo upstream (over HTTP: no process per gateway); `listen: false` for
   * tests that send every request through inject().
   */
  async function gateway (raw: Json, listen = true): Promise<RunningGateway> {
    const gw = await startGateway({
      ...raw,
      server: { shutdownGrace: '100ms', ...raw.server as Json | undefined },
      tasks: { decide: 'always', ...raw.tasks as Json | undefined },
      upstreams: [{ name: 'demo', transport: 'streamable-http', url: demo.url }],
    }, {}, { listen })
    gateways.push(gw)
    return gw
  }

  beforeAll(async () => {
    demo = await startUpstream(DEMO_MAIN, ['--http', '0'])
  })

  afterAll(async () => {
    await Promise.all(gateways.map(async (gw) => await gw.close()))
    await demo?.close()
  })

  it('requestsPerIp: refuses requests past the burst before authentication, with Retry-After, and lets them through again after it', async () => {
    // The in-process buckets read Date.now: frozen, no token comes back however slowly a loaded machine sends
    // the requests, and the Retry-After is passed by moving the clock instead of waiting a second.
    vi.useFakeTimers({ toFake: ['Date'] })
    try {
      const gw = await gateway({ auth: AUTH, limits: { requestsPerIp: { rate: 1, burst: 3 } } }, false)
      for (let i = 0; i < 3; i++) expect((await modern(gw.app, 'tools/list', {}, bearer('alice'))).status).toBe(200)
      const id = nextId
      const refused = await modern(gw.app, 'tools/list', {}, bearer('alice'))
      const seconds = expectLimited(refused, 'limits.requestsPerIp', id)
      expect(seconds).toBe(1)
      // Counted before authentication: a request with no token is refused as well, not asked to authenticate.
      expectLimited(await modern(gw.app, 'tools/list'), 'limits.requestsPerIp')
      vi.setSystemTime(Date.now() + seconds * 1000 - 1)
      expectLimited(await modern(gw.app, 'tools/list', {}, bearer('alice')), 'limits.requestsPerIp')
      vi.setSystemTime(Date.now() + 1)
      expect((await modern(gw.app, 'tools/list', {}, bearer('alice'))).status).toBe(200)
    } finally {
      vi.useRealTimers()
    }
  })

  it('requestsPerPrincipal: one principal out of tokens leaves another unaffected', async () => {
    const gw = await gateway({ auth: AUTH, limits: { requestsPerPrincipal: { rate: 0.05, burst: 4 } } }, false)
    for (let i = 0; i < 4; i++) expect((await modern(gw.app, 'tools/list', {}, bearer('alice'))).status).toBe(200)
    const id = nextId
    const seconds = expectLimited(await modern(gw.app, 'tools/list', {}, bearer('alice')), 'limits.requestsPerPrincipal', id)
    expect(seconds).toBeLessThanOrEqual(20)
    for (let i = 0; i < 4; i++) expect((await modern(gw.app, 'tools/list', {}, bearer('bob'))).status).toBe(200)
    // Counted after authentication: a request nobody authenticated is not counted, it is refused as such.
    expect((await modern(gw.app, 'tools/list')).status).toBe(401)
  })

  it('taskOpsPerPrincipal: task creation and tasks/* share one bucket (per address with auth off); other requests are not counted', async () => {
    const gw = await gateway({ limits: { taskOpsPerPrincipal: { rate: 0.05, burst: 3 } } })
    const session = await RawSession.open(gw.url, {})
    const create = async (): Promise<Reply> => await post(gw.app, { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name: 'demo__echo', arguments: { text: 'x' }, task: {} } }, { 'mcp-session-id': session.sessionId })
    const created = [await create(), await create()]
    for (const reply of created) expect(reply.body).toMatchObject({ result: { task: { taskId: expect.any(String) } } })
    const taskId = String(((created[0]!.body.result as Json).task as Json).taskId)
    expect((await session.request('tasks/get', { taskId })).result).toMatchObject({ taskId })
    const id = nextId
    expectLimited(await create(), 'limits.taskOpsPerPrincipal', id)
    expectLimited(await post(gw.app, { jsonrpc: '2.0', id: nextId++, method: 'tasks/list', params: {} }, { 'mcp-session-id': session.sessionId }), 'limits.taskOpsPerPrincipal')
    // The 2026-07-28 era's tasks/* count against the same address.
    expectLimited(await modern(gw.app, 'tasks/get', { taskId }), 'limits.taskOpsPerPrincipal')
    expect((await session.request('tools/call', { name: 'demo__echo', arguments: { text: 'no task' } })).result).toMatchObject({ content: [{ text: 'no task' }] })
    expect((await session.request('tools/list')).result).toMatchObject({ tools: expect.any(Array) })
  })

  it('pollBurst: polling one task too fast is refused while another task (and another principal) can still be polled', async () => {
    const gw = await gateway({ auth: AUTH, tasks: { pollInterval: '5s' }, limits: { pollBurst: 2 } })
    const [first, second] = await modernTasks(gw.url, bearer('alice'), 2)
    const poll = async (taskId: string, who: keyof typeof TOKENS = 'alice'): Promise<Reply> => await modern(gw.app, 'tasks/get', { taskId }, { ...bearer(who), 'mcp-name': taskId })
    for (let i = 0; i < 2; i++) expect((await poll(first!)).body).toMatchObject({ result: { taskId: first, status: 'working' } })
    const id = nextId
    const refused = await poll(first!)
    expect(refused.status).toBe(429)
    expect(refused.body).toMatchObject({ id, error: { code: -32056, message: expect.stringContaining(`task '${first}' is polled faster than every 5000 ms`) } })
    expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1)
    expect(Number(refused.retryAfter)).toBeLessThanOrEqual(5)
    expect((await poll(second!)).body).toMatchObject({ result: { taskId: second } })
    // Bob's polls of the same id are his own (and the task is not his).
    expect((await poll(first!, 'bob')).status).toBe(200)

    // The legacy era's tasks/get is held to the same interval.
    const session = await RawSession.open(gw.url, {}, bearer('alice'))
    const legacy = String(((await session.request('tools/call', { name: 'demo__slow', arguments: { duration: 30_000, steps: 1 }, task: {} })).result as Json & { task: Json }).task.taskId)
    const legacyPoll = async (): Promise<Reply> => await post(gw.app, { jsonrpc: '2.0', id: nextId++, method: 'tasks/get', params: { taskId: legacy } }, { ...bearer('alice'), 'mcp-session-id': session.sessionId })
    for (let i = 0; i < 2; i++) expect((await legacyPoll()).status).toBe(200)
    expect((await legacyPoll()).body).toMatchObject({ error: { code: -32056, message: expect.stringContaining(legacy) } })
  })

  it('limits off (the default): nothing is limited', async () => {
    const gw = await gateway({ auth: AUTH, tasks: { pollInterval: '5s' } })
    const replies = await Promise.all(Array.from({ length: 200 }, async () => await modern(gw.app, 'tools/list', {}, bearer('alice'))))
    expect(replies.map((r) => r.status)).toEqual(replies.map(() => 200))
    const [taskId] = await modernTasks(gw.url, bearer('alice'), 1)
    for (let i = 0; i < 30; i++) expect((await modern(gw.app, 'tasks/get', { taskId }, { ...bearer('alice'), 'mcp-name': taskId! })).status).toBe(200)
  })

  describe('on Redis', () => {
    let redis: Redis
    beforeAll(() => { redis = new Redis(REDIS_URL) })
    afterAll(async () => { await redis?.quit() })

    it('keeps buckets as keys under the prefix that expire once refilled', async () => {
      const prefix = `mcpgw-rate:${randomUUID()}:`
      const gw = await gateway({ store: { kind: 'redis', url: REDIS_URL, prefix }, server: { stateSecret: STATE_SECRET }, limits: { requestsPerIp: { rate: 5, burst: 2 } } }, false)
      try {
        const statuses = []
        for (let i = 0; i < 3; i++) statuses.push((await modern(gw.app, 'tools/list')).status)
        expect(statuses).toEqual([200, 200, 429])
        const keys = await redis.keys(`${prefix}rate:*`)
        expect(keys).toEqual([expect.stringMatching(new RegExp(`^${prefix}rate:ip:[\\w-]{22}$`))])
        // The key lives as long as the bucket takes to fill up again: 2 tokens at 5 per second at most.
        const ttl = await redis.pttl(keys[0]!)
        expect(ttl).toBeGreaterThan(0)
        expect(ttl).toBeLessThanOrEqual(400)
        await until('the bucket key to expire', async () => (await redis.keys(`${prefix}rate:*`)).length === 0 || undefined, { everyMs: ttl })
      } finally {
        await gw.close()
        await purge(prefix)
      }
    })

    it('fails open while Redis is unreachable and limits again once it is back', async () => {
      const prefix = `mcpgw-rate:${randomUUID()}:`
      const proxy = await TcpProxy.start(REDIS_URL)
      const gw = await gateway({ store: { kind: 'redis', url: proxy.url, prefix }, server: { stateSecret: STATE_SECRET }, limits: { requestsPerIp: { rate: 0.01, burst: 1 } } }, false)
      try {
        expect((await modern(gw.app, 'tools/list')).status).toBe(200)
        expectLimited(await modern(gw.app, 'tools/list'), 'limits.requestsPerIp')
        await proxy.cut('refuse')
        // tools/list needs no store: with the buckets out of reach it goes through.
        expect((await modern(gw.app, 'tools/list')).status).toBe(200)
        expect(gw.logs().filter((l) => l.msg === 'rate limits not enforced: the store is unavailable')).toHaveLength(1)
        await proxy.restore()
        await until('the limit to apply again', async () => (await modern(gw.app, 'tools/list')).status === 429 || undefined, { everyMs: 50 })
      } finally {
        await proxy.restore()
        await gw.close()
        await proxy.close()
        await purge(prefix)
      }
    })

    it('shares the buckets between gateway processes on one Redis: half the burst taken on each', async () => {
      const cluster = await startCluster(`limits: { requestsPerIp: { rate: 0.05, burst: 4 } }
upstreams:
  - { name: demo, transport: streamable-http, url: ${JSON.stringify(demo.url)} }
`, { count: 2 })
      try {
        for (let i = 0; i < 4; i++) expect((await modern(cluster.url, 'tools/list')).status).toBe(200)
        expect([...cluster.balancer.served.values()]).toEqual([2, 2])
        expectLimited(await modern(cluster.url, 'tools/list'), 'limits.requestsPerIp')
        expectLimited(await modern(cluster.url, 'tools/list'), 'limits.requestsPerIp')
        expect([...cluster.balancer.served.values()]).toEqual([3, 3])
      } finally {
        await cluster.close()
      }
    }, 60_000)
  })
})
