import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { ServerConfig } from '../config/schema.ts'
import { sendHttpError } from '../wire/error-replies.ts'
import { GatewayError } from '../errors.ts'

const LOCAL_HOSTNAMES = new Set(['localhost', '127.0.0.1', '[::1]', '::1'])

/** `example.com:8080` → `example.com`; `[::1]:8080` → `[::1]`. */
export function hostnameOf (host: string): string {
  if (host.startsWith('[')) {
    const end = host.indexOf(']')
    return end > 0 ? host.slice(0, end + 1).toLowerCase() : host.toLowerCase()
  }
  const colon = host.lastIndexOf(':')
  return (colon > 0 ? host.slice(0, colon) : host).toLowerCase()
}

/** An Origin value as `server.allowedOrigins` entries are compared: lower case, no trailing slash. */
export function normalizeOrigin (origin: string): string {
  return origin.toLowerCase().replace(/\/$/, '')
}

/** Decides whether a Host and an Origin header may reach the gateway (DNS-rebinding protection). */
export function createHostOriginCheck (config: Pick<ServerConfig, 'allowedHosts' | 'allowedOrigins'>) {
  const hosts = new Set(config.allowedHosts.map((h) => h.toLowerCase()))
  const origins = new Set(config.allowedOrigins.map(normalizeOrigin))
  return (host: string | undefined, origin: string | undefined): GatewayError | undefined => {
    if (host === undefined || host === '') return new GatewayError('GW_ERR_HTTP_HOST_FORBIDDEN', ['(missing)'])
    const hostname = hostnameOf(host)
    if (!LOCAL_HOSTNAMES.has(hostname) && !hosts.has(host.toLowerCase()) && !hosts.has(hostname)) {
      return new GatewayError('GW_ERR_HTTP_HOST_FORBIDDEN', [host])
    }
    if (origin === undefined) return undefined
    const normalized = normalizeOrigin(origin)
    if (origins.has(normalized)) return undefined
    let originHost: string
    try {
      originHost = new URL(normalized).hostname
    } catch {
      return new GatewayError('GW_ERR_HTTP_ORIGIN_FORBIDDEN', [origin])
    }
    const bracketed = originHost.includes(':') && !originHost.startsWith('[') ? `[${originHost}]` : originHost
    return LOCAL_HOSTNAMES.has(bracketed) ? undefined : new GatewayError('GW_ERR_HTTP_ORIGIN_FORBIDDEN', [origin])
  }
}

/**
 * How many `Host` headers a request carries: Node keeps the first in `headers.host` and drops the others silently.
 * Only names of four letters are lowered to compare (this runs on every request).
 */
function hostHeaders (rawHeaders: readonly string[]): number {
  let count = 0
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!
    if (name.length === 4 && name.toLowerCase() === 'host') count++
  }
  return count
}

/**
 * Whether a request was routed to `path`. Its URL's path is that path (a query after it allowed) on every request
 * of a client; only a URL that differs (percent-encoded, which the router decodes) asks the router's answer, which
 * Fastify builds as a new object on each read.
 */
function routedTo (request: FastifyRequest, path: string): boolean {
  const url = request.url
  if (url.startsWith(path) && (url.length === path.length || url.charCodeAt(path.length) === QUESTION_MARK)) return true
  return request.routeOptions.url === path
}

const QUESTION_MARK = 0x3f

/**
 * Answers 400 to a request with more than one `Host` header, on every route (RFC 9112 §3.2): the guard below,
 * a proxy in front and the gateway could each read a different one. `send` writes the error in the listener's shape.
 */
type SendError = (reply: FastifyReply, err: GatewayError) => FastifyReply

export function registerSingleHostCheck (app: FastifyInstance, send: SendError = sendHttpError): void {
  app.addHook('onRequest', (request, reply, done) => {
    const count = hostHeaders(request.raw.rawHeaders)
    if (count <= 1) {
      done()
      return
    }
    request.log.warn({ hosts: count }, 'request with several Host headers refused')
    send(reply, new GatewayError('GW_ERR_HTTP_HOST_DUPLICATE', [String(count)]))
  })
}

/** Registers the single-Host check on every route, and the Host/Origin check as an onRequest hook on the MCP path. */
export function registerHostOriginGuard (app: FastifyInstance, config: ServerConfig): void {
  registerSingleHostCheck(app)
  if (!config.dnsRebindingProtection) return
  const check = createHostOriginCheck(config)
  // A callback hook, not an async one: it runs on every request, and an async hook costs a promise each time.
  app.addHook('onRequest', (request, reply, done) => {
    if (!routedTo(request, config.path)) {
      done()
      return
    }
    const origin = request.headers.origin
    const failure = check(request.headers.host, Array.isArray(origin) ? origin[0] : origin)
    if (failure === undefined) {
      done()
      return
    }
    request.log.warn({ host: request.headers.host, origin }, failure.message)
    sendHttpError(reply, failure)
  })
}
