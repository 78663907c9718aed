import { timingSafeEqual } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import { sha256Hex } from '../auth/bearer-tokens.ts'
import { GatewayError } from '../errors.ts'

/** The `WWW-Authenticate` value of the admin API's refusals (its own realm: client tokens do not open it). */
export const ADMIN_CHALLENGE = 'Bearer realm="mcp-task-gateway-admin"'

/**
 * Checks an admin request's bearer token against `admin.tokenSha256`: the token is hashed and the hashes are
 * compared in constant time, so neither the token nor how much of it matched can be learnt from timing.
 * Throws GW_ERR_ADMIN_TOKEN_MISSING or GW_ERR_ADMIN_TOKEN_INVALID.
 */
export function adminTokenCheck (tokenSha256: string): (headers: IncomingHttpHeaders) => void {
  const expected = Buffer.from(tokenSha256.toLowerCase(), 'hex')
  return (headers) => {
    const header = headers.authorization
    if (header === undefined || header === '') throw new GatewayError('GW_ERR_ADMIN_TOKEN_MISSING')
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header)
    if (!match) throw new GatewayError('GW_ERR_ADMIN_TOKEN_INVALID')
    if (!timingSafeEqual(expected, Buffer.from(sha256Hex(match[1]!), 'hex'))) throw new GatewayError('GW_ERR_ADMIN_TOKEN_INVALID')
  }
}
