import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'

export interface StatelessUpstream {
  url: string
  close (): Promise<void>
}

/**
 * An HTTP MCP upstream built with the v1 SDK in stateless mode: every POST gets a fresh server from
 * `build`; GET is 405 (no standalone stream). `onRequest` sees every request first (to record headers).
 */
export async function startStatelessUpstream (
  build: () => McpServer,
  onRequest?: (req: IncomingMessage) => void,
): Promise<StatelessUpstream> {
  const http: Server = createServer((req, res) => {
    onRequest?.(req)
    if (req.method !== 'POST') {
      res.writeHead(405).end()
      return
    }
    const server = build()
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })
    res.on('close', () => { void transport.close(); void server.close() })
    server.connect(transport).then(() => transport.handleRequest(req, res)).catch(() => res.destroy())
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    close: () => new Promise((resolve) => { http.closeAllConnections(); http.close(() => resolve()) }),
  }
}
