import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import type { FastifyInstance } from 'fastify'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { RawSession } from '../helpers/raw-session.ts'
import { until } from '../helpers/until.ts'

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', host: 'localhost' }

function rpc (method: string, params?: Record<string, unknown>, id: number | string = 1): string {
  return JSON.stringify({ jsonrpc: '2.0', id, method, ...(params && { params }) })
}

const INIT = { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'inject', version: '1' } }

/** The HTTP contract of the endpoint: statuses, headers and JSON-RPC errors for good and bad input. */
describe('the Streamable HTTP endpoint', () => {
  let gw: RunningGateway
  let app: FastifyInstance

  async function initialize (): Promise<string> {
    const res = await app.inject({ method: 'POST', url: '/mcp', headers: JSON_HEADERS, payload: rpc('initialize', INIT) })
    expect(res.statusCode).toBe(200)
    return res.headers['mcp-session-id'] as string
  }

  async function post (sessionId: string | undefined, payload: string, headers: Record<string, string> = {}) {
    return await app.inject({
      method: 'POST',
      url: '/mcp',
      headers: { ...JSON_HEADERS, ...(sessionId && { 'mcp-session-id': sessionId }), ...headers },
      payload,
    })
  }

  beforeAll(async () => {
    gw = await startGateway({ upstreams: [demoStdio()], server: { maxBodyBytes: '64kb', allowedHosts: ['gateway.example.com'], allowedOrigins: ['https://app.example.com'] } }, {}, { listen: false })
    app = gw.app
  })

  afterAll(async () => {
    await gw?.close()
  })

  it('negotiates the protocol version and issues a session id', async () => {
    const res = await app.inject({ method: 'POST', url: '/mcp', headers: JSON_HEADERS, payload: rpc('initialize', { ...INIT, protocolVersion: '2024-11-05' }) })
    expect(res.json().result.protocolVersion).toBe('2024-11-05')
    expect(res.headers['mcp-session-id']).toMatch(/^[0-9a-f-]{36}$/)
    const future = await app.inject({ method: 'POST', url: '/mcp', headers: JSON_HEADERS, payload: rpc('initialize', { ...INIT, protocolVersion: '2099-01-01' }) })
    expect(future.json().result.protocolVersion).toBe('2025-11-25')
  })

  it('rejects initialize params that are not valid with -32602 naming the field', async () => {
    const res = await app.inject({ method: 'POST', url: '/mcp', headers: JSON_HEADERS, payload: rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {} }) })
    expect(res.json().error).toMatchObject({ code: -32602, message: expect.stringContaining('clientInfo') })
  })

  it('answers malformed JSON with a parse error', async () => {
    const res = await post(undefined, '{"jsonrpc": "2.0", "id": 1, "method": ')
    expect(res.statusCode).toBe(400)
    expect(res.json().error.code).toBe(-32700)
  })

  it('answers a message that is not JSON-RPC with -32600 saying what is wrong', async () => {
    const session = await initialize()
    const res = await post(session, JSON.stringify({ jsonrpc: '1.0', id: 1, method: 'ping' }))
    expect(res.statusCode).toBe(400)
    expect(res.json().error).toMatchObject({ code: -32600, message: expect.stringContaining('"jsonrpc" must be "2.0"') })
    const batch = await post(session, JSON.stringify([{ jsonrpc: '2.0', id: 1, method: 'ping' }]))
    expect(batch.json().error.message).toContain('batches')
  })

  it('requires a session for everything but initialize, and 404s unknown sessions', async () => {
    const missing = await post(undefined, rpc('tools/list'))
    expect(missing.statusCode).toBe(400)
    expect(missing.json().error.message).toContain('Mcp-Session-Id')
    const unknown = await post('6b1c1c52-0000-4000-8000-000000000000', rpc('tools/list'))
    expect(unknown.statusCode).toBe(404)
  })

  it('answers an unknown method with -32601 and bad params with -32602 naming the field', async () => {
    const session = await initialize()
    const unknown = await post(session, rpc('tools/frobnicate'))
    expect(unknown.statusCode).toBe(200)
    expect(unknown.json().error).toEqual({ code: -32601, message: 'Method not found: tools/frobnicate', data: { code: 'GW_ERR_RPC_METHOD_NOT_FOUND' } })
    const bad = await post(session, rpc('tools/call', { name: 42 }))
    expect(bad.json().error).toMatchObject({ code: -32602, message: expect.stringContaining("'name'") })
    const noTool = await post(session, rpc('tools/call', { name: 'demo__nope' }))
    expect(noTool.json().error).toMatchObject({ code: -32602, message: expect.stringContaining('demo__nope') })
    const cursor = await post(session, rpc('tools/list', { cursor: 'not-a-cursor' }))
    expect(cursor.json().error.code).toBe(-32602)
  })

  it('answers a 2026-07-28 request of a method that revision does not have with 404 and -32601', async () => {
    const client = new ModernRaw(app, {}, { host: 'localhost' })
    for (const method of ['tools/frobnicate', 'ping', 'resources/subscribe', 'tasks/result']) {
      const reply = await client.request(method)
      expect(reply.status, method).toBe(404)
      const message = `Method not found: ${method} (not a method of the 2026-07-28 protocol)`
      expect(reply.body.error, method).toEqual({ code: -32601, message, data: { code: 'GW_ERR_MODERN_METHOD_NOT_FOUND' } })
    }
  })

  it('checks the MCP-Protocol-Version header', async () => {
    const session = await initialize()
    const res = await post(session, rpc('ping'), { 'mcp-protocol-version': '1999-01-01' })
    expect(res.statusCode).toBe(400)
    const ok = await post(session, rpc('ping'), { 'mcp-protocol-version': '2025-06-18' })
    expect(ok.json()).toEqual({ jsonrpc: '2.0', id: 1, result: {} })
  })

  it('ends a session on DELETE', async () => {
    const session = await initialize()
    const del = await app.inject({ method: 'DELETE', url: '/mcp', headers: { host: 'localhost', 'mcp-session-id': session } })
    expect(del.statusCode).toBe(200)
    expect((await post(session, rpc('ping'))).statusCode).toBe(404)
  })

  it('ends a session on a DELETE whose empty body is labelled with any content type (as the Python SDK sends it)', async () => {
    for (const contentType of ['application/json', 'application/json; charset=utf-8', 'text/plain']) {
      const session = await initialize()
      const get = await app.inject({ method: 'GET', url: '/mcp', headers: { host: 'localhost', accept: 'application/json', 'content-type': contentType, 'mcp-session-id': session }, payload: '' })
      expect(get.statusCode, `GET, ${contentType}`).toBe(406)
      const del = await app.inject({ method: 'DELETE', url: '/mcp', headers: { host: 'localhost', 'content-type': contentType, 'content-length': '0', 'mcp-session-id': session }, payload: '' })
      expect(del.statusCode, `${contentType}: ${del.body}`).toBe(200)
      expect((await post(session, rpc('ping'))).statusCode, contentType).toBe(404)
    }
    const session = await initialize()
    const garbage = await app.inject({ method: 'DELETE', url: '/mcp', headers: { host: 'localhost', 'content-type': 'application/json', 'mcp-session-id': session }, payload: '{"not json' })
    expect(garbage.statusCode).toBe(400)
    expect((await post(session, rpc('ping'))).statusCode).toBe(200)
  })

  it('refuses foreign Host and Origin headers (DNS rebinding) and accepts configured ones', async () => {
    const evilHost = await app.inject({ method: 'POST', url: '/mcp', headers: { ...JSON_HEADERS, host: 'evil.example:8080' }, payload: rpc('initialize', INIT) })
    expect(evilHost.statusCode).toBe(403)
    expect(evilHost.json().error.message).toContain('allowedHosts')
    const evilOrigin = await app.inject({ method: 'POST', url: '/mcp', headers: { ...JSON_HEADERS, origin: 'https://evil.example' }, payload: rpc('initialize', INIT) })
    expect(evilOrigin.statusCode).toBe(403)
    const configured = await app.inject({ method: 'POST', url: '/mcp', headers: { ...JSON_HEADERS, host: 'gateway.example.com', origin: 'https://app.example.com' }, payload: rpc('initialize', INIT) })
    expect(configured.statusCode).toBe(200)
    const localOrigin = await app.inject({ method: 'POST', url: '/mcp', headers: { ...JSON_HEADERS, host: '127.0.0.1:8080', origin: 'http://localhost:6274' }, payload: rpc('initialize', INIT) })
    expect(localOrigin.statusCode).toBe(200)
    // The MCP path however the URL spells it: with a query, or percent-encoded (the router decodes it).
    for (const url of ['/mcp?x=1', '/m%63p']) {
      const spelled = await app.inject({ method: 'POST', url, headers: { ...JSON_HEADERS, host: 'evil.example:8080' }, payload: rpc('initialize', INIT) })
      expect(spelled.statusCode, url).toBe(403)
    }
  })

  it('limits the body size with 413 and insists on JSON and on the Accept header', async () => {
    const session = await initialize()
    const big = await post(session, rpc('tools/call', { name: 'demo__echo', arguments: { text: 'x'.repeat(70_000) } }))
    expect(big.statusCode).toBe(413)
    expect(big.json().error.message).toContain('65536')
    const text = await post(session, rpc('ping'), { 'content-type': 'text/plain' })
    expect(text.statusCode).toBe(415)
    const accept = await post(session, rpc('ping'), { accept: 'text/html' })
    expect(accept.statusCode).toBe(406)
    const put = await app.inject({ method: 'PUT', url: '/mcp', headers: { host: 'localhost' } })
    expect(put.statusCode).toBe(405)
  })

  it('accepts notifications and rejects answers to requests nobody asked with 202 / 400', async () => {
    const session = await initialize()
    const note = await post(session, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }))
    expect(note.statusCode).toBe(202)
    const stray = await post(session, JSON.stringify({ jsonrpc: '2.0', id: 'gw-unknown', result: {} }))
    expect(stray.statusCode).toBe(400)
  })

  it('answers a forged or unknown answer id naming a live process with 400, and one of a process that is gone with 503', async () => {
    const session = await initialize()
    const processId = gw.gateway.processId
    const encoded = Buffer.from(processId).toString('base64url')
    const sequence = '0b6f3c4e-1d2a-4c5b-8e9f-a0b1c2d3e4f5'
    for (const id of [`gw-${processId}.x`, `gw-${processId}.${sequence}`, `gw-${encoded}.x`, `gw-${encoded}.${sequence}`, `gw-${encoded}`, 'gw-.x']) {
      const res = await post(session, JSON.stringify({ jsonrpc: '2.0', id, result: { action: 'decline' } }))
      expect(res.statusCode, `${id}: ${res.body}`).toBe(400)
      expect(res.json().error).toMatchObject({ code: -32600, message: expect.stringContaining(`no request with id "${id}"`) })
    }
    const gone = `gw-${Buffer.from('a-process-that-is-gone').toString('base64url')}.${sequence}`
    const lost = await post(session, JSON.stringify({ jsonrpc: '2.0', id: gone, result: { action: 'decline' } }))
    expect(lost.statusCode).toBe(503)
    expect(lost.json().error.message).toContain('is gone')
  })

  it('reports health and readiness per upstream', async () => {
    expect((await app.inject({ url: '/healthz' })).json()).toEqual({ status: 'ok' })
    const ready = await app.inject({ url: '/readyz' })
    expect(ready.statusCode).toBe(200)
    expect(ready.json()).toMatchObject({ status: 'ready', store: { ok: true }, upstreams: [{ name: 'demo', state: 'ready' }] })
  })
})

describe('session idle timeout', () => {
  // The gateway's clock is faked (it reads Date.now() for a session's use and for the sweep's cutoff); the sweep
  // itself runs on its real interval (1 s for this timeout) and finds the clock wherever the test moved it.
  afterEach(() => {
    vi.useRealTimers()
  })

  it('keeps a session in use alive however short the timeout, and deletes an idle one', async () => {
    const gw = await startGateway({ upstreams: [demoStdio()], server: { sessionIdleTimeout: '2s' } })
    try {
      const busy = await RawSession.open(gw.url)
      const idle = await RawSession.open(gw.url)
      vi.useFakeTimers({ toFake: ['Date'] })
      // Used every 300 ms for more than twice the timeout: every request finds the session.
      for (let elapsed = 0; elapsed < 5000; elapsed += 300) {
        vi.setSystemTime(Date.now() + 300)
        expect((await busy.request('ping')).result).toEqual({})
      }
      // The clock stands still now: the next sweep ends the idle session (5 s unused), not the busy one.
      await until('the sweep to end the idle session', async () => gw.logs().some((l) => l.msg === 'expired idle sessions') || undefined)
      const stale = await idle.post({ jsonrpc: '2.0', id: 9, method: 'ping' })
      expect(stale.status).toBe(404)
      await stale.text()
      expect((await busy.request('ping')).result).toEqual({})
    } finally {
      await gw.close()
    }
  })
})
