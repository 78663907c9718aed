import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Live } from '../config/live.ts'
import type { ServerConfig } from '../config/schema.ts'
import { GatewayError, errorMessage } from '../errors.ts'
import { sendHttpError, writeHttpError } from '../wire/error-replies.ts'
import { noteCaller } from '../wire/access-notes.ts'
import type { LegacyEndpoint } from '../protocol/2025-11-25/endpoint.ts'
import { ANONYMOUS_CALLER, anonymousAccount, withholding, type Caller } from '../auth/access.ts'
import type { Authenticator } from '../auth/bearer-tokens.ts'
import type { RecentProblems } from '../observability/recent-problems.ts'
import { answeredId, classifyPost, type ClassifiedMessage } from '../wire/classified-message.ts'
import type { ModernEndpoint } from '../protocol/2026-07-28/endpoint.ts'
import type { RateLimiter } from '../limits/rate-limiter.ts'
import { answerOptions, ENDPOINT_METHODS } from './cors.ts'
import { methodLabel, type GatewayMetrics } from '../observability/metrics.ts'
import type { RequestTrace } from '../observability/request-trace.ts'
import type { GatewayTracing } from '../observability/tracing.ts'

/** What the route serves with. The `Live` values follow a reload: each is read per request, never kept. */
export interface McpRouteOptions {
  /** The listener's options as the gateway started (its path and body limit change only at a restart). */
  config: ServerConfig
  legacy: LegacyEndpoint
  modern: ModernEndpoint
  /** Resolves the caller: its principal and what it may use; undefined when auth is off. */
  readonly authenticator: Live<Authenticator | undefined>
  /** With auth off: keep the request's Authorization header for upstreams that forward it (forwardAuthorization). */
  readonly passAuthorization: Live<boolean>
  /** The upstreams a principal has no credential for (upstreams[].credentials): hidden from it, refused by name. */
  readonly withheld?: ((principal: string) => readonly string[]) | undefined
  /** The request rate limits (limits.*); undefined when all are off. */
  readonly limiter: Live<RateLimiter | undefined>
  /** True once shutdown began: new requests are refused with 503. */
  isClosing (): boolean
  /** Where requests and refusals are counted; undefined when metrics are off. */
  metrics?: GatewayMetrics | undefined
  /** Where requests are traced; undefined when tracing is off. */
  tracing?: GatewayTracing | undefined
  /** The refusals and errors the dashboard lists: told who made the request each one ended. */
  problems?: RecentProblems | undefined
}

/** A JSON body's media type, parameters (`; charset=utf-8`) allowed. */
const JSON_TYPE = /^application\/json/i

function accepts (request: FastifyRequest, type: string): boolean {
  const accept = request.headers.accept
  if (accept === undefined || accept === '') return true
  return accept.includes(type) || accept.includes('*/*')
}

/** Maps Fastify's body-parsing failures to JSON-RPC errors with the right HTTP status. */
function bodyError (err: FastifyError, maxBodyBytes: number): GatewayError | undefined {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new GatewayError('GW_ERR_HTTP_BODY_TOO_LARGE', [maxBodyBytes], { cause: err })
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new GatewayError('GW_ERR_HTTP_MEDIA_TYPE', [], { cause: err })
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new GatewayError('GW_ERR_HTTP_PARSE', [errorMessage(err)], { cause: err })
  }
  if (err instanceof SyntaxError || err.statusCode === 400) return new GatewayError('GW_ERR_HTTP_PARSE', [errorMessage(err)], { cause: err })
  return undefined
}

/**
 * A DELETE carries no body, but some clients label the empty one anyway (the Python SDK sends
 * `Content-Type: application/json` with every session close). With no body there is nothing to parse:
 * the label is dropped so that no parser refuses it (an empty JSON body is a parse error, an unknown type
 * a 415), whatever the type says.
 */
function forgetEmptyBodyType (request: FastifyRequest): void {
  const { headers } = request.raw
  if (headers['transfer-encoding'] === undefined && (headers['content-length'] === undefined || headers['content-length'] === '0')) delete headers['content-type']
}

/** POST, GET and DELETE on the MCP path (Streamable HTTP). Everything after parsing writes the raw response. */
export async function registerMcpRoute (app: FastifyInstance, options: McpRouteOptions): Promise<void> {
  const { config, legacy, metrics, tracing } = options
  const maxBodyBytes = config.maxBodyBytes

  app.setErrorHandler(async (err: FastifyError, request, reply) => {
    const mapped = bodyError(err, maxBodyBytes)
    if (mapped) {
      metrics?.refused(mapped)
      options.problems?.attribute(mapped, { principal: undefined, address: request.ip })
      return sendHttpError(reply, mapped)
    }
    request.log.error({ err }, 'unhandled request error')
    return sendHttpError(reply, new GatewayError('GW_ERR_INTERNAL', ['the request could not be processed'], { cause: err }))
  })

  /**
   * A caller without auth: its limits count per client address (`request.ip`, server.trustProxy applied). A literal
   * of one shape, not a spread of ANONYMOUS_CALLER: this runs on every request with auth off.
   */
  const anonymous = (request: FastifyRequest): Caller => {
    const header = request.headers.authorization
    const authorization = options.passAuthorization ? header : undefined
    const address = request.ip
    return { principal: undefined, access: ANONYMOUS_CALLER.access, authorization, account: anonymousAccount(address), address }
  }

  /** An authenticated caller, less the upstreams it has no credential for. */
  const authenticated = (caller: Caller, address: string): Caller => {
    const withheld = caller.principal === undefined ? undefined : options.withheld?.(caller.principal)
    if (withheld === undefined || withheld.length === 0) return { ...caller, address }
    return { ...caller, access: withholding(caller.access, withheld), address }
  }

  /**
   * `method` and `era` label the request in the metrics; it is timed until its response ends. `message` is a
   * POST's classified message (undefined for GET and DELETE): the limits count it, and an error ending the
   * exchange answers its id.
   */
  const run = async (
    request: FastifyRequest,
    reply: FastifyReply,
    method: string,
    era: string,
    work: (caller: Caller) => Promise<void>,
    message?: ClassifiedMessage,
    trace?: RequestTrace,
  ): Promise<void> => {
    reply.hijack()
    // What the hooks set (CORS, Vary) would be lost with the reply: the raw response writes its own head.
    const headers = reply.getHeaders()
    for (const name in headers) {
      const value = headers[name]
      if (value !== undefined) reply.raw.setHeader(name, value)
    }
    // A response closes once: `on`, which costs less than `once` (no wrapper per listener).
    if (metrics !== undefined) {
      const started = performance.now()
      reply.raw.on('close', () => { metrics.request(method, era, reply.raw.statusCode, (performance.now() - started) / 1000) })
    }
    if (trace !== undefined) reply.raw.on('close', () => { trace.end(reply.raw.statusCode) })
    // Read per request: a configuration reload may replace the limiter and the authenticator.
    const limiter = options.limiter
    let caller: Caller | undefined
    try {
      if (options.isClosing()) throw new GatewayError('GW_ERR_SHUTTING_DOWN')
      // Per address before authentication (it guards the authenticator too), per principal after it.
      if (limiter !== undefined) await limiter.checkAddress(request.ip)
      const authenticator = options.authenticator
      caller = authenticator === undefined
        ? anonymous(request)
        : authenticated(await authenticator.authenticate(request.headers), request.ip)
      noteCaller(reply.raw, caller.principal, caller.credential?.sha256)
      if (limiter !== undefined) await limiter.checkCaller(caller.principal, request.ip, message)
      await work(caller)
    } catch (err) {
      trace?.failed(err)
      options.problems?.attribute(err, { principal: caller?.principal, address: request.ip })
      if (!reply.raw.headersSent) {
        // Refusals answered here are those with their own status (429); the others are counted where they arise.
        if (err instanceof GatewayError && err.statusCode === 429) metrics?.refused(err)
        if (!(err instanceof GatewayError)) request.log.error({ err }, 'MCP request failed')
        const challenge = err instanceof GatewayError && err.code.startsWith('GW_ERR_AUTH_') && options.authenticator !== undefined && err.statusCode !== 503
          ? { 'www-authenticate': options.authenticator.challenge(err) }
          : undefined
        writeHttpError(reply.raw, err, { id: answeredId(message), headers: challenge })
      } else if (!reply.raw.writableEnded) {
        reply.raw.end()
      }
    }
  }

  app.post(config.path, { bodyLimit: maxBodyBytes }, async (request, reply) => {
    // The body is read here once, and only what this classification says of it is used by what follows: the era
    // (decided per request), the limits, the metrics' labels, the trace and the endpoint of that era.
    const message = classifyPost(request.body, request.headers['mcp-protocol-version'])
    const label = methodLabel(message)
    const trace = tracing?.request(message, label, request.headers)
    await run(request, reply, label, message.era, async (caller) => {
      if (!JSON_TYPE.test(request.headers['content-type'] ?? '')) throw new GatewayError('GW_ERR_HTTP_MEDIA_TYPE')
      if (!accepts(request, 'application/json') || !accepts(request, 'text/event-stream')) {
        throw new GatewayError('GW_ERR_HTTP_NOT_ACCEPTABLE', ['both application/json and text/event-stream'])
      }
      // Refused where an endpoint would have read it, so the checks above still come first.
      if (message.kind === 'invalid') throw message.error
      const endpoint = message.era === '2026-07-28' ? options.modern : legacy
      await endpoint.post(request.headers, reply.raw, message, caller, trace)
    }, message, trace)
  })

  // HEAD would open a stream without a body to carry it: it is refused like the other methods below.
  app.get(config.path, { exposeHeadRoute: false }, async (request, reply) => {
    await run(request, reply, 'GET', '2025-11-25', async (caller) => {
      if (!accepts(request, 'text/event-stream')) throw new GatewayError('GW_ERR_HTTP_NOT_ACCEPTABLE', ['text/event-stream'])
      await legacy.get(request.headers, reply.raw, caller)
    })
  })

  app.delete(config.path, { onRequest: async (request) => { forgetEmptyBodyType(request) } }, async (request, reply) => {
    await run(request, reply, 'DELETE', '2025-11-25', (caller) => legacy.delete(request.headers, reply.raw, caller.principal))
  })

  // A CORS preflight of an allowed origin is answered by the CORS hook before this (see cors.ts).
  app.options(config.path, answerOptions)

  for (const method of ['PUT', 'PATCH', 'HEAD'] as const) {
    app.route({
      method,
      url: config.path,
      handler: async (_request, reply) => {
        const err = new GatewayError('GW_ERR_HTTP_METHOD_NOT_ALLOWED', [`use POST, GET or DELETE on ${config.path}`])
        return sendHttpError(reply, err, { headers: { allow: ENDPOINT_METHODS.join(', ') } })
      },
    })
  }
}
