/**
 * Sessionful Streamable HTTP serving for the demo upstream, on plain
 * `node:http` with only `@modelcontextprotocol/server` (no framework, no
 * `@modelcontextprotocol/node`/hono): each request is bridged to the SDK's
 * web-standard `WebStandardStreamableHTTPServerTransport`.
 *
 * One session = one transport + one fresh demo server. A POST without an
 * `Mcp-Session-Id` header must be `initialize` and opens a session; every
 * other request must carry a known session id (unknown → 404, missing → 400).
 * Sessions end on DELETE, on transport close, or when the HTTP server closes.
 */
import { randomUUID } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import {
  WebStandardStreamableHTTPServerTransport,
  hostHeaderValidationResponse,
  isInitializeRequest,
  localhostAllowedHostnames,
  localhostAllowedOrigins,
  originValidationResponse,
  type McpServer,
} from '@modelcontextprotocol/server'

const MAX_BODY_BYTES = 4 * 1024 * 1024

export interface DemoHttpOptions {
  host: string
  /** 0 picks a free port; the chosen one is in the returned handle. */
  port: number
  /** Endpoint path (default `/mcp`). */
  path?: string
  /** Builds the server for a new session. */
  createServer: () => McpServer
  log: (line: string) => void
}

export interface DemoHttpHandle {
  host: string
  port: number
  url: string
  close: () => Promise<void>
}

interface Session {
  transport: WebStandardStreamableHTTPServerTransport
  server: McpServer
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1', '[::1]'])

export async function startDemoHttpServer (options: DemoHttpOptions): Promise<DemoHttpHandle> {
  const path = options.path ?? '/mcp'
  const { log } = options
  const sessions = new Map<string, Session>()
  const guardHost = LOOPBACK.has(options.host)

  async function openSession (): Promise<Session> {
    const server = options.createServer()
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, session)
        log(`session ${id} opened`)
      },
    })
    const session: Session = { transport, server }
    await server.connect(transport)
    const previousOnclose = server.server.onclose
    server.server.onclose = () => {
      previousOnclose?.()
      if (transport.sessionId !== undefined && sessions.delete(transport.sessionId)) log(`session ${transport.sessionId} closed`)
    }
    return session
  }

  async function handle (req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', `http://${req.headers.host ?? 'localhost'}`)
    if (url.pathname !== path) return sendError(res, 404, -32601, `Not found: use ${path}`)

    const abort = new AbortController()
    res.on('close', () => { abort.abort() })
    const request = new Request(url, { method: req.method ?? 'GET', headers: toHeaders(req), signal: abort.signal })
    if (guardHost) {
      const rejected = hostHeaderValidationResponse(request, localhostAllowedHostnames()) ??
        originValidationResponse(request, localhostAllowedOrigins())
      if (rejected !== undefined) return await writeResponse(res, rejected)
    }

    let body: unknown
    if (req.method === 'POST') {
      const text = await readBody(req)
      if (text === undefined) return sendError(res, 413, -32600, 'Request body too large')
      try {
        body = JSON.parse(text)
      } catch {
        return sendError(res, 400, -32700, 'Parse error: invalid JSON')
      }
    }

    const sessionId = req.headers['mcp-session-id']
    let session: Session | undefined
    if (typeof sessionId === 'string') {
      session = sessions.get(sessionId)
      if (session === undefined) return sendError(res, 404, -32001, 'Session not found')
    } else if (req.method === 'POST' && isInitialize(body)) {
      session = await openSession()
    } else {
      return sendError(res, 400, -32000, 'Bad Request: no valid session id (send initialize first)')
    }

    const response = await session.transport.handleRequest(request, body === undefined ? {} : { parsedBody: body })
    if (session.transport.sessionId === undefined) await session.server.close() // initialize was rejected
    await writeResponse(res, response)
  }

  const http = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      log(`http error: ${error instanceof Error ? error.message : String(error)}`)
      if (!res.headersSent) sendError(res, 500, -32603, 'Internal error')
      else res.destroy()
    })
  })
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject)
    http.listen(options.port, options.host, () => {
      http.off('error', reject)
      resolve()
    })
  })
  const { port } = http.address() as AddressInfo
  const hostInUrl = options.host.includes(':') ? `[${options.host}]` : options.host
  if (!guardHost) log(`warning: bound to ${options.host}; Host/Origin checks are off (only loopback binds are guarded)`)

  return {
    host: options.host,
    port,
    url: `http://${hostInUrl}:${port}${path}`,
    close: async () => {
      const open = [...sessions.values()]
      sessions.clear()
      await Promise.allSettled(open.map(async ({ server }) => { await server.close() }))
      http.closeAllConnections()
      await new Promise<void>((resolve) => { http.close(() => { resolve() }) })
    },
  }
}

function isInitialize (body: unknown): boolean {
  return Array.isArray(body) ? body.some((message) => isInitializeRequest(message)) : isInitializeRequest(body)
}

function toHeaders (req: IncomingMessage): Headers {
  const headers = new Headers()
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item)
  }
  return headers
}

/** Reads the request body as UTF-8, or `undefined` when it exceeds the limit. */
async function readBody (req: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req) {
    const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk))
    size += buffer.length
    if (size > MAX_BODY_BYTES) return undefined
    chunks.push(buffer)
  }
  return Buffer.concat(chunks).toString('utf8')
}

function sendError (res: ServerResponse, status: number, code: number, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }))
}

/** Streams a web `Response` (JSON or SSE) onto a Node response. */
async function writeResponse (res: ServerResponse, response: Response): Promise<void> {
  const headers: Record<string, string> = {}
  response.headers.forEach((value, key) => { headers[key] = value })
  res.writeHead(response.status, headers)
  if (response.body === null) {
    res.end()
    return
  }
  res.flushHeaders()
  const reader = response.body.getReader()
  const cancel = (): void => { reader.cancel().catch(() => {}) }
  res.on('close', cancel)
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      if (!res.write(value)) await drainOrClose(res)
    }
  } catch {
    // The stream was cancelled because the client went away.
  } finally {
    res.off('close', cancel)
    res.end()
  }
}

async function drainOrClose (res: ServerResponse): Promise<void> {
  await new Promise<void>((resolve) => {
    const done = (): void => {
      res.off('drain', done)
      res.off('close', done)
      resolve()
    }
    res.on('drain', done)
    res.on('close', done)
  })
}
