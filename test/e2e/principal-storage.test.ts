import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { MCP_POST_HEADERS, sseMessages } from '../helpers/inject.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { RawSession } from '../helpers/raw-session.ts'

type Json = Record<string, unknown>

const TOKENS = { hog: 'storage-hog-token-000000001', other: 'storage-other-token-0000002' }
const AUTH = { tokens: Object.entries(TOKENS).map(([principal, token]) => ({ principal, sha256: sha256Hex(token) })) }
const bearer = (who: keyof typeof TOKENS): Record<string, string> => ({ authorization: `Bearer ${TOKENS[who]}` })

/** 60 000 characters of arguments: each task stores about 60 kB (its request while it runs, its echoed result after). */
const LARGE = 'x'.repeat(60_000)

let nextId = 1

interface Reply {
  status: number
  sessionId: string | undefined
  body: Json
}

/** POSTs one JSON-RPC message through inject() from `address`; the JSON-RPC answer (JSON or SSE) and the status and session. */
async function post (app: FastifyInstance, address: string, message: Json, headers: Record<string, string> = {}): Promise<Reply> {
  const res = await app.inject({
    method: 'POST', url: '/mcp', remoteAddress: address, headers: { ...MCP_POST_HEADERS, ...headers }, payload: JSON.stringify(message),
  })
  const sse = String(res.headers['content-type'] ?? '').includes('text/event-stream')
  const body = sse ? sseMessages(res.body).find((m) => m.id === message.id) ?? {} : res.body === '' ? {} : res.json<Json>()
  const sessionId = res.headers['mcp-session-id']
  return { status: res.statusCode, sessionId: typeof sessionId === 'string' ? sessionId : undefined, body }
}

async function initialize (app: FastifyInstance, address: string, params: Json = {}, headers: Record<string, string> = {}) {
  return await post(app, address, {
    jsonrpc: '2.0',
    id: nextId++,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'storage-test', version: '1' }, ...params },
  }, headers)
}

describe('each principal stores at most limits.storedBytesPerPrincipal', () => {
  let gw: RunningGateway

  beforeAll(async () => {
    gw = await startGateway({ upstreams: [demoStdio()], auth: AUTH, limits: { storedBytesPerPrincipal: '256kb' } })
  })

  afterAll(async () => {
    await gw.close()
  })

  it('refuses one principal\'s large-argument tasks once its budget is spent, while another principal still creates and completes tasks', async () => {
    const hog = await RawSession.open(gw.url, {}, bearer('hog'))
    const other = await RawSession.open(gw.url, {}, bearer('other'))
    const created: string[] = []
    let refusal: Json | undefined
    for (let i = 0; i < 10 && refusal === undefined; i++) {
      const response = await hog.request('tools/call', { name: 'demo__echo', arguments: { text: LARGE }, task: { ttl: 86_400_000 } })
      const taskId = ((response.result as Json | undefined)?.task as Json | undefined)?.taskId
      if (typeof taskId === 'string') created.push(taskId)
      else refusal = response.error as Json
    }
    // Four tasks of about 60 kB fit in 256 kB; the fifth is refused, naming the option.
    expect(created).toHaveLength(4)
    expect(refusal).toMatchObject({ code: -32070, message: expect.stringContaining('limits.storedBytesPerPrincipal') })
    // The principal's accepted tasks end normally, their results stored.
    for (const taskId of created) await hog.waitFor(taskId, ['completed'])
    const result = await hog.request('tasks/result', { taskId: created[0] })
    expect(((result.result as Json).content as Json[])[0]).toMatchObject({ type: 'text', text: LARGE })
    // Their results hold the budget until they expire: the principal is still refused.
    expect((await hog.request('tools/call', { name: 'demo__echo', arguments: { text: LARGE }, task: { ttl: 60_000 } })).error).toMatchObject({ code: -32070 })

    // Another principal is not held back by the first one's bytes.
    for (let i = 0; i < 3; i++) {
      const response = await other.request('tools/call', { name: 'demo__echo', arguments: { text: LARGE }, task: { ttl: 60_000 } })
      const taskId = ((response.result as Json).task as Json).taskId as string
      expect(await other.waitFor(taskId, ['completed', 'failed'])).toMatchObject({ status: 'completed' })
    }
  })
})

describe('initialize refuses client capabilities or client info larger than limits.clientInfoBytes', () => {
  let gw: RunningGateway

  beforeAll(async () => {
    gw = await startGateway({ upstreams: [demoStdio()], limits: { clientInfoBytes: '16kb' } }, {}, { listen: false })
  })

  afterAll(async () => {
    await gw.close()
  })

  it('answers an oversized capabilities or clientInfo with an error naming the option, and creates no session', async () => {
    const padding = 'p'.repeat(20_000)
    for (const params of [{ capabilities: { experimental: { padding } } }, { clientInfo: { name: 'big', version: padding } }]) {
      const refused = await initialize(gw.app, '10.0.0.1', params)
      expect(refused.sessionId).toBeUndefined()
      expect(refused.body.error).toMatchObject({ code: -32602, message: expect.stringContaining('limits.clientInfoBytes') })
    }
    // Within the limit, a session is created.
    const accepted = await initialize(gw.app, '10.0.0.1', { capabilities: { experimental: { padding: 'p'.repeat(1000) } } })
    expect(accepted.sessionId).toEqual(expect.any(String))
  })
})

describe('with auth off, the per-principal limits bind each client address', () => {
  let gw: RunningGateway

  beforeAll(async () => {
    gw = await startGateway({
      upstreams: [demoStdio()],
      limits: { sessionsPerPrincipal: 3 },
      tasks: { maxActivePerPrincipal: 2 },
      server: { shutdownGrace: '100ms' },
    }, {}, { listen: false })
  })

  afterAll(async () => {
    await gw.close()
  })

  it('refuses an address its fourth anonymous session, while another address opens its own', async () => {
    const opened = []
    for (let i = 0; i < 3; i++) opened.push(await initialize(gw.app, '10.0.1.1'))
    expect(opened.map((r) => r.status)).toEqual([200, 200, 200])
    const fourth = await initialize(gw.app, '10.0.1.1')
    expect(fourth.status).toBe(429)
    expect(fourth.body.error).toMatchObject({ code: -32057, message: expect.stringContaining('limits.sessionsPerPrincipal') })
    expect((await initialize(gw.app, '10.0.1.2')).status).toBe(200)

    // Ending a session gives its place back.
    const ended = await gw.app.inject({ method: 'DELETE', url: '/mcp', remoteAddress: '10.0.1.1', headers: { 'mcp-session-id': opened[0]!.sessionId! } })
    expect(ended.statusCode).toBe(200)
    expect((await initialize(gw.app, '10.0.1.1')).status).toBe(200)
  })

  it('counts the running tasks of all anonymous sessions of one address together', async () => {
    const slow = { name: 'demo__slow', arguments: { duration: 60_000, steps: 1 }, task: { ttl: 120_000 } }
    const callTask = async (address: string, sessionId: string) =>
      (await post(gw.app, address, { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: slow }, { 'mcp-session-id': sessionId })).body
    const first = (await initialize(gw.app, '10.0.2.1')).sessionId!
    const second = (await initialize(gw.app, '10.0.2.1')).sessionId!
    expect((await callTask('10.0.2.1', first)).result).toMatchObject({ task: { status: 'working' } })
    expect((await callTask('10.0.2.1', second)).result).toMatchObject({ task: { status: 'working' } })
    // A third task of the same address, from either session, passes tasks.maxActivePerPrincipal.
    expect((await callTask('10.0.2.1', second)).error).toMatchObject({ code: -32054 })
    // Another address has its own.
    const elsewhere = (await initialize(gw.app, '10.0.2.2')).sessionId!
    expect((await callTask('10.0.2.2', elsewhere)).result).toMatchObject({ task: { status: 'working' } })
  })
})

describe('with auth off behind a trusted proxy, 2026-07-28 callers have the task limit of their own address', () => {
  let gw: RunningGateway

  beforeAll(async () => {
    gw = await startGateway({
      upstreams: [demoStdio()],
      server: { trustProxy: true, shutdownGrace: '100ms' },
      tasks: { maxActivePerPrincipal: 2, decide: 'always' },
    }, {}, { listen: false })
  })

  afterAll(async () => {
    await gw.close()
  })

  it('refuses one address its third running task while a caller at another address still gets one', async () => {
    const slow = { name: 'demo__slow', arguments: { duration: 60_000, steps: 1 } }
    const from = (address: string): ModernRaw => ModernRaw.withTasks(gw.app, {}, { 'x-forwarded-for': address })
    const busy = from('203.0.113.1')
    for (let i = 0; i < 2; i++) expect((await busy.request('tools/call', slow)).body.result).toMatchObject({ resultType: 'task' })
    expect((await busy.request('tools/call', slow)).body.error).toMatchObject({ code: -32054, message: expect.stringContaining('maxActivePerPrincipal') })
    // Every anonymous 2026-07-28 caller is the principal `anonymous`: before, the first address took the limit of all.
    expect((await from('203.0.113.2').request('tools/call', slow)).body.result).toMatchObject({ resultType: 'task' })
  })
})
