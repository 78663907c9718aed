// A request with two Host headers: Node keeps the first in `headers.host` and drops the second, so the
// Host/Origin guard, a proxy in front and the gateway could each go by a different one. It gets 400 on every
// route of both listeners, whatever the order and whether the guard is on. Sent over a raw socket: no HTTP
// client sends two Host headers.
import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'

const ADMIN_TOKEN = 'admin-token-duplicate-host-0123'
const INITIALIZE = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } })

/** Sends one HTTP/1.1 request with exactly these header lines and returns the status and the body. */
async function rawRequest (base: string, method: string, path: string, headers: string[], body = ''): Promise<{ status: number, body: string }> {
  const { hostname, port } = new URL(base)
  const socket = connect(Number(port), hostname)
  const lines = [`${method} ${path} HTTP/1.1`, ...headers, 'Connection: close', ...(body === '' ? [] : [`Content-Length: ${Buffer.byteLength(body)}`]), '', body]
  socket.end(lines.join('\r\n'))
  const chunks: Buffer[] = []
  for await (const chunk of socket) chunks.push(chunk as Buffer)
  const text = Buffer.concat(chunks).toString('utf8')
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]), body: text.slice(text.indexOf('\r\n\r\n') + 4) }
}

describe('a request with more than one Host header', () => {
  let gw: RunningGateway
  let open: RunningGateway
  let admin: string

  beforeAll(async () => {
    gw = await startGateway({ upstreams: [demoStdio()], admin: { port: 0, tokenSha256: sha256Hex(ADMIN_TOKEN) } })
    admin = await gw.gateway.admin!.listen({ host: '127.0.0.1', port: 0 })
    open = await startGateway({ upstreams: [demoStdio()], server: { dnsRebindingProtection: false } })
  })

  afterAll(async () => {
    await gw?.close()
    await open?.close()
  })

  const MCP = ['Content-Type: application/json', 'Accept: application/json, text/event-stream']

  it('gets 400 on the MCP path, in either order, with the guard on or off', async () => {
    for (const [target, hosts] of [[gw, ['localhost', 'evil.example']], [gw, ['evil.example', 'localhost']], [open, ['localhost', 'evil.example']]] as const) {
      const answer = await rawRequest(target.base, 'POST', '/mcp', [...hosts.map((h) => `Host: ${h}`), ...MCP], INITIALIZE)
      expect(answer.status).toBe(400)
      expect(JSON.parse(answer.body)).toMatchObject({ error: { code: -32600, message: 'Bad Request: the request carries 2 Host headers; send exactly one' } })
    }
    expect(gw.logs().filter((line) => line.msg === 'request with several Host headers refused')).toHaveLength(2)
  })

  it('gets 400 on the other routes and on the admin listener', async () => {
    expect((await rawRequest(gw.base, 'GET', '/healthz', ['Host: localhost', 'host: localhost'])).status).toBe(400)
    const refused = await rawRequest(admin, 'GET', '/admin/upstreams', ['Host: localhost', 'Host: localhost', `Authorization: Bearer ${ADMIN_TOKEN}`])
    expect(refused.status).toBe(400)
    expect(refused.body).toContain('GW_ERR_HTTP_HOST_DUPLICATE')
  })

  it('with one Host header is served as before', async () => {
    expect((await rawRequest(gw.base, 'POST', '/mcp', ['Host: localhost', ...MCP], INITIALIZE)).status).toBe(200)
    expect((await rawRequest(gw.base, 'GET', '/healthz', ['Host: localhost'])).status).toBe(200)
    expect((await rawRequest(admin, 'GET', '/admin/upstreams', ['Host: localhost', `Authorization: Bearer ${ADMIN_TOKEN}`])).status).toBe(200)
  })
})
