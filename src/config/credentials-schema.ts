import { z } from 'zod'
import { duration } from './units.ts'

/**
 * `upstreams[].credentials`: how the gateway authenticates itself to an HTTP upstream for each caller, never with
 * a token passed through from the caller (that is `forwardAuthorization`, which cannot be combined with it). One
 * variant per way, told apart by `kind`; each is one UpstreamCredentials implementation
 * (src/upstream/credentials/).
 */

const HEADER = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

const perPrincipalCredentials = z.strictObject({
  kind: z.literal('per-principal')
    .describe('a static key (an API key) per principal, from `file` and/or `env`; a principal without one does not see the upstream\'s tools, prompts and resources, and a call of one gets GW_ERR_UPSTREAM_NO_CREDENTIAL naming the upstream. Upstream sessions then serve one principal each. Needs auth (auth.tokens or auth.oauth): without it nobody is a principal'),
  header: z.string().regex(HEADER, 'must be an HTTP header name').prefault('authorization')
    .describe('the header the key is sent in (it replaces a header of that name in `headers` on the principal\'s requests)'),
  scheme: z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be one word, such as Bearer').optional()
    .describe('sent before the key with one space (`Bearer` sends `Bearer <key>`); default: the key alone'),
  file: z.string().min(1).optional()
    .describe('a YAML or JSON file mapping each principal to its key (`alice: <key>`), relative to the working directory; read at start and at each configuration reload (a rotated key is used from the next request on); keep it readable by the gateway only (a file others may read is warned about)'),
  env: z.record(z.string().min(1), z.string().regex(ENV_NAME, 'must be the name of an environment variable')).prefault({})
    .describe('principal → name of the environment variable holding its key (`alice: CRM_KEY_ALICE`); read at start and at each reload; a principal named here and in `file` takes the key from here'),
}).refine((credentials) => credentials.file !== undefined || Object.keys(credentials.env).length > 0, {
  message: 'give the keys in file, in env, or both',
  path: ['kind'],
})

const CLIENT_AUTH = ['client_secret_basic', 'client_secret_post', 'private_key_jwt'] as const

const oauthCredentials = z.strictObject({
  kind: z.literal('oauth')
    .describe('OAuth 2.1 tokens made for this upstream (its protected resource metadata, RFC 9728, names the authorization server; the token is asked for its URL as the resource, RFC 8707), cached until shortly before they expire and renewed by one request however many calls wait'),
  grant: z.enum(['client_credentials', 'token_exchange'])
    .describe('`client_credentials`: one service identity, the gateway\'s client, for every caller; `token_exchange` (RFC 8693): each caller\'s own access token (auth.oauth) exchanged for one whose audience is the upstream, per principal; upstream sessions then serve one principal each'),
  clientId: z.string().min(1).describe('the gateway\'s client id at the authorization server'),
  clientAuth: z.enum(CLIENT_AUTH).prefault('client_secret_basic')
    .describe('how the gateway authenticates at the token endpoint: the client secret in HTTP Basic or in the form body, or a client assertion signed with `privateKeyFile` (RFC 7523)'),
  clientSecretFile: z.string().min(1).optional()
    .describe('a file holding the client secret (a mounted secret; surrounding whitespace ignored), read at start; one of clientSecretFile and clientSecretEnv with client_secret_basic and client_secret_post. The secret is never written in the YAML'),
  clientSecretEnv: z.string().regex(ENV_NAME, 'must be the name of an environment variable').optional()
    .describe('the environment variable holding the client secret, read at start'),
  privateKeyFile: z.string().min(1).optional()
    .describe('with private_key_jwt: a file holding the private key, PKCS#8 PEM or a private JWK (JSON)'),
  signingAlgorithm: z.string().regex(/^[A-Za-z0-9]+$/, 'must be a JWS algorithm such as ES256').optional()
    .describe('with private_key_jwt: the JWS algorithm of the assertion; default: the JWK\'s `alg`, else RS256 for RSA and ES256 for P-256 keys'),
  keyId: z.string().min(1).optional().describe('with private_key_jwt: the `kid` of the assertion; default: the JWK\'s `kid`'),
  scope: z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*$/, 'must be scopes separated by single spaces').optional()
    .describe('the scopes asked for, separated by spaces; none by default'),
  issuer: z.url().optional()
    .describe('the authorization server\'s issuer, when the upstream does not publish protected resource metadata: its metadata (RFC 8414, then OpenID Connect discovery) is read instead'),
  tokenEndpoint: z.url().optional()
    .describe('the token endpoint itself: no discovery at all (a server without metadata)'),
  resource: z.url().optional()
    .describe('the resource indicator sent (RFC 8707); default: the `resource` of the upstream\'s protected resource metadata, else `url`'),
  audience: z.string().min(1).optional()
    .describe('with token_exchange: the `audience` parameter, for authorization servers that name upstreams so; none by default'),
  timeout: duration('the longest wait for one answer of the authorization server or of the upstream\'s metadata').prefault('10s'),
  refreshBefore: duration('a token is renewed this long before it expires (at most half its lifetime)').prefault('30s'),
  retryBackoff: duration('after a failed token request, calls fail at once for this long before the next is sent; it doubles up to maxRetryBackoff, so an authorization server that is down is not flooded').prefault('1s'),
  maxRetryBackoff: duration('the longest wait between two failed token requests').prefault('30s'),
  maxCachedTokens: z.number().int().min(1).prefault(10_000)
    .describe('with token_exchange: the principals whose tokens are kept at most (the least recently used go first)'),
  gatewaySession: z.enum(['client_credentials', 'headers']).prefault('client_credentials')
    .describe('with token_exchange: what the gateway\'s own session (its health check, the lists every caller starts from) is sent with: a token of the gateway\'s own client (client credentials grant, the same client), or `headers` only; with client_credentials it always has the gateway\'s token'),
}).superRefine((credentials, ctx) => {
  const secrets = [credentials.clientSecretFile, credentials.clientSecretEnv].filter((s) => s !== undefined).length
  if (credentials.clientAuth === 'private_key_jwt') {
    if (credentials.privateKeyFile === undefined) ctx.addIssue({ code: 'custom', path: ['privateKeyFile'], message: 'private_key_jwt needs the private key: give privateKeyFile' })
    if (secrets > 0) ctx.addIssue({ code: 'custom', path: [credentials.clientSecretFile === undefined ? 'clientSecretEnv' : 'clientSecretFile'], message: 'private_key_jwt signs with privateKeyFile and sends no client secret: remove it' })
  } else {
    if (secrets !== 1) ctx.addIssue({ code: 'custom', path: ['clientAuth'], message: `${credentials.clientAuth} needs the client secret from exactly one of clientSecretFile and clientSecretEnv (never written in the YAML)` })
    for (const option of ['privateKeyFile', 'signingAlgorithm', 'keyId'] as const) {
      if (credentials[option] !== undefined) ctx.addIssue({ code: 'custom', path: [option], message: `is for clientAuth private_key_jwt, not ${credentials.clientAuth}` })
    }
  }
  if (credentials.grant === 'client_credentials' && credentials.audience !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['audience'], message: 'is a parameter of the token exchange, not of client_credentials' })
  }
  if (credentials.maxRetryBackoff < credentials.retryBackoff) ctx.addIssue({ code: 'custom', path: ['maxRetryBackoff'], message: 'must be at least retryBackoff' })
})

export const upstreamCredentialsSchema = z.discriminatedUnion('kind', [
  perPrincipalCredentials,
  oauthCredentials,
]).describe('how the gateway authenticates to this upstream for each caller with a credential made for the upstream (never the caller\'s own token); see docs/security.md, Upstream credentials')

export type UpstreamCredentialsConfig = z.output<typeof upstreamCredentialsSchema>
export type PerPrincipalCredentialsConfig = Extract<UpstreamCredentialsConfig, { kind: 'per-principal' }>
export type OAuthCredentialsConfig = Extract<UpstreamCredentialsConfig, { kind: 'oauth' }>

interface CredentialsInConfig {
  auth: { tokens: readonly unknown[], oauth?: { issuer: string } | undefined }
  upstreams: ReadonlyArray<{ transport: string, credentials?: UpstreamCredentialsConfig | undefined, forwardAuthorization?: boolean }>
}

/** What `upstreams[].credentials` cannot be combined with, each with its YAML path. */
export function credentialsProblems (config: CredentialsInConfig): Array<{ path: Array<string | number>, message: string }> {
  const problems: Array<{ path: Array<string | number>, message: string }> = []
  const authOn = config.auth.tokens.length > 0 || config.auth.oauth !== undefined
  config.upstreams.forEach((upstream, index) => {
    if (upstream.credentials === undefined) return
    if (upstream.forwardAuthorization === true) {
      problems.push({ path: ['upstreams', index, 'forwardAuthorization'], message: 'cannot be combined with credentials: the upstream gets either a credential made for it or the caller\'s own Authorization header; remove one of them' })
    }
    if (upstream.credentials.kind === 'per-principal' && !authOn) {
      problems.push({ path: ['upstreams', index, 'credentials'], message: 'per-principal keys need callers who are principals: configure auth.tokens or auth.oauth (without auth nobody is a principal), or send one key to everyone in headers' })
    }
    if (upstream.credentials.kind === 'oauth' && upstream.credentials.grant === 'token_exchange' && config.auth.oauth === undefined) {
      problems.push({ path: ['upstreams', index, 'credentials', 'grant'], message: 'token_exchange exchanges the caller\'s own OAuth access token, which the gateway must validate: configure auth.oauth (static auth.tokens cannot be exchanged), or use grant client_credentials' })
    }
  })
  return problems
}
