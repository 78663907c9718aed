// A Streamable HTTP upstream that fails at the HTTP level: each failure reaches the client with a stable code and
// its JSON-RPC code, and what the upstream wrote in the body of its error stays in the gateway's log.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ERRORS, type ErrorCode } from '../../src/errors.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'

type Json = Record<string, unknown>

/** What an upstream's error page may hold and no client may see. */
const SECRET = 'Traceback (most recent call last): psycopg.OperationalError: password authentication failed for user "billing" at db-7.internal'

/** The tools whose calls the upstream's HTTP layer answers itself, before any MCP server sees them. */
const FAILURES: Record<string, (req: IncomingMessage, res: ServerResponse) => void> = {
  crash: (_req, res) => { res.writeHead(500, { 'content-type': 'text/html' }).end(`<html><body><pre>${SECRET}</pre></body></html>`.repeat(5)) },
  busy: (_req, res) => { res.writeHead(503, { 'content-type': 'text/plain', 'retry-after': '7' }).end(`down for maintenance: ${SECRET}`) },
  throttled: (_req, res) => { res.writeHead(429, { 'content-type': 'text/plain' }).end(`slow down: ${SECRET}`) },
  hangup: (req) => { req.socket.destroy() },
  silent: () => {},
}

interface FlakyUpstream {
  url: string
  /** Stops listening: connections to it are refused from now on. */
  close (): Promise<void>
}

/**
 * A stateless MCP server over Streamable HTTP offering `echo` and the tools of FAILURES. Every response closes its
 * connection, so each request of the gateway opens a new one (and one made after close() is refused).
 */
async function startFlakyUpstream (): Promise<FlakyUpstream> {
  const build = (): McpServer => {
    const server = new McpServer({ name: 'flaky', version: '1.0.0' })
    server.registerTool('echo', { description: 'answers ok' }, async () => ({ content: [{ type: 'text', text: 'ok' }] }))
    for (const name of Object.keys(FAILURES)) server.registerTool(name, { description: `fails: ${name}` }, async () => ({ content: [] }))
    return server
  }
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    res.setHeader('connection', 'close')
    if (req.method !== 'POST') {
      res.writeHead(405).end()
      return
    }
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const message = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { method?: string, params?: { name?: unknown } }
    const fail = message.method === 'tools/call' ? FAILURES[String(message.params?.name)] : undefined
    if (fail !== undefined) {
      fail(req, res)
      return
    }
    const server = build()
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })
    res.on('close', () => { void transport.close(); void server.close() })
    await server.connect(transport)
    await transport.handleRequest(req, res, message)
  }
  const http: Server = createServer((req, res) => { handle(req, res).catch(() => res.destroy()) })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    close: () => new Promise((resolve) => { http.close(() => resolve()); http.closeAllConnections() }),
  }
}

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', host: 'localhost' }

describe('an HTTP upstream that fails', () => {
  let flaky: FlakyUpstream
  let gone: FlakyUpstream
  let gw: RunningGateway
  let app: FastifyInstance
  let sessionId: string
  let nextId = 1

  /** Sends a request and returns its response (the last message of an SSE answer: tasks/result streams). */
  async function post (method: string, params: Json = {}): Promise<{ status: number, body: Json }> {
    const res = await app.inject({
      method: 'POST',
      url: '/mcp',
      headers: { ...JSON_HEADERS, 'mcp-session-id': sessionId },
      payload: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
    })
    if (!String(res.headers['content-type']).includes('text/event-stream')) return { status: res.statusCode, body: res.json() }
    const messages = res.body.split('\n').filter((line) => line.startsWith('data: ') && line.length > 6).map((line) => JSON.parse(line.slice(6)) as Json)
    return { status: res.statusCode, body: messages.at(-1)! }
  }

  /** Calls a tool and returns the JSON-RPC error it was answered with. */
  async function failedCall (name: string): Promise<{ code: number, message: string, data?: Json }> {
    const { status, body } = await post('tools/call', { name, arguments: {} })
    // The exchange itself succeeded: the failure is the request's JSON-RPC error.
    expect(status).toBe(200)
    expect(body.error, JSON.stringify(body)).toBeDefined()
    expect(JSON.stringify(body)).not.toContain('password authentication')
    return body.error as { code: number, message: string, data?: Json }
  }

  const rpcOf = (code: ErrorCode): number => ERRORS[code].rpc

  beforeAll(async () => {
    flaky = await startFlakyUpstream()
    gone = await startFlakyUpstream()
    gw = await startGateway({
      upstreams: [
        { name: 'flaky', transport: 'streamable-http', url: flaky.url, era: 'legacy', toolSettings: { silent: { timeout: '300ms' } } },
        { name: 'gone', transport: 'streamable-http', url: gone.url, era: 'legacy' },
      ],
    })
    app = gw.gateway.app
    const init = await app.inject({
      method: 'POST',
      url: '/mcp',
      headers: JSON_HEADERS,
      payload: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'inject', version: '1' } } }),
    })
    sessionId = init.headers['mcp-session-id'] as string
    await app.inject({ method: 'POST', url: '/mcp', headers: { ...JSON_HEADERS, 'mcp-session-id': sessionId }, payload: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })
  })

  afterAll(async () => {
    await gw?.close()
    await flaky?.close()
    await gone?.close()
  })

  it('passes a working call through', async () => {
    const { body } = await post('tools/call', { name: 'flaky__echo', arguments: {} })
    expect(body.result).toMatchObject({ content: [{ type: 'text', text: 'ok' }] })
  })

  it('answers an upstream 500 with GW_ERR_UPSTREAM_FAILED naming the status, and logs the upstream\'s body', async () => {
    const error = await failedCall('flaky__crash')
    expect(error).toEqual({ code: rpcOf('GW_ERR_UPSTREAM_FAILED'), message: "upstream 'flaky' failed on tools/call 'crash': it answered HTTP 500", data: { code: 'GW_ERR_UPSTREAM_FAILED' } })
    const logged = gw.logs().filter((line) => line.msg === 'request failed').map((line) => JSON.stringify(line.err))
    expect(logged.some((err) => err.includes('password authentication failed'))).toBe(true)
  })

  it('answers an upstream 503 with GW_ERR_UPSTREAM_OVERLOADED and the wait its Retry-After asked for', async () => {
    const error = await failedCall('flaky__busy')
    expect(error).toEqual({
      code: rpcOf('GW_ERR_UPSTREAM_OVERLOADED'),
      message: "upstream 'flaky' refused tools/call 'busy' for now (it answered HTTP 503: unavailable or overloaded); try again later",
      data: { code: 'GW_ERR_UPSTREAM_OVERLOADED', retryAfter: 7 },
    })
  })

  it('answers an upstream 429 with GW_ERR_UPSTREAM_OVERLOADED', async () => {
    const error = await failedCall('flaky__throttled')
    expect(error.code).toBe(rpcOf('GW_ERR_UPSTREAM_OVERLOADED'))
    expect(error.message).toContain('HTTP 429')
    // No Retry-After from the upstream: the data carries the code alone.
    expect(error.data).toEqual({ code: 'GW_ERR_UPSTREAM_OVERLOADED' })
  })

  it('answers a connection the upstream drops under the call with GW_ERR_UPSTREAM_CONNECTION_LOST', async () => {
    const error = await failedCall('flaky__hangup')
    expect(error.code).toBe(rpcOf('GW_ERR_UPSTREAM_CONNECTION_LOST'))
    expect(error.message).toMatch(/^upstream 'flaky' connection was lost during tools\/call 'hangup': UND_ERR_SOCKET$/)
  })

  it('answers an upstream that never sends its response headers with GW_ERR_UPSTREAM_TIMEOUT', async () => {
    const error = await failedCall('flaky__silent')
    expect(error).toEqual({ code: rpcOf('GW_ERR_UPSTREAM_TIMEOUT'), message: "upstream 'flaky' did not answer tools/call 'silent' within 300ms", data: { code: 'GW_ERR_UPSTREAM_TIMEOUT' } })
  })

  it('answers an upstream that refuses connections with GW_ERR_UPSTREAM_UNREACHABLE', async () => {
    // The first call opens the client's own session of the upstream and the second reads its lists over it, so
    // the call after close() needs nothing but the call itself.
    for (let i = 0; i < 2; i++) expect((await post('tools/call', { name: 'gone__echo', arguments: {} })).body.result).toBeDefined()
    await gone.close()
    const error = await failedCall('gone__echo')
    expect(error).toEqual({ code: rpcOf('GW_ERR_UPSTREAM_UNREACHABLE'), message: "upstream 'gone' cannot be reached for tools/call 'echo' (ECONNREFUSED); the request was not sent", data: { code: 'GW_ERR_UPSTREAM_UNREACHABLE' } })
  })

  it('stores a task\'s upstream failure without the upstream\'s body', async () => {
    const created = await post('tools/call', { name: 'flaky__crash', arguments: {}, task: {} })
    const taskId = ((created.body.result as Json).task as Json).taskId as string
    const { body } = await post('tasks/result', { taskId })
    expect(body.error).toMatchObject({ code: rpcOf('GW_ERR_UPSTREAM_FAILED'), message: "upstream 'flaky' failed on tools/call 'crash': it answered HTTP 500" })
    expect(JSON.stringify(body)).not.toContain('password authentication')
  })

  it('answers a 2026-07-28 client in-band with the same code and data', async () => {
    const reply = await new ModernRaw(gw.url).request('tools/call', { name: 'flaky__busy', arguments: {} })
    expect(reply.status).toBe(200)
    expect(reply.body.error).toEqual({
      code: rpcOf('GW_ERR_UPSTREAM_OVERLOADED'),
      message: "upstream 'flaky' refused tools/call 'busy' for now (it answered HTTP 503: unavailable or overloaded); try again later",
      data: { code: 'GW_ERR_UPSTREAM_OVERLOADED', retryAfter: 7 },
    })
  })
})
