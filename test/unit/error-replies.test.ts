// How an error ends an HTTP exchange: the status of its table row, a JSON-RPC (or admin API) body, Retry-After
// when the error knows when to try again, and the headers the exchange adds; unknown errors say nothing.
import { describe, expect, it } from 'vitest'
import { errorResponse, httpErrorReply } from '../../src/wire/error-replies.ts'
import { GatewayError, RpcError } from '../../src/errors.ts'
import { RateLimitError } from '../../src/limits/rate-limiter.ts'

describe('httpErrorReply', () => {
  it('answers with the error\'s status and a JSON-RPC error response for the request', () => {
    const reply = httpErrorReply(new GatewayError('GW_ERR_SESSION_NOT_FOUND'), { id: 7 })
    expect(reply.status).toBe(404)
    expect(JSON.parse(reply.body)).toEqual({ jsonrpc: '2.0', id: 7, error: { code: -32001, message: 'Session not found: it expired or was deleted; initialize a new session', data: { code: 'GW_ERR_SESSION_NOT_FOUND' } } })
    expect(reply.headers).toEqual({ 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(reply.body)) })
  })

  it('answers id null when the request could not be read, and keeps the status a caller asks for', () => {
    const err = new GatewayError('GW_ERR_HEADER_MISMATCH', ['Mcp-Method says tools/list'])
    expect(JSON.parse(httpErrorReply(err).body).id).toBeNull()
    expect(httpErrorReply(new RpcError(-32021, 'needs sampling'), { id: 'a', status: 400 }).status).toBe(400)
  })

  it('adds Retry-After from the error: a rate limit\'s wait, the store\'s table row, an upstream\'s request', () => {
    expect(httpErrorReply(new RateLimitError('GW_ERR_RATE_LIMITED', ['10 per 1 s', 'requestsPerIp', 3], 3)).headers['retry-after']).toBe('3')
    expect(httpErrorReply(new GatewayError('GW_ERR_STORE_UNAVAILABLE', ['connection refused'])).headers['retry-after']).toBe('1')
    const overloaded = new GatewayError('GW_ERR_UPSTREAM_OVERLOADED', ['search', 'tools/call', 503], { retryAfter: 20 })
    expect(httpErrorReply(overloaded)).toMatchObject({ status: 503, headers: { 'retry-after': '20' } })
    expect(httpErrorReply(new GatewayError('GW_ERR_SHUTTING_DOWN')).headers).not.toHaveProperty('retry-after')
  })

  it('adds the exchange\'s own headers', () => {
    const reply = httpErrorReply(new GatewayError('GW_ERR_AUTH_MISSING'), { headers: { 'www-authenticate': 'Bearer realm="mcp"', 'mcp-session-id': 's1' } })
    expect(reply.status).toBe(401)
    expect(reply.headers).toMatchObject({ 'www-authenticate': 'Bearer realm="mcp"', 'mcp-session-id': 's1', 'content-type': 'application/json' })
  })

  it('answers an unexpected failure with 500 and no word of what it said', () => {
    const reply = httpErrorReply(Object.assign(new Error('password=hunter2'), { statusCode: 418, code: 'EACCES' }), { id: 1 })
    expect(reply.status).toBe(500)
    expect(JSON.parse(reply.body).error).toEqual({ code: -32603, message: 'internal gateway error: unexpected failure', data: { code: 'GW_ERR_INTERNAL' } })
    expect(reply.body).not.toContain('hunter2')
  })

  it('writes the admin API\'s form: the stable code and the message', () => {
    const reply = httpErrorReply(new GatewayError('GW_ERR_ADMIN_TASK_NOT_FOUND', ['t1']), { form: 'admin' })
    expect(reply.status).toBe(404)
    expect(JSON.parse(reply.body)).toEqual({ error: { code: 'GW_ERR_ADMIN_TASK_NOT_FOUND', message: "Not Found: task 't1' does not exist or has passed its TTL" } })
    expect(JSON.parse(httpErrorReply(new Error('secret'), { form: 'admin' }).body)).toEqual({ error: { code: 'GW_ERR_INTERNAL', message: 'internal gateway error: unexpected failure' } })
  })
})

describe('errorResponse', () => {
  it('is the JSON-RPC response that answers a request with the error, data included', () => {
    const err = new GatewayError('GW_ERR_UPSTREAM_OVERLOADED', ['search', "tools/call 'find'", 429], { data: { retryAfter: 5 } })
    expect(errorResponse('req-1', err)).toEqual({
      jsonrpc: '2.0',
      id: 'req-1',
      error: { code: -32061, message: "upstream 'search' refused tools/call 'find' for now (it answered HTTP 429: unavailable or overloaded); try again later", data: { code: 'GW_ERR_UPSTREAM_OVERLOADED', retryAfter: 5 } },
    })
  })
})
