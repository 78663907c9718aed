import { hash } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import type { AuthConfig } from '../config/schema.ts'
import { GatewayError } from '../errors.ts'
import { compilePermissions, type Access, type Caller, type Credential } from './access.ts'
import type { OAuthResource } from './oauth-resource.ts'
import type { CallerTokens } from './caller-tokens.ts'

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

/** One-shot hashing (no Hash object per call): it runs on every authenticated request. */
export function sha256Hex (token: string): string {
  return hash('sha256', token, 'hex')
}

/**
 * Bearer tokens: static ones (the configuration holds SHA-256 hashes only; a request's token is hashed and
 * its hash looked up, so what a lookup's time could tell is about hashes, not about the token: finding a
 * token from them means inverting SHA-256) and, with `auth.oauth`, JWT access tokens checked by the resource
 * server. Undefined when neither is configured: auth is off and every session is its own principal.
 * The request's Authorization header is kept on the caller only when `forwardAuthorization` needs it; a valid
 * OAuth access token is noted in `callerTokens` only when an upstream exchanges it (credentials token_exchange).
 * What a static token grants is worked out once, when the authenticator is built (a reload builds a new one).
 */
export function createAuthenticator (
  config: AuthConfig,
  oauth: OAuthResource | undefined,
  keepAuthorization: boolean,
  callerTokens?: CallerTokens,
): Authenticator | undefined {
  if (config.tokens.length === 0 && oauth === undefined) return undefined
  const accessOf = compilePermissions(config.permissions)
  // The first entry of a hash listed twice wins.
  const byHash = new Map<string, { principal: string, scopes: readonly string[], access: Access, credential: Credential }>()
  for (const t of config.tokens) {
    const sha256 = t.sha256.toLowerCase()
    if (byHash.has(sha256)) continue
    const credential: Credential = { kind: 'token', sha256, scopes: t.scopes, expiresAt: undefined }
    byHash.set(sha256, { principal: t.principal, scopes: t.scopes, access: accessOf(t.scopes), credential })
  }
  const scope = oauth?.challengeScope === undefined ? '' : `, scope="${oauth.challengeScope}"`
  const metadata = oauth === undefined ? '' : `, resource_metadata="${oauth.resourceMetadataUrl}"${scope}`
  return {
    authenticate: async (headers) => {
      const header = headers.authorization
      if (header === undefined || header === '') throw new GatewayError('GW_ERR_AUTH_MISSING')
      const match = /^Bearer\s+(\S+)\s*$/i.exec(header)
      if (!match) throw new GatewayError('GW_ERR_AUTH_INVALID')
      const hex = sha256Hex(match[1]!)
      const authorization = keepAuthorization ? header : undefined
      const known = byHash.get(hex)
      if (known !== undefined) return { principal: known.principal, access: known.access, authorization, credential: known.credential }
      if (oauth === undefined) throw new GatewayError('GW_ERR_AUTH_INVALID')
      const { principal, scopes, expiresAt } = await oauth.verify(match[1]!)
      callerTokens?.note(principal, match[1]!, expiresAt)
      return { principal, access: accessOf(scopes), authorization, credential: { kind: 'oauth', sha256: hex, scopes, expiresAt } }
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
