import { describe, expect, it } from 'vitest'
import { request } from 'undici'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { demoStdio, gatewayForSuite } from '../helpers/gateway.ts'

const APP = 'https://app.example.com'
const TOKEN = 'browser-client-token-0123456789'
const INIT = { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'browser', version: '1' } }
/** What a browser asks before a 2026-07-28 tools/call with a bearer token and an `x-mcp-header` argument. */
const REQUESTED = 'content-type, accept, authorization, mcp-session-id, mcp-protocol-version, last-event-id, mcp-method, mcp-name, mcp-param-region'

function listOf (value: string | string[] | undefined): string[] {
  return (Array.isArray(value) ? value.join(',') : value ?? '').split(',').map((item) => item.trim().toLowerCase()).filter((item) => item !== '')
}

async function send (url: string, method: 'OPTIONS' | 'POST' | 'GET' | 'DELETE', headers: Record<string, string>, body?: string) {
  const res = await request(url, { method, headers, body })
  // An SSE stream stays open: its headers are what is checked, so the body is dropped.
  const text = res.headers['content-type'] === 'text/event-stream' ? (res.body.destroy(), '') : await res.body.text()
  return { status: res.statusCode, headers: res.headers, text }
}

/** A page on an allowed origin calls the MCP endpoint across origins: preflight, then POST, GET and DELETE. */
describe('browser clients (CORS)', () => {
  const gw = gatewayForSuite({
    upstreams: [demoStdio()],
    server: { allowedOrigins: [APP] },
    auth: { tokens: [{ principal: 'alice', sha256: sha256Hex(TOKEN) }] },
  })

  it('answers the preflight of an allowed origin with 204 and the MCP headers, without a token', async () => {
    const res = await send(gw.url, 'OPTIONS', { origin: APP, 'access-control-request-method': 'POST', 'access-control-request-headers': REQUESTED })
    expect(res.status).toBe(204)
    expect(res.headers['access-control-allow-origin']).toBe(APP)
    expect(listOf(res.headers['access-control-allow-methods'])).toEqual(expect.arrayContaining(['get', 'post', 'delete']))
    expect(listOf(res.headers['access-control-allow-headers'])).toEqual(expect.arrayContaining(listOf(REQUESTED)))
    expect(listOf(res.headers.vary)).toContain('origin')
    expect(res.headers['access-control-allow-credentials']).toBeUndefined()
  })

  it('allows only the headers the endpoint reads, whatever the preflight asks for', async () => {
    const res = await send(gw.url, 'OPTIONS', { origin: APP, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type, x-sneaky, cookie' })
    expect(res.status).toBe(204)
    const allowed = listOf(res.headers['access-control-allow-headers'])
    expect(allowed).toContain('content-type')
    expect(allowed).not.toContain('x-sneaky')
    expect(allowed).not.toContain('cookie')
  })

  it('refuses the preflight of a foreign origin with 403 and no CORS headers', async () => {
    for (const origin of ['https://evil.example', 'http://localhost:5173']) {
      const res = await send(gw.url, 'OPTIONS', { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' })
      expect(res.status, origin).toBe(403)
      expect(res.headers['access-control-allow-origin'], origin).toBeUndefined()
      expect(JSON.parse(res.text).error.message, origin).toContain('server.allowedOrigins')
    }
  })

  it('answers a plain OPTIONS (no preflight) with the methods of the endpoint instead of 405', async () => {
    const res = await send(gw.url, 'OPTIONS', {})
    expect(res.status).toBe(204)
    expect(listOf(res.headers.allow)).toEqual(['get', 'post', 'delete', 'options'])
    expect(res.headers['access-control-allow-origin']).toBeUndefined()
  })

  it('gives a cross-origin POST, GET stream and DELETE the CORS headers a browser needs to read them', async () => {
    const json = { origin: APP, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }
    const refused = await send(gw.url, 'POST', json, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT }))
    expect(refused.status).toBe(401)
    expect(refused.headers['access-control-allow-origin']).toBe(APP)
    expect(listOf(refused.headers['access-control-expose-headers'])).toContain('www-authenticate')

    const auth = { ...json, authorization: `Bearer ${TOKEN}` }
    const init = await send(gw.url, 'POST', auth, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT }))
    expect(init.status).toBe(200)
    expect(init.headers['access-control-allow-origin']).toBe(APP)
    expect(listOf(init.headers['access-control-expose-headers'])).toEqual(expect.arrayContaining(['mcp-session-id', 'mcp-protocol-version', 'www-authenticate']))
    expect(listOf(init.headers.vary)).toContain('origin')
    const session = init.headers['mcp-session-id'] as string
    expect(session).toBeTruthy()

    const withSession = { ...auth, 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' }
    const stream = await send(gw.url, 'GET', { ...withSession, accept: 'text/event-stream' })
    expect(stream.status).toBe(200)
    expect(stream.headers['access-control-allow-origin']).toBe(APP)
    const ended = await send(gw.url, 'DELETE', withSession)
    expect(ended.status).toBe(200)
    expect(ended.headers['access-control-allow-origin']).toBe(APP)
  })

  it('covers the gateway\'s other routes too', async () => {
    const health = await send(`${gw.base}/healthz`, 'GET', { origin: APP })
    expect(health.status).toBe(200)
    expect(health.headers['access-control-allow-origin']).toBe(APP)
  })

  it('gives a request from another origin no CORS headers', async () => {
    const res = await send(gw.url, 'POST', { origin: 'http://localhost:5173', 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${TOKEN}` }, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT }))
    expect(res.status).toBe(200)
    expect(res.headers['access-control-allow-origin']).toBeUndefined()
    expect(res.headers['access-control-expose-headers']).toBeUndefined()
  })
})

describe('browser clients without server.allowedOrigins', () => {
  const gw = gatewayForSuite()

  it('refuses every preflight with 403 naming server.allowedOrigins, and adds no CORS headers', async () => {
    const res = await send(gw.url, 'OPTIONS', { origin: 'http://localhost:5173', 'access-control-request-method': 'POST' })
    expect(res.status).toBe(403)
    expect(res.headers['access-control-allow-origin']).toBeUndefined()
    expect(JSON.parse(res.text).error).toMatchObject({ code: -32600, message: expect.stringContaining('server.allowedOrigins') })
  })
})
