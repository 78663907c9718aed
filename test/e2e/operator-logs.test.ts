import { createServer } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { McpError } from '@modelcontextprotocol/sdk/types.js'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { connectV1 } from '../helpers/clients.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { MCP_HEADERS } from '../helpers/sse.ts'
import { until } from '../helpers/until.ts'

type Line = Record<string, unknown>

const TOKEN = 'operator-logs-token-0001'
const INITIALIZE = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'ops', version: '1' } } })

/** The access line (`request completed`) of the request sent with `X-Request-Id: id`. */
function accessLine (gw: RunningGateway, id: string): Line | undefined {
  return gw.logs().find((line) => line.reqId === id && line.msg === 'request completed')
}

/** A loopback port nothing listens on (taken and given back). */
async function closedPort (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise<void>((resolve) => server.close(() => { resolve() }))
  return port
}

describe('access lines an operator can use', () => {
  let gw: RunningGateway

  beforeAll(async () => {
    gw = await startGateway({
      // The hash as an operator may paste it, in upper case: the fingerprint is lower-case all the same.
      auth: { tokens: [{ principal: 'ops-bot', sha256: sha256Hex(TOKEN).toUpperCase() }] },
      server: { trustProxy: true },
      metrics: { listener: 'main' },
      upstreams: [demoStdio()],
    })
  })
  afterAll(async () => { await gw?.close() })

  const post = async (id: string, authorization: string, body = INITIALIZE): Promise<Response> => await fetch(gw.url, {
    method: 'POST',
    headers: { ...MCP_HEADERS, authorization, 'x-request-id': id, 'x-forwarded-for': '203.0.113.7' },
    body,
  })

  it('name the client address (trustProxy applied), the principal and the fingerprint of its credential', async () => {
    const res = await post('ops-ok', `Bearer ${TOKEN}`)
    expect(res.status).toBe(200)
    await res.text()
    const line = await until('the access line', () => accessLine(gw, 'ops-ok'))
    expect(line).toMatchObject({
      remoteAddress: '203.0.113.7',
      principal: 'ops-bot',
      credential: `sha256:${sha256Hex(TOKEN).slice(0, 12)}`,
      res: { statusCode: 200 },
    })
    expect(line.code).toBeUndefined()
    expect(JSON.stringify(gw.logs())).not.toContain(TOKEN)
  })

  it('carry the GW_ERR_* code of a refusal, and of a JSON-RPC error answered in a 200', async () => {
    const refused = await post('ops-refused', 'Bearer not-the-token')
    expect(refused.status).toBe(401)
    await refused.text()
    const line = await until('the refusal\'s access line', () => accessLine(gw, 'ops-refused'))
    expect(line).toMatchObject({ remoteAddress: '203.0.113.7', code: 'GW_ERR_AUTH_INVALID', res: { statusCode: 401 } })
    expect(line.principal).toBeUndefined()

    const init = await post('ops-init', `Bearer ${TOKEN}`)
    const session = init.headers.get('mcp-session-id')!
    await init.text()
    const unknown = await fetch(gw.url, {
      method: 'POST',
      headers: { ...MCP_HEADERS, authorization: `Bearer ${TOKEN}`, 'x-request-id': 'ops-unknown-tool', 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'no_such_tool', arguments: {} } }),
    })
    expect(unknown.status).toBe(200)
    expect(await unknown.json()).toMatchObject({ error: { code: -32602, data: { code: 'GW_ERR_TOOL_NOT_FOUND' } } })
    expect(await until('the error\'s access line', () => accessLine(gw, 'ops-unknown-tool'))).toMatchObject({ code: 'GW_ERR_TOOL_NOT_FOUND', principal: 'ops-bot' })
  })

  it('leave the probes and the metrics scrape out by default', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      const res = await fetch(`${gw.base}${path}`, { headers: { 'x-request-id': `probe${path}` } })
      await res.text()
    }
    // An MCP request after them: once its line is written, theirs would have been.
    const after = await post('after-probes', `Bearer ${TOKEN}`)
    await after.text()
    await until('the access line after the probes', () => accessLine(gw, 'after-probes'))
    expect(gw.logs().filter((line) => String(line.reqId).startsWith('probe/'))).toEqual([])
  })
})

describe('probes in the access log on request', () => {
  let gw: RunningGateway
  beforeAll(async () => { gw = await startGateway({ logging: { probes: true }, upstreams: [demoStdio()] }, {}, { listen: false }) })
  afterAll(async () => { await gw?.close() })

  it('logs /healthz and /readyz with logging.probes: true', async () => {
    await gw.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'probe-h' } })
    await gw.app.inject({ method: 'GET', url: '/readyz', headers: { 'x-request-id': 'probe-r' } })
    expect(accessLine(gw, 'probe-h')).toMatchObject({ res: { statusCode: 200 } })
    expect(accessLine(gw, 'probe-r')).toMatchObject({ res: { statusCode: 200 } })
  })
})

describe('the code of a gateway error reaches clients', () => {
  let gw: RunningGateway
  let client: Client
  beforeAll(async () => {
    gw = await startGateway({ upstreams: [demoStdio()] })
    client = await connectV1(gw.url)
  })
  afterAll(async () => {
    await client?.close()
    await gw?.close()
  })

  it('in the JSON-RPC error\'s data, as an SDK client reads it', async () => {
    const err = await client.callTool({ name: 'demo__no_such_tool', arguments: {} }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(McpError)
    expect((err as McpError).code).toBe(-32602)
    expect((err as McpError).data).toEqual({ code: 'GW_ERR_TOOL_NOT_FOUND' })
  })
})

describe('an upstream that refuses connections', () => {
  let gw: RunningGateway
  let url: string
  beforeAll(async () => {
    url = `http://127.0.0.1:${await closedPort()}/mcp`
    gw = await startGateway({
      metrics: { listener: 'main' },
      upstreams: [demoStdio(), { name: 'gone', transport: 'streamable-http', url, restart: { initialDelay: '10ms', maxDelay: '20ms' } }],
    }, {}, { listen: false })
  })
  afterAll(async () => { await gw?.close() })

  it('logs one line when it goes unavailable, not one per retry, and /readyz says why', async () => {
    await until('six reconnects of the refusing upstream', async () => {
      const res = await gw.app.inject({ method: 'GET', url: '/metrics' })
      const match = /gateway_upstream_reconnects_total\{upstream="gone"\} (\d+)/.exec(res.body)
      return match !== null && Number(match[1]) >= 6 ? true : undefined
    })
    const warnings = gw.logs().filter((line) => line.upstream === 'gone' && (line.level as number) >= 40)
    expect(warnings.map((line) => line.msg)).toEqual(['upstream unavailable'])
    const ready = await gw.app.inject({ method: 'GET', url: '/readyz' })
    const gone = (ready.json() as { upstreams: Array<{ name: string, reason?: string }> }).upstreams.find((u) => u.name === 'gone')
    expect(gone?.reason).toContain(`connection refused at ${url}`)
  })
})
