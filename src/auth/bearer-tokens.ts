import { createHash, timingSafeEqual } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import type { AuthConfig } from '../config/schema.ts'
import { GatewayError } from '../errors.ts'
import { compilePermissions, type Caller } from './access.ts'
import type { OAuthResource } from './oauth-resource.ts'

/** Who is calling, from a request's headers: the principal and what its scopes grant, or a GW_ERR_AUTH_* error. */
export interface Authenticator {
  authenticate (headers: IncomingHttpHeaders): Promise<Caller>
  /** The `WWW-Authenticate` value that goes with a refusal (401 or 403). */
  challenge (err: GatewayError): string
}

const REALM = 'Bearer realm="mcp-task-gateway"'

export function sha256Hex (token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex')
}

/**
 * Bearer tokens: static ones (the configuration holds SHA-256 hashes only; a request's token is hashed
 * and compared in constant time) and, with `auth.oauth`, JWT access tokens checked by the resource
 * server. Undefined when neither is configured: auth is off and every session is its own principal.
 * The request's Authorization header is kept on the caller only when `forwardAuthorization` needs it.
 */
export function createAuthenticator (
  config: AuthConfig,
  oauth: OAuthResource | undefined,
  keepAuthorization: boolean,
): Authenticator | undefined {
  if (config.tokens.length === 0 && oauth === undefined) return undefined
  const known = config.tokens.map((t) => ({ principal: t.principal, scopes: t.scopes, hash: Buffer.from(t.sha256.toLowerCase(), 'hex') }))
  const accessOf = compilePermissions(config.permissions)
  const scope = oauth?.challengeScope === undefined ? '' : `, scope="${oauth.challengeScope}"`
  const metadata = oauth === undefined ? '' : `, resource_metadata="${oauth.resourceMetadataUrl}"${scope}`
  return {
    authenticate: async (headers) => {
      const header = headers.authorization
      if (header === undefined || header === '') throw new GatewayError('GW_ERR_AUTH_MISSING')
      const match = /^Bearer\s+(\S+)\s*$/i.exec(header)
      if (!match) throw new GatewayError('GW_ERR_AUTH_INVALID')
      const hash = Buffer.from(sha256Hex(match[1]!), 'hex')
      let identity: { principal: string, scopes: readonly string[] } | undefined
      for (const entry of known) {
        if (timingSafeEqual(entry.hash, hash)) identity ??= entry
      }
      if (identity === undefined && oauth === undefined) throw new GatewayError('GW_ERR_AUTH_INVALID')
      identity ??= await oauth!.verify(match[1]!)
      return { principal: identity.principal, access: accessOf(identity.scopes), authorization: keepAuthorization ? header : undefined }
    },
    challenge: (err) => {
      // A header value carries printable ASCII only; a quoted string no unescaped quote.
      const description = `error_description="${err.message.replace(/[^\x20-\x7e]/g, '?').replaceAll('"', "'").replaceAll('\\', '/')}"`
      if (err.code === 'GW_ERR_AUTH_SCOPE') return `${REALM}${metadata}, error="insufficient_scope", ${description}`
      if (err.code === 'GW_ERR_AUTH_MISSING') return `${REALM}${metadata}`
      return `${REALM}${metadata}, error="invalid_token", ${description}`
    },
  }
}
