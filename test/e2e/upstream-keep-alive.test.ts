// The keep-alive pool of an HTTP upstream closes a socket it left idle before the upstream would: a request sent on
// a socket the upstream is closing at that moment fails with ECONNRESET, and MCP servers on Node.js close theirs
// after 5 s without a Keep-Alive header that would say so.
import { createServer, Server, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseConfigText } from '../../src/config/load.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { until } from '../helpers/until.ts'

interface CountingUpstream {
  url: string
  /** Sockets the gateway ended itself (the upstream never ends one: it keeps idle sockets for a minute). */
  endedByGateway: number
  close (): Promise<void>
}

/** A stateless MCP server over Streamable HTTP (the SDK's, answering on SSE) offering `echo`, counting how its sockets end. */
async function startCountingUpstream (): Promise<CountingUpstream> {
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const server = new McpServer({ name: 'keep-alive', version: '1.0.0' })
    server.registerTool('echo', { description: 'answers ok' }, async () => ({ content: [{ type: 'text', text: 'ok' }] }))
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })
    res.on('close', () => { void transport.close(); void server.close() })
    await server.connect(transport)
    await transport.handleRequest(req, res)
  }
  const http = createServer((req, res) => { handle(req, res).catch(() => res.destroy()) })
  http.keepAliveTimeout = 60_000
  http.on('connection', (socket) => { socket.on('end', () => { upstream.endedByGateway++ }) })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  const upstream: CountingUpstream = {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    endedByGateway: 0,
    close: () => new Promise((resolve) => { http.close(() => resolve()); http.closeAllConnections() }),
  }
  return upstream
}

describe('the HTTP connection pool of an upstream', () => {
  let upstream: CountingUpstream
  let gw: RunningGateway
  let client: Client

  beforeAll(async () => {
    upstream = await startCountingUpstream()
    gw = await startGateway({
      upstreams: [{ name: 'k', transport: 'streamable-http', url: upstream.url, era: 'legacy', keepAliveTimeout: '300ms' }],
    })
    client = await connectV1(gw.url)
  })

  afterAll(async () => {
    await client?.close()
    await gw?.close()
    await upstream?.close()
  })

  it('closes a socket it left idle for keepAliveTimeout itself, and opens a new one for the next call', async () => {
    expect(textOf(await client.callTool({ name: 'k__echo', arguments: {} }))).toBe('ok')
    await until('the gateway to close an idle socket to the upstream', () => upstream.endedByGateway > 0 ? true : undefined)
    expect(textOf(await client.callTool({ name: 'k__echo', arguments: {} }))).toBe('ok')
  })

  it('keeps an idle socket for less time than a Node.js server keeps its own, by default', () => {
    const config = parseConfigText('upstreams:\n  - { name: k, transport: streamable-http, url: "http://127.0.0.1:1/mcp" }\n')
    const http = config.upstreams[0]!
    expect(http.transport === 'stdio' ? undefined : http.keepAliveTimeout).toBeLessThan(new Server().keepAliveTimeout)
  })
})
