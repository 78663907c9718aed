// The table from what an upstream request threw to the error a client sees: HTTP statuses and network failures
// by their code get stable gateway codes, keep their cause, and never carry what the upstream wrote.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { ProtocolError, SdkError, SdkErrorCode } from '@modelcontextprotocol/client'
import { errors as undiciErrors, request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mapUpstreamError } from '../../src/upstream/upstream-errors.ts'
import { parseConfig } from '../../src/config/load.ts'
import type { HttpUpstreamConfig } from '../../src/config/schema.ts'
import { ERRORS, GatewayError, RpcError, UpstreamHttpError, type ErrorCode } from '../../src/errors.ts'
import { createUpstreamHttp, parseRetryAfter } from '../../src/upstream/http-dispatcher.ts'
import { limitFor, ResponseTooLarge, tooLargeResponse } from '../../src/upstream/response-limit.ts'

const SECRET = 'Traceback: db password hunter2 at /srv/app/settings.py'

function mapped (err: unknown): GatewayError {
  const result = mapUpstreamError(err, 'search', "tools/call 'find'", 5000)
  expect(result).toBeInstanceOf(GatewayError)
  return result as GatewayError
}

function expectCode (err: GatewayError, code: ErrorCode): void {
  expect({ code: err.code, status: err.statusCode, rpc: err.rpcCode }).toEqual({ code, status: ERRORS[code].status, rpc: ERRORS[code].rpc })
}

/** A port nothing listens on: bound, then released. */
async function closedPort (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

describe('mapUpstreamError: HTTP error statuses', () => {
  it('maps 500 (and any other status) to GW_ERR_UPSTREAM_FAILED naming the status, with the body only in the cause', () => {
    for (const status of [500, 502, 404, 401]) {
      const cause = new UpstreamHttpError(status, SECRET)
      const err = mapped(cause)
      expectCode(err, 'GW_ERR_UPSTREAM_FAILED')
      expect(err.message).toBe(`upstream 'search' failed on tools/call 'find': it answered HTTP ${status}`)
      expect(err.cause).toBe(cause)
      expect((cause.cause as Error).message).toContain('hunter2')
      expect(err.data).toBeUndefined()
    }
  })

  it('maps 503 and 429 to GW_ERR_UPSTREAM_OVERLOADED and passes on the wait the upstream asked for', () => {
    const busy = mapped(new UpstreamHttpError(503, SECRET, 7))
    expectCode(busy, 'GW_ERR_UPSTREAM_OVERLOADED')
    expect(busy.retryAfter).toBe(7)
    expect(busy.data).toEqual({ retryAfter: 7 })
    expect(busy.message).not.toContain('hunter2')
    const throttled = mapped(new UpstreamHttpError(429, ''))
    expectCode(throttled, 'GW_ERR_UPSTREAM_OVERLOADED')
    expect(throttled.retryAfter).toBeUndefined()
    expect(throttled.data).toBeUndefined()
  })
})

describe('mapUpstreamError: network failures by code', () => {
  it('maps undici\'s connect, headers and body timeouts to GW_ERR_UPSTREAM_TIMEOUT', () => {
    const timeouts = [new undiciErrors.ConnectTimeoutError(), new undiciErrors.HeadersTimeoutError(), new undiciErrors.BodyTimeoutError()]
    for (const cause of timeouts) {
      const err = mapped(cause)
      expectCode(err, 'GW_ERR_UPSTREAM_TIMEOUT')
      expect(err.message).toContain(cause.code)
      expect(err.cause).toBe(cause)
    }
  })

  it('maps a refused connection to GW_ERR_UPSTREAM_UNREACHABLE, also when fetch wraps it', async () => {
    const port = await closedPort()
    const refused: unknown = await request(`http://127.0.0.1:${port}/mcp`).then(() => undefined, (err: unknown) => err)
    expect(refused).toMatchObject({ code: 'ECONNREFUSED' })
    const err = mapped(refused)
    expectCode(err, 'GW_ERR_UPSTREAM_UNREACHABLE')
    expect(err.message).toBe("upstream 'search' cannot be reached for tools/call 'find' (ECONNREFUSED); the request was not sent")
    expect(err.cause).toBe(refused)
    const wrapped = new TypeError('fetch failed', { cause: refused })
    expectCode(mapped(wrapped), 'GW_ERR_UPSTREAM_UNREACHABLE')
  })

  it('maps a host name that does not resolve to GW_ERR_UPSTREAM_UNREACHABLE', () => {
    for (const code of ['ENOTFOUND', 'EAI_AGAIN']) {
      expectCode(mapped(Object.assign(new Error(`getaddrinfo ${code} upstream.internal`), { code })), 'GW_ERR_UPSTREAM_UNREACHABLE')
    }
  })

  it('maps a connection that broke under the request to GW_ERR_UPSTREAM_CONNECTION_LOST', () => {
    const causes = [new undiciErrors.SocketError('other side closed'), new undiciErrors.ClientClosedError(), Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })]
    for (const cause of causes) {
      const err = mapped(cause)
      expectCode(err, 'GW_ERR_UPSTREAM_CONNECTION_LOST')
      expect(err.cause).toBe(cause)
    }
  })

  it('keeps the SDK\'s timeouts and closed connections, the upstream\'s JSON-RPC errors and cancellation as they were', () => {
    expect(mapped(new SdkError(SdkErrorCode.RequestTimeout, 'Request timed out')).message).toBe("upstream 'search' did not answer tools/call 'find' within 5000ms")
    expectCode(mapped(new SdkError(SdkErrorCode.ConnectionClosed, 'Connection closed')), 'GW_ERR_UPSTREAM_CONNECTION_LOST')
    // An SDK v1 server starts its messages with "MCP error <code>: ": the client sees that too, as it does directly.
    const relayed = mapUpstreamError(new ProtocolError(-32042, 'MCP error -32042: no such file', { path: 'x' }), 'search', 'tools/call', 5000)
    expect(relayed).toEqual(new RpcError(-32042, 'MCP error -32042: no such file', { path: 'x' }))
    const controller = new AbortController()
    controller.abort(new Error('the client went away'))
    expect(mapUpstreamError(new undiciErrors.SocketError('other side closed'), 'search', 'tools/call', 5000, controller.signal)).toMatchObject({ code: 'GW_ERR_REQUEST_CANCELLED' })
    expectCode(mapped(new Error('something else')), 'GW_ERR_UPSTREAM_FAILED')
  })
})

describe('parseRetryAfter', () => {
  it('reads seconds and HTTP dates, and ignores anything else', () => {
    const now = Date.parse('2026-01-01T00:00:00Z')
    expect(parseRetryAfter('7', now)).toBe(7)
    expect(parseRetryAfter(['30'], now)).toBe(30)
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:01:00 GMT', now)).toBe(60)
    expect(parseRetryAfter('Wed, 31 Dec 2025 23:00:00 GMT', now)).toBe(0)
    expect(parseRetryAfter('soon', now)).toBeUndefined()
    expect(parseRetryAfter('-5', now)).toBeUndefined()
    expect(parseRetryAfter(undefined, now)).toBeUndefined()
    expect(parseRetryAfter(null, now)).toBeUndefined()
  })
})

describe('the SSE transport\'s fetch', () => {
  let server: Server
  let url: string

  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.method === 'POST') res.writeHead(503, { 'retry-after': '12', 'content-type': 'text/plain' }).end(SECRET.repeat(20))
      else res.writeHead(200, { 'content-type': 'text/plain' }).end('fine')
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/messages`
  })

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve))
  })

  it('fails a POST the upstream answers with an error status with an UpstreamHttpError that names the status only', async () => {
    const config = parseConfig({ upstreams: [{ name: 'legacy', transport: 'sse', url }] }, {}).upstreams[0] as HttpUpstreamConfig
    const http = createUpstreamHttp(config)
    try {
      const err: unknown = await http.fetch(url, { method: 'POST', body: '{}' }).then(() => undefined, (e: unknown) => e)
      expect(err).toBeInstanceOf(UpstreamHttpError)
      expect(err).toMatchObject({ status: 503, retryAfter: 12, message: 'the upstream answered HTTP 503' })
      const body = ((err as Error).cause as Error).message
      expect(body).toContain('hunter2')
      expect(body.length).toBeLessThan(1100)
      expect((await http.fetch(url, { method: 'GET' })).status).toBe(200)
    } finally {
      await http.close()
    }
  })
})

describe('mapUpstreamError: answers over their size limit', () => {
  it('names the upstream, the request and the limit: maxResponseBytes, or tasks.maxResultBytes for a task\'s call', () => {
    const limits = { maxResponseBytes: 1 << 20, resultLimitOf: (id: unknown) => id === 7 ? 4096 : undefined }
    const plain = mapped(limitFor(limits, 3).exceeded(2 << 20))
    expectCode(plain, 'GW_ERR_UPSTREAM_RESPONSE_TOO_LARGE')
    expect(plain.message).toBe("upstream 'search' answered tools/call 'find' with more than 1048576 bytes (upstreams[].maxResponseBytes); the answer was not read to its end: ask the tool for less, or raise maxResponseBytes of this upstream")
    expect(plain.cause).toBeInstanceOf(ResponseTooLarge)
    const task = mapped(limitFor(limits, 7).exceeded(8000))
    expectCode(task, 'GW_ERR_TASK_RESULT_TOO_LARGE')
    expect(task.message).toMatch(/result of more than 5120 bytes is over the 4096 bytes a task may store \(tasks\.maxResultBytes\)/)
  })

  it('finds the error again in the error response the SDK was handed, and in nothing an upstream could write', () => {
    const tooLarge = limitFor({ maxResponseBytes: 1024 }, 1).exceeded(2048)
    const response = tooLargeResponse(1, tooLarge) as unknown as { error: { code: number, message: string, data: unknown } }
    const handed = new ProtocolError(response.error.code, response.error.message, response.error.data)
    expectCode(mapped(handed), 'GW_ERR_UPSTREAM_RESPONSE_TOO_LARGE')
    const written = JSON.parse(JSON.stringify(response)) as typeof response
    expect(mapUpstreamError(new ProtocolError(written.error.code, written.error.message, written.error.data), 'search', 'x', 5000)).toBeInstanceOf(RpcError)
  })
})
