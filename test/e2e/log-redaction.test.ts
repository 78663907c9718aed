import { describe, expect, it } from 'vitest'
import { logFingerprint } from '../../src/observability/logger.ts'
import { demoStdio, gatewayForSuite } from '../helpers/gateway.ts'
import { MCP_HEADERS } from '../helpers/sse.ts'

type Json = Record<string, unknown>

const SECRETS = ['Bearer sk-live-SECRET-1111', 'session=SECRET-COOKIE-2222', 'SECRET-APIKEY-3333', 'SECRET-CUSTOM-4444']

/** Logs carry request and session ids but never credentials. */
describe('log redaction', () => {
  const gw = gatewayForSuite({ upstreams: [demoStdio()], logging: { redactHeaders: ['X-Tenant-Secret'] } }, { listen: false })

  it('never writes authorization, cookies, api keys or configured secret headers', async () => {
    const res = await gw.app.inject({
      method: 'POST',
      url: '/mcp',
      headers: {
        ...MCP_HEADERS,
        authorization: SECRETS[0]!,
        cookie: SECRETS[1]!,
        'x-api-key': SECRETS[2]!,
        'x-tenant-secret': SECRETS[3]!,
      },
      payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'redact', version: '1' } } }),
    })
    expect(res.statusCode).toBe(200)
    const text = JSON.stringify(gw.logs())
    for (const secret of SECRETS) expect(text).not.toContain(secret.split(' ').at(-1))
    expect(text).toContain('[redacted]')
    expect(gw.logs().some((line) => typeof line.reqId === 'string')).toBe(true)
  })

  it('never writes a session id, a tool argument header or a token sent in the query string, at any level', async () => {
    const initialized = await gw.app.inject({
      method: 'POST',
      url: '/mcp?access_token=SECRET-QUERY-5555&x=1',
      headers: MCP_HEADERS,
      payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'redact', version: '1' } } }),
    })
    expect(initialized.statusCode).toBe(200)
    const session = String(initialized.headers['mcp-session-id'])
    const listed = await gw.app.inject({
      method: 'POST',
      url: '/mcp',
      headers: { ...MCP_HEADERS, 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25', 'mcp-param-text': 'SECRET-ARGUMENT-6666' },
      payload: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    })
    expect(listed.statusCode).toBe(200)
    // A call opens the session's own upstream session, which lines about upstream sessions name.
    const called = await gw.app.inject({
      method: 'POST',
      url: '/mcp',
      headers: { ...MCP_HEADERS, 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' },
      payload: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'demo__echo', arguments: { text: 'hello' } } }),
    })
    expect(called.body).toContain('hello')
    const lines = gw.logs()
    const text = JSON.stringify(lines)
    for (const secret of [session, 'SECRET-QUERY-5555', 'SECRET-ARGUMENT-6666']) expect(text).not.toContain(secret)
    // What is left still relates the lines: the path with its parameter names, and the session's fingerprint.
    expect(text).toContain('/mcp?access_token=[redacted]&x=[redacted]')
    const fingerprint = logFingerprint(session)
    expect(lines.filter((line) => line.msg === 'session initialized' && line.sessionId === fingerprint)).toHaveLength(1)
    expect(lines.some((line) => (line.req as { headers?: Json } | undefined)?.headers?.['mcp-session-id'] === fingerprint)).toBe(true)
  })
})
