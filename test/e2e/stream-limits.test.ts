import { once } from 'node:events'
import { connect, type Socket } from 'node:net'
import { setTimeout as delay } from 'node:timers/promises'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { fetch as undiciFetch } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { logFingerprint } from '../../src/observability/logger.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { RawSession } from '../helpers/raw-session.ts'
import { readSse } from '../helpers/sse.ts'
import { startStatelessUpstream, type StatelessUpstream } from '../helpers/stateless-upstream.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const LIMIT = 3
const TOKENS = { alice: 'alice-stream-token-0123', bob: 'bob-stream-token-45678' }
const ALICE = { authorization: `Bearer ${TOKENS.alice}` }
const BOB = { authorization: `Bearer ${TOKENS.bob}` }
const STALL_MS = 500

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

/**
 * An HTTP MCP server (v1 SDK, stateless) with `hold(ms)`, which just waits, and `flood(count, bytes,
 * everyMs)`, which sends `count` logging notifications of `bytes` each, one every `everyMs`.
 */
/** Notifications the flood tool has sent so far, in every run. */
let floodSent = 0

async function startFloodUpstream (): Promise<StatelessUpstream> {
  const build = (): McpServer => {
    const server = new McpServer({ name: 'flood', version: '1.0.0' }, { capabilities: { logging: {} } })
    server.registerTool('hold', { description: 'waits ms milliseconds', inputSchema: { ms: z.number() } }, async ({ ms }, extra) => {
      await delay(ms, undefined, { signal: extra.signal }).catch(() => {})
      return { content: [{ type: 'text', text: 'held' }] }
    })
    server.registerTool('flood', {
      description: 'sends count logging notifications of bytes each',
      inputSchema: { count: z.number(), bytes: z.number(), everyMs: z.number() },
    }, async ({ count, bytes, everyMs }, extra) => {
      const data = 'x'.repeat(bytes)
      for (let i = 0; i < count && !extra.signal.aborted; i++) {
        await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: { i, data } } })
        floodSent++
        await delay(everyMs)
      }
      return { content: [{ type: 'text', text: `sent ${count}` }] }
    })
    return server
  }
  return await startStatelessUpstream(build)
}

async function gatewayOver (upstreamUrl: string, limits: Json, server: Json = {}): Promise<RunningGateway> {
  return await startGateway({
    upstreams: [{ name: 'up', transport: 'streamable-http', url: upstreamUrl, era: 'legacy' }],
    auth: { tokens: [{ principal: 'alice', sha256: sha256Hex(TOKENS.alice) }, { principal: 'bob', sha256: sha256Hex(TOKENS.bob) }] },
    tasks: { pollInterval: '50ms' },
    limits,
    server: { shutdownGrace: '100ms', ...server },
  })
}

/** The answer to an exchange: an event stream (its first event read, the rest left unread) or a JSON body. */
interface Answer {
  status: number
  body: Json | undefined
  close (): void
}

async function answer (res: Awaited<ReturnType<typeof undiciFetch>>, controller: AbortController): Promise<Answer> {
  // The priming event proves the gateway holds the stream.
  if ((res.headers.get('content-type') ?? '').includes('text/event-stream')) await readSse(res.body as ReadableStream<Uint8Array>).next()
  else return { status: res.status, body: await res.json() as Json, close: () => controller.abort() }
  return { status: res.status, body: undefined, close: () => controller.abort() }
}

async function getStream (session: RawSession, auth: Record<string, string>): Promise<Answer> {
  const controller = new AbortController()
  const res = await undiciFetch(session.url, { signal: controller.signal, headers: { accept: 'text/event-stream', 'mcp-session-id': session.sessionId, ...auth } })
  return await answer(res, controller)
}

async function taskResultWait (session: RawSession, taskId: string, id: number): Promise<Answer> {
  const controller = new AbortController()
  return await answer(await session.post({ jsonrpc: '2.0', id, method: 'tasks/result', params: { taskId } }, { signal: controller.signal }), controller)
}

async function listen (client: ModernRaw, auth: Record<string, string>, id: string): Promise<Answer> {
  const controller = new AbortController()
  const res = await undiciFetch(client.url, {
    method: 'POST',
    signal: controller.signal,
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'subscriptions/listen', ...auth },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'subscriptions/listen', params: client.envelope({ notifications: { toolsListChanged: true } }) }),
  })
  return await answer(res, controller)
}

/**
 * Retries `open` until the gateway has seen a stream close and accepts another one: the close reaches the gateway a
 * moment after the client makes it, an event it tells nobody of. A refused attempt holds no stream.
 */
async function acceptedAgain (open: () => Promise<Answer>): Promise<Answer> {
  let last: Answer | undefined
  return await until('the gateway to accept a stream again after one closed', async () => {
    last = await open()
    return last.status !== 429 ? last : undefined
  }, { describeLast: () => `: last answered HTTP ${last?.status}` })
}

function expectRefused (refused: Answer, id: string | number | null): void {
  expect(refused.status).toBe(429)
  expect(refused.body).toMatchObject({ jsonrpc: '2.0', id, error: { code: -32058, message: expect.stringContaining(`already holds ${LIMIT} open SSE streams`) } })
}

async function startTask (session: RawSession, tool: string, args: Json): Promise<string> {
  const response = await session.request('tools/call', { name: `up__${tool}`, arguments: args, task: { ttl: 60_000 } })
  const taskId = ((response.result as Json | undefined)?.task as Json | undefined)?.taskId
  if (typeof taskId !== 'string') throw new Error(`no task created: ${JSON.stringify(response)}`)
  return taskId
}

/** Settles as `promise` does, or rejects after `ms`. */
async function within<T> (ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(new Error(`${what}: not within ${ms}ms`)), ms) })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * A GET stream over a raw socket that reads the response head and the priming event, then nothing
 * more; with the gateway's end of that connection.
 */
async function unreadGetStream (
  gw: RunningGateway,
  session: RawSession,
  auth: Record<string, string>,
): Promise<{ socket: Socket, serverSide: Socket, streamId: string }> {
  const { hostname, port } = new URL(gw.base)
  const server = gw.gateway.app.server
  const accepted: Socket[] = []
  const onConnection = (s: Socket): void => { accepted.push(s) }
  server.on('connection', onConnection)
  const socket = connect(Number(port), hostname)
  await once(socket, 'connect')
  const serverSide = accepted.find((s) => s.remotePort === socket.localPort) ??
    await new Promise<Socket>((resolve) => server.on('connection', (s: Socket) => { if (s.remotePort === socket.localPort) resolve(s) }))
  server.off('connection', onConnection)
  socket.write(`GET /mcp HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAccept: text/event-stream\r\nAuthorization: ${auth.authorization}\r\nMcp-Session-Id: ${session.sessionId}\r\n\r\n`)
  // A listener, not an iterator: leaving an iterator early destroys the socket.
  const head = await within(5000, 'the GET stream head', new Promise<string>((resolve) => {
    let text = ''
    const onData = (chunk: Buffer): void => {
      text += chunk.toString('utf8')
      if (!/id: [^\n]+:0\n/.test(text) && !(text.includes('\r\n\r\n') && !text.startsWith('HTTP/1.1 200'))) return
      socket.off('data', onData)
      socket.pause()
      resolve(text)
    }
    socket.on('data', onData)
  }))
  const streamId = /id: ([^\n]+):0\n/.exec(head)?.[1]
  if (!head.startsWith('HTTP/1.1 200') || streamId === undefined) throw new Error(`no event stream: ${head}`)
  return { socket, serverSide, streamId }
}

describe('SSE streams per session (limits.streamsPerSession)', () => {
  let upstream: Awaited<ReturnType<typeof startFloodUpstream>>
  let gw: RunningGateway
  const open: Answer[] = []

  beforeAll(async () => {
    upstream = await startFloodUpstream()
    gw = await gatewayOver(upstream.url, { streamsPerSession: LIMIT })
  })

  afterAll(async () => {
    for (const stream of open) stream.close()
    await gw?.close()
    await upstream?.close()
  })

  it('refuses a GET stream or tasks/result wait beyond the limit with 429 and -32058, and accepts again after one closes', async () => {
    const session = await RawSession.open(gw.url, {}, ALICE)
    const taskId = await startTask(session, 'hold', { ms: 60_000 })
    const first = await getStream(session, ALICE)
    open.push(first, await getStream(session, ALICE), await taskResultWait(session, taskId, 101))
    expect(open.map((s) => s.status)).toEqual([200, 200, 200])

    expectRefused(await getStream(session, ALICE), null)
    expectRefused(await taskResultWait(session, taskId, 102), 102)
    // A response that only switches to SSE to carry what its request sends is not counted.
    const streamed = await session.request('tools/call', { name: 'up__flood', arguments: { count: 3, bytes: 10, everyMs: 0 } })
    expect(streamed).toMatchObject({ result: { content: [{ text: 'sent 3' }] } })

    const other = await RawSession.open(gw.url, {}, ALICE)
    const elsewhere = await getStream(other, ALICE)
    open.push(elsewhere)
    expect(elsewhere.status).toBe(200)

    first.close()
    const again = await acceptedAgain(() => taskResultWait(session, taskId, 103))
    open.push(again)
    expect(again.status).toBe(200)
    expectRefused(await getStream(session, ALICE), null)
  })

  it('limits modern subscriptions/listen streams per principal', async () => {
    const alice = new ModernRaw(gw.url, {}, ALICE)
    const listens = [await listen(alice, ALICE, 'a1'), await listen(alice, ALICE, 'a2'), await listen(alice, ALICE, 'a3')]
    open.push(...listens)
    expect(listens.map((s) => s.status)).toEqual([200, 200, 200])
    expectRefused(await listen(alice, ALICE, 'a4'), 'a4')

    const bob = await listen(new ModernRaw(gw.url, {}, BOB), BOB, 'b1')
    open.push(bob)
    expect(bob.status).toBe(200)
    // The pseudo-session of a principal is not a legacy session: alice's legacy sessions are not affected.
    const legacy = await getStream(await RawSession.open(gw.url, {}, ALICE), ALICE)
    open.push(legacy)
    expect(legacy.status).toBe(200)

    listens[0]!.close()
    const again = await acceptedAgain(() => listen(alice, ALICE, 'a5'))
    open.push(again)
    expect(again.status).toBe(200)
  })
})

describe('SSE streams whose client stops reading (limits.streamStallTimeout, streamBufferBytes)', () => {
  let upstream: Awaited<ReturnType<typeof startFloodUpstream>>

  beforeAll(async () => {
    upstream = await startFloodUpstream()
  })

  afterAll(async () => {
    await upstream?.close()
  })

  /** Floods a stalled GET stream until the gateway closes it; returns what the gateway logged about it. */
  async function floodUntilClosed (
    gw: RunningGateway,
    session: RawSession,
  ): Promise<{ log: Json, streamId: string, socket: Socket, taskId: string }> {
    const { socket, serverSide, streamId } = await unreadGetStream(gw, session, ALICE)
    const closed = once(serverSide, 'close')
    // 8 KB every 2 ms, far more than the socket buffers of a loopback connection take in a few seconds.
    const taskId = await startTask(session, 'flood', { count: 5000, bytes: 8192, everyMs: 2 })
    await within(15_000, 'the gateway closing the stalled stream', closed)
    const log = gw.logs().find((line) => line.msg === 'closed an SSE stream whose client stopped reading it' && line.sessionId === logFingerprint(session.sessionId))
    expect(log).toBeDefined()
    return { log: log!, streamId, socket, taskId }
  }

  it('closes a GET stream nobody reads within the stall timeout, keeps memory bounded, and lets the session open a new one', async () => {
    // Keep-alive comments every 50 ms must not keep the stalled stream alive.
    const gw = await gatewayOver(upstream.url, { streamStallTimeout: `${STALL_MS}ms` }, { sseKeepAlive: '50ms' })
    try {
      const session = await RawSession.open(gw.url, {}, ALICE)
      gc()
      const heapBefore = process.memoryUsage().heapUsed
      const { log, streamId, socket, taskId } = await floodUntilClosed(gw, session)
      expect(log).toMatchObject({ level: 40, reason: `nothing was read for ${STALL_MS}ms` })
      expect(log.unreadBytes).toBeLessThan(gw.config.limits.streamBufferBytes)

      // The client sees its connection reset as soon as it reads again.
      const clientClosed = once(socket, 'close')
      socket.on('error', () => {})
      socket.resume()
      await within(5000, 'the client seeing the connection closed', clientClosed)

      // The flood goes on with no stream to carry it (another 2 MB): nothing piles up in the gateway.
      const sentBefore = floodSent
      await until('the flood to send 250 more notifications', () => floodSent >= sentBefore + 250 || undefined)
      gc()
      const heapAfter = process.memoryUsage().heapUsed
      expect(heapAfter - heapBefore).toBeLessThan(16 * 1024 * 1024)
      await session.request('tasks/cancel', { taskId })

      // Still serving: other sessions, and this one, whose stream is resumable from what it kept.
      const other = await RawSession.open(gw.url, {}, BOB)
      expect(await other.request('tools/call', { name: 'up__hold', arguments: { ms: 0 } })).toMatchObject({ result: { content: [{ text: 'held' }] } })
      const controller = new AbortController()
      const fresh = await getStream(session, ALICE)
      fresh.close()
      expect(fresh.status).toBe(200)
      const resumed = await undiciFetch(gw.url, { signal: controller.signal, headers: { accept: 'text/event-stream', 'mcp-session-id': session.sessionId, 'last-event-id': `${streamId}:0`, ...ALICE } })
      let replayed: Json | undefined
      for await (const event of readSse(resumed.body as ReadableStream<Uint8Array>)) {
        replayed = event.data === '' ? undefined : JSON.parse(event.data) as Json
        if (replayed?.method === 'notifications/message') break
      }
      controller.abort()
      expect(replayed).toMatchObject({ method: 'notifications/message', params: { _meta: { 'io.modelcontextprotocol/related-task': { taskId } } } })
    } finally {
      await gw.close()
    }
  })

  it('closes a stream at once when more than streamBufferBytes wait unread', async () => {
    const gw = await gatewayOver(upstream.url, { streamStallTimeout: '1h', streamBufferBytes: '512kb' })
    try {
      const session = await RawSession.open(gw.url, {}, ALICE)
      const { log, socket, taskId } = await floodUntilClosed(gw, session)
      socket.destroy()
      expect(log).toMatchObject({ reason: 'more than 524288 bytes waited unread' })
      await session.request('tasks/cancel', { taskId })
      const fresh = await getStream(session, ALICE)
      fresh.close()
      expect(fresh.status).toBe(200)
    } finally {
      await gw.close()
    }
  })
})
