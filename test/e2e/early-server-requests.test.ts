import { randomUUID } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { isInitializeRequest, ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { textOf } from '../helpers/clients.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { until } from '../helpers/until.ts'

const ROOT = { uri: 'file:///srv/early', name: 'early' }

/**
 * A Streamable HTTP server (SDK v1) that asks for the client's roots the moment it learns the session is
 * initialized, tied to no request: the SDK sends such a request on the session's standalone GET stream, and
 * drops it when that stream is not open yet. `roots_seen` answers with what it was given.
 */
async function startEagerServer (): Promise<{ url: string, close: () => Promise<void> }> {
  const transports = new Map<string, StreamableHTTPServerTransport>()
  const http: Server = createServer((req, res) => {
    void (async () => {
      const sessionId = req.headers['mcp-session-id'] as string | undefined
      let body: unknown
      if (req.method === 'POST') {
        const chunks: Buffer[] = []
        for await (const chunk of req) chunks.push(chunk as Buffer)
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
      }
      const known = sessionId === undefined ? undefined : transports.get(sessionId)
      if (known !== undefined) return await known.handleRequest(req, res, body)
      if (sessionId !== undefined || !isInitializeRequest(body)) {
        res.writeHead(sessionId === undefined ? 400 : 404, { 'content-type': 'application/json' })
          .end('{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"no such session"}}')
        return
      }
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => { transports.set(id, transport) },
      })
      const server = new McpServer({ name: 'eager-roots', version: '1.0.0' }, { capabilities: { tools: {} } })
      let roots = 'none'
      server.server.oninitialized = () => {
        setImmediate(() => {
          server.server.listRoots().then((r) => { roots = JSON.stringify(r.roots) }, (err: Error) => { roots = `error: ${err.message}` })
        })
      }
      server.registerTool('roots_seen', { description: 'the roots the server was given' }, () => ({ content: [{ type: 'text', text: roots }] }))
      await server.connect(transport)
      await transport.handleRequest(req, res, body)
    })()
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  const { port } = http.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    close: async () => {
      for (const transport of transports.values()) await transport.close()
      http.closeAllConnections()
      await new Promise<void>((resolve) => http.close(() => resolve()))
    },
  }
}

describe('a request a Streamable HTTP upstream sends the moment its session is initialized', () => {
  let upstream: Awaited<ReturnType<typeof startEagerServer>>
  let gw: RunningGateway

  beforeAll(async () => {
    upstream = await startEagerServer()
    gw = await startGateway({ upstreams: [{ name: 'eager', transport: 'streamable-http', url: upstream.url }] })
  })

  afterAll(async () => {
    await gw?.close()
    await upstream?.close()
  })

  it('reaches the client once: the upstream GET stream is open before the server learns of the session', async () => {
    let asked = 0
    const client = new Client({ name: 'roots-client', version: '1.0.0' }, { capabilities: { roots: {} } })
    client.setRequestHandler(ListRootsRequestSchema, () => {
      asked++
      return { roots: [ROOT] }
    })
    await client.connect(new StreamableHTTPClientTransport(new URL(gw.url)))
    try {
      let seen = ''
      await until('the server was given the roots', async () => {
        seen = textOf(await client.callTool({ name: 'eager__roots_seen', arguments: {} }))
        return seen === 'none' ? undefined : seen
      }, { describeLast: () => `: the server has ${seen}` })
      expect(JSON.parse(seen)).toEqual([ROOT])
      expect(asked).toBe(1)
    } finally {
      await client.close()
    }
  })
})
