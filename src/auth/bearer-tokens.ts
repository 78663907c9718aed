import { createHash, timingSafeEqual } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import type { AuthConfig } from '../config/schema.ts'
import { GatewayError } from '../errors.ts'
import { compilePermissions, type Access, type Caller, type Credential } from './access.ts'
import type { OAuthResource } from './oauth-resource.ts'

/** Who is calling, from a request's headers: the principal and what its scopes grant, or a GW_ERR_AUTH_* error. */
export interface Authenticator {
  authenticate (headers: IncomingHttpHeaders): Promise<Caller>
  /** The `WWW-Authenticate` value that goes with a refusal (401 or 403). */
  challenge (err: GatewayError): string
  /**
   * What an earlier request's caller may use under the configuration in force, by the credential it
   * authenticated with; undefined when that credential no longer authenticates it (a static token removed,
   * or given to another principal). An access token stays valid until its `exp` (the OAuth settings cannot
   * change without a restart); its scopes are granted by the permissions in force.
   */
  recheck (caller: Caller): Access | undefined
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
  const known = config.tokens.map((t) => {
    const sha256 = t.sha256.toLowerCase()
    const credential: Credential = { kind: 'token', sha256, scopes: t.scopes, expiresAt: undefined }
    return { principal: t.principal, scopes: t.scopes, hash: Buffer.from(sha256, 'hex'), credential }
  })
  // As authenticate() does, the first entry of a hash listed twice wins.
  const byHash = new Map<string, (typeof known)[number]>()
  for (const entry of known) if (!byHash.has(entry.credential.sha256)) byHash.set(entry.credential.sha256, entry)
  const accessOf = compilePermissions(config.permissions)
  const scope = oauth?.challengeScope === undefined ? '' : `, scope="${oauth.challengeScope}"`
  const metadata = oauth === undefined ? '' : `, resource_metadata="${oauth.resourceMetadataUrl}"${scope}`
  return {
    authenticate: async (headers) => {
      const header = headers.authorization
      if (header === undefined || header === '') throw new GatewayError('GW_ERR_AUTH_MISSING')
      const match = /^Bearer\s+(\S+)\s*$/i.exec(header)
      if (!match) throw new GatewayError('GW_ERR_AUTH_INVALID')
      const hex = sha256Hex(match[1]!)
      const hash = Buffer.from(hex, 'hex')
      let identity: { principal: string, scopes: readonly string[], credential: Credential } | undefined
      for (const entry of known) {
        if (timingSafeEqual(entry.hash, hash)) identity ??= entry
      }
      if (identity === undefined && oauth === undefined) throw new GatewayError('GW_ERR_AUTH_INVALID')
      if (identity === undefined) {
        const { principal, scopes, expiresAt } = await oauth!.verify(match[1]!)
        identity = { principal, scopes, credential: { kind: 'oauth', sha256: hex, scopes, expiresAt } }
      }
      const authorization = keepAuthorization ? header : undefined
      return { principal: identity.principal, access: accessOf(identity.scopes), authorization, credential: identity.credential }
    },
    recheck: ({ principal, credential }) => {
      if (credential === undefined) return undefined
      if (credential.kind === 'oauth') return oauth === undefined ? undefined : accessOf(credential.scopes)
      const entry = byHash.get(credential.sha256)
      return entry !== undefined && entry.principal === principal ? accessOf(entry.scopes) : undefined
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
