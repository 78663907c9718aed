import { randomUUID } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js'
import { z } from 'zod'
import { createEventStore } from '../fixtures/event-store.ts'

/** One HTTP request the upstream received, as it arrived. */
export interface SeenRequest {
  method: string
  /** The JSON-RPC method of a POST (undefined for a response or a batch). */
  rpc: string | undefined
  sessionId: string | undefined
  lastEventId: string | undefined
  /** performance.now() when it arrived. */
  at: number
  /** Resolves when its connection closed. */
  ended: Promise<void>
}

/** A call's response stream the upstream closed before answering: when, and the event the client was primed with. */
export interface ClosedStream {
  sessionId: string
  at: number
}

export interface PollingUpstreamOptions {
  /** The `retry:` of every stream's priming event. */
  retryMs: number
  /** Answers every GET that carries Last-Event-ID with this status instead of replaying (a server that refuses to resume). */
  refuseResume?: number
}

export interface PollingUpstream {
  url: string
  requests: SeenRequest[]
  closed: ClosedStream[]
  close (): Promise<void>
}

/**
 * A sessionful Streamable HTTP MCP server (v1 SDK) that polls as the conformance suite's reference server does
 * (SSE polling, 2025-11-25 transport): every stream opens with a priming event (`id`, `retry: retryMs`, empty
 * data), and `test_reconnection` closes its call's stream right after it and answers at once; the answer is
 * stored and sent when the client reconnects with GET + Last-Event-ID. `poll_steps(steps)` closes its call's
 * stream `steps` times, each time waiting until the client has reconnected, sending a progress notification
 * on the new stream, and answers live on the last one. `hold` closes its stream and answers only when cancelled.
 */
export async function startPollingUpstream (options: PollingUpstreamOptions): Promise<PollingUpstream> {
  const transports = new Map<string, StreamableHTTPServerTransport>()
  const requests: SeenRequest[] = []
  const closed: ClosedStream[] = []
  /** Resolved when a GET with Last-Event-ID was answered with its stream (the replayed stream now carries what follows). */
  const resumed: Array<() => void> = []

  const build = (transport: () => StreamableHTTPServerTransport): McpServer => {
    const server = new McpServer({ name: 'polling-upstream', version: '1.0.0' }, { capabilities: { tools: {} } })
    const closeStream = (requestId: string | number): void => {
      closed.push({ sessionId: transport().sessionId!, at: performance.now() })
      transport().closeSSEStream(requestId)
    }
    server.registerTool('test_reconnection', { description: 'closes its stream mid-call; the answer waits for the reconnect' }, async (extra) => {
      closeStream(extra.requestId)
      return { content: [{ type: 'text', text: 'Reconnection test completed successfully.' }] }
    })
    server.registerTool('poll_steps', {
      description: 'closes its stream `steps` times, with progress on each new stream, then answers',
      inputSchema: { steps: z.number().int().min(1) },
    }, async ({ steps }, extra) => {
      const token = extra._meta?.progressToken
      for (let step = 1; step <= steps; step++) {
        const reconnected = new Promise<void>((resolve) => { resumed.push(resolve) })
        closeStream(extra.requestId)
        await reconnected
        if (token !== undefined) await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: step, total: steps } })
      }
      return { content: [{ type: 'text', text: `answered after ${steps} reconnects` }] }
    })
    server.registerTool('hold', { description: 'closes its stream and never answers' }, async (extra) => {
      closeStream(extra.requestId)
      await new Promise((resolve) => { extra.signal.addEventListener('abort', resolve, { once: true }) })
      return { content: [{ type: 'text', text: 'cancelled' }] }
    })
    return server
  }

  const open = async (req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> => {
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: createEventStore(),
      retryInterval: options.retryMs,
      onsessioninitialized: (id) => { transports.set(id, transport) },
    })
    transport.onclose = () => { if (transport.sessionId !== undefined) transports.delete(transport.sessionId) }
    await build(() => transport).connect(transport)
    await transport.handleRequest(req, res, body)
  }

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const header = (name: string): string | undefined => {
      const value = req.headers[name]
      return Array.isArray(value) ? value[0] : value
    }
    const ended = new Promise<void>((resolve) => { res.once('close', () => { resolve() }) })
    const seen: SeenRequest = {
      method: req.method ?? '',
      rpc: undefined,
      sessionId: header('mcp-session-id'),
      lastEventId: header('last-event-id'),
      at: performance.now(),
      ended,
    }
    requests.push(seen)
    const transport = seen.sessionId === undefined ? undefined : transports.get(seen.sessionId)
    if (req.method === 'POST') {
      const chunks: Buffer[] = []
      for await (const chunk of req) chunks.push(chunk as Buffer)
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown
      seen.rpc = (body as { method?: string }).method
      if (transport !== undefined) return await transport.handleRequest(req, res, body)
      if (seen.sessionId === undefined && isInitializeRequest(body)) return await open(req, res, body)
      res.writeHead(seen.sessionId === undefined ? 400 : 404, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"no such session"}}')
      return
    }
    if (transport === undefined) {
      res.writeHead(404).end()
      return
    }
    if (req.method === 'GET' && seen.lastEventId !== undefined) {
      if (options.refuseResume !== undefined) {
        res.writeHead(options.refuseResume, { 'content-type': 'text/plain' }).end('resuming is refused here')
        return
      }
      // The replayed stream is registered for what the call sends next once its headers are written.
      const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => ServerResponse
      res.writeHead = ((...args: unknown[]) => {
        const written = writeHead(...args)
        for (const resolve of resumed.splice(0)) setImmediate(resolve)
        return written
      }) as typeof res.writeHead
    }
    await transport.handleRequest(req, res)
  }

  const http: Server = createServer((req, res) => {
    handle(req, res).catch(() => { if (!res.headersSent) res.writeHead(500).end(); else res.end() })
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    requests,
    closed,
    close: async () => {
      for (const transport of transports.values()) await transport.close().catch(() => {})
      http.closeAllConnections()
      await new Promise<void>((resolve) => http.close(() => resolve()))
    },
  }
}
