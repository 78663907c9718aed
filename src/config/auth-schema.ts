import { z } from 'zod'
import { duration } from './units.ts'

/**
 * The `auth` section of the configuration schema (schema.ts): static bearer tokens, the scopes they carry and
 * what each grants, and the gateway as an OAuth 2.1 resource server.
 */

/** The asymmetric JWS algorithms an access token may be signed with (the gateway holds public keys only). */
const JWT_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const

export const authSchema = z.strictObject({
  tokens: z.array(z.strictObject({
    principal: z.string().min(1)
      .refine((name) => !name.startsWith('oauth:') && name !== 'anonymous' && !name.startsWith('anonymous:'), 'oauth:… names OAuth subjects and anonymous… callers without auth: choose another name')
      .describe('the name the token authenticates as; sessions and tasks belong to it; several tokens may share one. Names starting with `oauth:` or `anonymous` are refused: they belong to OAuth subjects and to callers without auth'),
    sha256: z.string().regex(/^[0-9a-fA-F]{64}$/, 'must be the hex SHA-256 of the token (64 hex digits), never the token itself')
      .describe('hex SHA-256 of the bearer token (64 hex digits, in either case), never the token itself'),
    scopes: z.array(z.string().min(1)).prefault([])
      .describe('scopes the token carries, matched against auth.permissions'),
  })).prefault([])
    .describe('static bearer tokens; with no tokens and no oauth, auth is off and every session is its own principal'),
  permissions: z.array(z.strictObject({
    scope: z.string().min(1).describe('a scope of the caller\'s token (static token scopes, or the JWT `scope`/`scp` claim)'),
    upstreams: z.array(z.string().min(1)).prefault([])
      .describe('upstream names (`*` is a wildcard) whose tools, prompts and resources the scope grants'),
    tools: z.array(z.string().min(1)).prefault([])
      .describe('tool names as clients see them, prefix included (`demo__echo`, `search__*`), that the scope grants'),
  }).refine((rule) => rule.upstreams.length + rule.tools.length > 0, 'grant at least one upstream or tool'))
    .prefault([])
    .describe('what each scope grants; empty: every caller may use every upstream and tool. Entries a caller may not use are neither listed nor callable. Needs tokens or oauth'),
  oauth: z.strictObject({
    issuer: z.string().url().describe('the authorization server: the `iss` every access token must carry'),
    jwksUri: z.string().url().describe('the issuer\'s published signing keys (JWKS); cached 10 minutes and fetched again for a key id not seen yet'),
    resource: z.string().url().describe('this MCP endpoint\'s public URL (`https://gateway.example.com/mcp`): the resource in the protected resource metadata, and the default audience'),
    audience: z.array(z.string().min(1)).min(1).optional()
      .describe('accepted `aud` values; default: `resource`'),
    principalClaim: z.string().min(1).prefault('sub').describe('the token claim that names the principal'),
    scopesSupported: z.array(z.string().min(1)).prefault([]).describe('scopes advertised in the protected resource metadata'),
    requiredScopes: z.array(z.string().min(1)).prefault([]).describe('scopes every token must carry (403 insufficient_scope otherwise)'),
    clockTolerance: duration('accepted clock difference for `exp` and `nbf`').prefault('30s'),
    jwksCooldown: duration('least time between two fetches of the JWKS, failed fetches included, so neither tokens with made-up key ids nor a failing issuer make the gateway ask it more often').prefault('30s'),
    algorithms: z.array(z.enum(JWT_ALGORITHMS)).min(1).prefault([...JWT_ALGORITHMS])
      .describe('signature algorithms (`alg`) accepted; any other (`none`, `HS256`, …) gets 401 invalid_token (GW_ERR_AUTH_REJECTED)'),
    requireTyp: z.boolean().prefault(false)
      .describe('require the RFC 9068 header `typ: at+jwt` (set it when the issuer types its access tokens so); off: no `typ`, `JWT` or `at+jwt`'),
  }).optional().describe('the gateway as an OAuth 2.1 resource server: JWT access tokens verified against the issuer\'s keys'),
}).describe('who may call the gateway: static bearer tokens, OAuth access tokens, and what each scope grants')
