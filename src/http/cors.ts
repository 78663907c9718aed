import fastifyCors, { type FastifyCorsOptions } from '@fastify/cors'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { ServerConfig } from '../config/schema.ts'
import { sendHttpError } from '../wire/error-replies.ts'
import { GatewayError } from '../errors.ts'
import { normalizeOrigin } from './host-origin-guard.ts'

/**
 * CORS for browser clients: a page on one of `server.allowedOrigins` may call the gateway across origins.
 * Only listed origins get CORS headers (origins on localhost names pass the DNS-rebinding guard but are not
 * granted CORS unless listed); with the list empty the gateway adds none. A preflight never needs a token.
 */

/** The methods of the MCP endpoint. */
export const ENDPOINT_METHODS = ['GET', 'POST', 'DELETE', 'OPTIONS'] as const

/** Request headers the MCP endpoint reads (both eras) that a browser must be allowed to send. */
const REQUEST_HEADERS = [
  'content-type', 'accept', 'authorization', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id',
  'mcp-method', 'mcp-name', 'x-request-id',
]
/** 2026-07-28 requests mirror tool arguments in `Mcp-Param-<Name>` headers, names chosen by each tool. */
const ARGUMENT_HEADER_PREFIX = 'mcp-param-'
/** Response headers a client must read (not CORS-safelisted, so hidden from a page unless exposed). */
const EXPOSED_HEADERS = ['mcp-session-id', 'mcp-protocol-version', 'www-authenticate', 'retry-after']
/** How long a browser may reuse a preflight answer, in seconds. */
const PREFLIGHT_MAX_AGE = 600

function firstOf (value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value
}

/**
 * The headers a preflight may be granted: the endpoint's own, and the `Mcp-Param-*` ones it asks for (their
 * names cannot be listed in advance). Anything else it asks for is left out, so the browser refuses to send it.
 */
function allowedHeaders (requested: string | undefined): string[] {
  const asked = (requested ?? '').split(',').map((name) => name.trim().toLowerCase())
  const argumentHeaders = asked.filter((name) => name.startsWith(ARGUMENT_HEADER_PREFIX) && /^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(name))
  return [...REQUEST_HEADERS, ...new Set(argumentHeaders)]
}

/** Registers CORS for the listed origins; with none listed, nothing is registered. */
export async function registerCors (app: FastifyInstance, config: Pick<ServerConfig, 'allowedOrigins'>): Promise<void> {
  if (config.allowedOrigins.length === 0) return
  const origins = new Set(config.allowedOrigins.map(normalizeOrigin))
  await app.register(fastifyCors, {
    hook: 'onRequest',
    delegator: (request: FastifyRequest, done: (error: Error | null, options?: FastifyCorsOptions) => void) => {
      const origin = firstOf(request.headers.origin)
      if (origin === undefined || !origins.has(normalizeOrigin(origin))) {
        done(null, { origin: false })
        return
      }
      done(null, {
        origin,
        methods: [...ENDPOINT_METHODS],
        allowedHeaders: allowedHeaders(firstOf(request.headers['access-control-request-headers'])),
        exposedHeaders: EXPOSED_HEADERS,
        maxAge: PREFLIGHT_MAX_AGE,
      })
    },
  })
}

/**
 * OPTIONS on the MCP path when CORS did not answer it: a preflight (Origin and Access-Control-Request-Method)
 * comes from an origin not in `server.allowedOrigins` and gets 403 saying so; a plain OPTIONS gets the methods.
 */
export async function answerOptions (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const origin = firstOf(request.headers.origin)
  if (origin !== undefined && request.headers['access-control-request-method'] !== undefined) {
    const err = new GatewayError('GW_ERR_HTTP_ORIGIN_FORBIDDEN', [origin])
    return sendHttpError(reply, err)
  }
  return await reply.code(204).header('allow', ENDPOINT_METHODS.join(', ')).send()
}
