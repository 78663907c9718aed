import { timingSafeEqual } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import type { ServerOptions } from 'node:https'
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type LogController } from 'fastify'
import { sha256Hex } from '../auth/bearer-tokens.ts'
import type { AdminConfig } from '../config/schema.ts'
import { sendHttpError } from '../wire/error-replies.ts'
import { GatewayError } from '../errors.ts'
import { registerSingleHostCheck } from '../http/host-origin-guard.ts'
import type { Logger } from '../observability/logger.ts'

/** The `WWW-Authenticate` value of the admin API's refusals (its own realm: client tokens do not open it). */
export const ADMIN_CHALLENGE = 'Bearer realm="mcp-task-gateway-admin"'

/**
 * Checks an admin request's bearer token against `admin.tokenSha256` and `admin.readTokenSha256`: the token
 * is hashed and the hashes are compared in constant time, so neither the token nor how much of it matched
 * can be learnt from timing. Returns what it opens; throws GW_ERR_ADMIN_TOKEN_MISSING or GW_ERR_ADMIN_TOKEN_INVALID.
 */
export function adminTokenCheck (tokenSha256: string, readTokenSha256?: string): (headers: IncomingHttpHeaders) => AdminAccess {
  const expected = Buffer.from(tokenSha256.toLowerCase(), 'hex')
  const reader = readTokenSha256 === undefined ? undefined : Buffer.from(readTokenSha256.toLowerCase(), 'hex')
  return (headers) => {
    const header = headers.authorization
    if (header === undefined || header === '') throw new GatewayError('GW_ERR_ADMIN_TOKEN_MISSING')
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header)
    if (!match) throw new GatewayError('GW_ERR_ADMIN_TOKEN_INVALID')
    const presented = Buffer.from(sha256Hex(match[1]!), 'hex')
    if (timingSafeEqual(expected, presented)) return 'admin'
    if (reader !== undefined && timingSafeEqual(reader, presented)) return 'read'
    throw new GatewayError('GW_ERR_ADMIN_TOKEN_INVALID')
  }
}

/** What an admin request's token opens: everything (`admin`), or the metrics and the GET routes (`read`). */
export type AdminAccess = 'admin' | 'read'

/** The methods a read-only token may use: those that change nothing. */
const READ_METHODS = new Set(['GET', 'HEAD'])

/** Answers with a GatewayError's HTTP status and its code and message as JSON (a 401 also with its challenge). */
export function sendAdminError (reply: FastifyReply, err: GatewayError, status = err.statusCode): FastifyReply {
  return sendHttpError(reply, err, { form: 'admin', status, ...(status === 401 && { headers: { 'www-authenticate': ADMIN_CHALLENGE } }) })
}

/**
 * The admin API's own Fastify instance (listened on `admin.host`/`admin.port` by the CLI, never by
 * buildGateway). Every request, to a route or not, needs the admin token, but for the routes declared with
 * `config: { public: true }` (the dashboard's static files, which hold no data); every error is JSON from the
 * gateway's error table. `tls` (from admin.tls) makes it HTTPS. Other parts of the gateway add routes to it
 * (see registerAdminRoutes) before it listens.
 */
export function createAdminApp (config: AdminConfig, log: Logger, tls?: ServerOptions, logController?: LogController): FastifyInstance {
  const options = {
    loggerInstance: log.child({ component: 'admin' }) as FastifyBaseLogger,
    ...(logController !== undefined && { logController }),
    forceCloseConnections: true,
    bodyLimit: 64 * 1024,
  }
  // With admin.tls it is HTTPS; the instance is typed as the HTTP one the routes expect (same request and reply).
  const app: FastifyInstance = tls === undefined ? Fastify(options) : Fastify({ ...options, https: tls }) as unknown as FastifyInstance
  registerSingleHostCheck(app, sendAdminError)
  const check = adminTokenCheck(config.tokenSha256, config.readTokenSha256)
  app.addHook('onRequest', async (request, reply) => {
    // The dashboard's page and script hold no data: a browser loads them without the token (it cannot send one).
    if ((request.routeOptions.config as { public?: unknown }).public === true) return
    try {
      const access = check(request.headers)
      if (access === 'read' && !READ_METHODS.has(request.method)) {
        throw new GatewayError('GW_ERR_ADMIN_READ_ONLY', [request.method, request.url.split('?')[0]])
      }
    } catch (err) {
      if (err instanceof GatewayError) return sendAdminError(reply, err)
      throw err
    }
  })
  app.setNotFoundHandler(async (request, reply) => sendAdminError(reply, new GatewayError('GW_ERR_ADMIN_NOT_FOUND', [request.method, request.url.split('?')[0]])))
  app.setErrorHandler(async (err, request, reply) => {
    if (err instanceof GatewayError) return sendAdminError(reply, err)
    // Fastify's own refusals (an unparsable body, one too large) keep their status, in the admin error shape.
    const status = (err as { statusCode?: unknown }).statusCode
    if (typeof status === 'number' && status >= 400 && status < 500) {
      return sendAdminError(reply, new GatewayError('GW_ERR_ADMIN_BAD_REQUEST', [err instanceof Error ? err.message : String(err)]), status)
    }
    request.log.error({ err }, 'admin request failed')
    return sendAdminError(reply, new GatewayError('GW_ERR_INTERNAL', ['see the gateway log']))
  })
  return app
}
