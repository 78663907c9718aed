import { createHash, timingSafeEqual } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import type { Config } from '../config/schema.ts'
import { GatewayError } from '../errors.ts'

/** Who is calling: a principal name, or undefined when auth is off. */
export type Authenticate = (headers: IncomingHttpHeaders) => string | undefined

export const WWW_AUTHENTICATE = 'Bearer realm="mcp-task-gateway"'

export function sha256Hex (token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex')
}

/**
 * Static bearer tokens: the configuration holds SHA-256 hashes only; a request's token is hashed and
 * compared in constant time. With no tokens configured, auth is off and every session is its own
 * principal. This is the seam the OAuth resource-server mode plugs into.
 */
export function createAuthenticator (config: Config['auth']): Authenticate | undefined {
  if (config.tokens.length === 0) return undefined
  const known = config.tokens.map((t) => ({ principal: t.principal, hash: Buffer.from(t.sha256.toLowerCase(), 'hex') }))
  return (headers) => {
    const header = headers.authorization
    if (header === undefined || header === '') throw new GatewayError('GW_ERR_AUTH_MISSING')
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header)
    if (!match) throw new GatewayError('GW_ERR_AUTH_INVALID')
    const hash = Buffer.from(sha256Hex(match[1]!), 'hex')
    let principal: string | undefined
    for (const entry of known) {
      if (timingSafeEqual(entry.hash, hash)) principal ??= entry.principal
    }
    if (principal === undefined) throw new GatewayError('GW_ERR_AUTH_INVALID')
    return principal
  }
}
