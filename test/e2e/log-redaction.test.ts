import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { MCP_HEADERS } from '../helpers/sse.ts'

const SECRETS = ['Bearer sk-live-SECRET-1111', 'session=SECRET-COOKIE-2222', 'SECRET-APIKEY-3333', 'SECRET-CUSTOM-4444']

/** Logs carry request and session ids but never credentials. */
describe('log redaction', () => {
  let gw: RunningGateway

  beforeAll(async () => {
    gw = await startGateway({ upstreams: [demoStdio()], logging: { redactHeaders: ['X-Tenant-Secret'] } })
  })

  afterAll(async () => {
    await gw?.close()
  })

  it('never writes authorization, cookies, api keys or configured secret headers', async () => {
    const res = await fetch(gw.url, {
      method: 'POST',
      headers: {
        ...MCP_HEADERS,
        authorization: SECRETS[0]!,
        cookie: SECRETS[1]!,
        'x-api-key': SECRETS[2]!,
        'x-tenant-secret': SECRETS[3]!,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'redact', version: '1' } } }),
    })
    const session = res.headers.get('mcp-session-id')
    expect(res.status).toBe(200)
    const text = JSON.stringify(gw.logs())
    for (const secret of SECRETS) expect(text).not.toContain(secret.split(' ').at(-1))
    expect(text).toContain('[redacted]')
    expect(text).toContain(session)
    expect(gw.logs().some((line) => typeof line.reqId === 'string')).toBe(true)
  })
})
