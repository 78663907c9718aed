import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { exportJWK, generateKeyPair, jwtVerify, SignJWT, type CryptoKey, type JWK } from 'jose'
import Provider, { errors, type KoaContextWithOIDC } from 'oidc-provider'

/** The issuer and audience of the callers' own access tokens (the gateway is their resource server). */
export const CALLER_ISSUER = 'https://idp.test/'
export const GATEWAY_RESOURCE = 'https://gateway.test/mcp'
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange'
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token'

/** The OAuth clients the server knows: the gateway under each way of authenticating. */
export const CLIENTS = { basic: 'gateway-basic', post: 'gateway-post', jwt: 'gateway-jwt' } as const

export interface OAuthServerOptions {
  /** Lifetime of the access tokens it issues, in seconds (default 300). */
  accessTokenTtl?: number
}

/**
 * A certified OpenID provider (oidc-provider) on loopback: client credentials and an RFC 8693 token exchange
 * for the gateway's clients (secret basic, secret post, private key JWT), JWT access tokens bound to the
 * requested resource (RFC 8707). It counts the requests to its token endpoint, can change the clients'
 * secret (`rotateSecret`: the old one is revoked), answer 503 for a while (`failing`) or stop.
 */
export class OAuthServer {
  readonly #http: Server = createServer((req, res) => { this.#handle(req, res) })
  #provider: Provider | undefined
  #signing!: JWK
  #callerKey!: { privateKey: CryptoKey, publicKey: CryptoKey }
  /** The gateway client's private key (for `private_key_jwt`) as a JWK, to write into a key file. */
  clientKey!: JWK
  #clientPublicKey!: JWK
  secret = 'first-client-secret-0123456789'
  issuer = ''
  tokenRequests = 0
  /** The grant types of the token requests, in order. */
  readonly grants: string[] = []
  /** The same, with the client that asked (token requests the provider answered, granted or refused). */
  readonly clientGrants: Array<{ grant: string, client: string | undefined }> = []
  /** While set, the token endpoint answers 503 without asking the provider. */
  failing = false
  /** While set, token requests get no answer (until `answerHeld`): a server too slow to wait for. */
  holding = false
  readonly #held: ServerResponse[] = []
  /** While set, an exchange also returns a refresh token (which its own refresh grant takes). */
  issueRefreshTokens = false
  /** The refresh tokens issued: whom each speaks for, and for which resource. */
  readonly #refreshTokens = new Map<string, { sub: string, resource: string }>()
  /** Principals (`sub` of the caller's token) whose exchange is refused. */
  readonly refusedSubjects = new Set<string>()
  /** The resources tokens may be asked for (the upstreams' URLs); others get `invalid_target`. */
  readonly resources: string[] = []
  readonly #options: OAuthServerOptions
  /** The caller each exchanged token speaks for. */
  readonly #subjects = new WeakMap<object, string>()

  constructor (options: OAuthServerOptions = {}) {
    this.#options = options
  }

  async start (): Promise<void> {
    const signing = await generateKeyPair('ES256', { extractable: true })
    this.#signing = { ...await exportJWK(signing.privateKey), kid: 'as-key-1', alg: 'ES256', use: 'sig' }
    this.#callerKey = await generateKeyPair('ES256')
    const client = await generateKeyPair('ES256', { extractable: true })
    this.clientKey = { ...await exportJWK(client.privateKey), kid: 'gateway-key-1', alg: 'ES256' }
    this.#clientPublicKey = { ...await exportJWK(client.publicKey), kid: 'gateway-key-1', alg: 'ES256', use: 'sig' }
    this.#http.listen(0, '127.0.0.1')
    await once(this.#http, 'listening')
    this.issuer = `http://127.0.0.1:${(this.#http.address() as AddressInfo).port}`
    this.#provider = this.#build()
  }

  get jwksUri (): string {
    return `${this.issuer}/jwks`
  }

  /** Where the public key of the callers' own issuer (CALLER_ISSUER) is published: auth.oauth.jwksUri of a gateway. */
  get callerJwksUri (): string {
    return `${this.issuer}/caller-jwks`
  }

  /** Gives the clients a new secret: the one they had is no longer accepted. */
  rotateSecret (secret: string): void {
    this.secret = secret
    this.#provider = this.#build()
  }

  /** An access token the callers' own issuer made for `sub`, for the gateway (the subject of an exchange). */
  async callerToken (sub: string): Promise<string> {
    return await new SignJWT({ scope: 'mcp' })
      .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: 'caller-key-1' })
      .setIssuer(CALLER_ISSUER).setAudience(GATEWAY_RESOURCE).setSubject(sub)
      .setIssuedAt().setExpirationTime('10m')
      .sign(this.#callerKey.privateKey)
  }

  /** Answers the held token requests, 503, and holds no more. */
  answerHeld (): void {
    this.holding = false
    for (const res of this.#held.splice(0)) if (!res.destroyed) res.writeHead(503).end()
  }

  async stop (): Promise<void> {
    this.#http.closeAllConnections()
    this.#http.close()
    await once(this.#http, 'close')
  }

  #handle (req: IncomingMessage, res: ServerResponse): void {
    if (new URL(req.url ?? '/', this.issuer).pathname === '/caller-jwks') {
      exportJWK(this.#callerKey.publicKey).then((jwk) => {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [{ ...jwk, kid: 'caller-key-1', alg: 'ES256', use: 'sig' }] }))
      }, () => res.writeHead(500).end())
      return
    }
    if (new URL(req.url ?? '/', this.issuer).pathname === '/token') {
      this.tokenRequests++
      if (this.failing) {
        res.writeHead(503, { 'content-type': 'text/plain' }).end('down for maintenance')
        return
      }
      if (this.holding) {
        this.#held.push(res)
        return
      }
    }
    void this.#provider!.callback()(req, res)
  }

  #build (): Provider {
    const ttl = this.#options.accessTokenTtl ?? 300
    const grantTypes = ['client_credentials', TOKEN_EXCHANGE, 'refresh_token']
    const common = { grant_types: grantTypes, redirect_uris: [], response_types: [] }
    const provider = new Provider(this.issuer, {
      clients: [
        { ...common, client_id: CLIENTS.basic, client_secret: this.secret, token_endpoint_auth_method: 'client_secret_basic' },
        { ...common, client_id: CLIENTS.post, client_secret: this.secret, token_endpoint_auth_method: 'client_secret_post' },
        { ...common, client_id: CLIENTS.jwt, jwks: { keys: [this.#clientPublicKey] }, token_endpoint_auth_method: 'private_key_jwt', token_endpoint_auth_signing_alg: 'ES256' },
      ],
      jwks: { keys: [this.#signing] },
      clientDefaults: { id_token_signed_response_alg: 'ES256' },
      features: {
        devInteractions: { enabled: false },
        clientCredentials: { enabled: true },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => undefined as unknown as string,
          useGrantedResource: () => true,
          getResourceServerInfo: (_ctx, resource) => {
            if (!this.resources.includes(resource)) throw new errors.InvalidTarget(`unknown resource ${resource}`)
            return { audience: resource, scope: 'mcp', accessTokenTTL: ttl, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'ES256' } } }
          },
        },
      },
      scopes: ['mcp'],
      ttl: { ClientCredentials: () => ttl },
      extraTokenClaims: (_ctx, token) => {
        const sub = this.#subjects.get(token)
        return sub === undefined ? undefined : { sub, act: { sub: token.clientId } }
      },
      formats: {
        customizers: {
          // An exchanged token speaks for the caller: its `sub` is the caller's, `act` names the gateway.
          jwt: (_ctx, token, jwt) => {
            const extra = (token as { extra?: { sub?: string } }).extra
            if (extra?.sub !== undefined) jwt.payload.sub = extra.sub
          },
        },
      },
    })
    provider.registerGrantType(TOKEN_EXCHANGE, async (ctx) => { await this.#exchange(provider, ctx, ttl) }, ['subject_token', 'subject_token_type', 'requested_token_type', 'audience', 'resource', 'scope'])
    provider.registerGrantType('refresh_token', async (ctx) => { await this.#refresh(provider, ctx, ttl) }, ['refresh_token', 'resource', 'scope'])
    const record = (ctx: KoaContextWithOIDC, grant: string): void => {
      this.grants.push(grant)
      this.clientGrants.push({ grant, client: ctx.oidc.client?.clientId })
    }
    provider.on('grant.success', (ctx: KoaContextWithOIDC) => { record(ctx, String(ctx.oidc.params?.grant_type)) })
    provider.on('grant.error', (ctx: KoaContextWithOIDC) => { record(ctx, `${String(ctx.oidc.params?.grant_type)} (refused)`) })
    return provider
  }

  async #exchange (provider: Provider, ctx: KoaContextWithOIDC, ttl: number): Promise<void> {
    const params = ctx.oidc.params as Record<string, string | undefined>
    if (params.subject_token_type !== ACCESS_TOKEN_TYPE) throw new errors.InvalidRequest('subject_token_type must be an access token')
    let sub: string
    try {
      const { payload } = await jwtVerify(params.subject_token ?? '', this.#callerKey.publicKey, { issuer: CALLER_ISSUER, audience: GATEWAY_RESOURCE })
      sub = payload.sub!
    } catch {
      throw new errors.InvalidGrant('the subject token is not valid')
    }
    if (this.refusedSubjects.has(sub)) throw new errors.InvalidGrant(`subject ${sub} may not act at this resource`)
    const resource = params.resource
    if (resource === undefined || !this.resources.includes(resource)) throw new errors.InvalidTarget('unknown resource')
    ctx.body = await this.#issue(provider, ctx, sub, resource, ttl)
  }

  /** The refresh grant for the refresh tokens an exchange gave (rotated at each use). */
  async #refresh (provider: Provider, ctx: KoaContextWithOIDC, ttl: number): Promise<void> {
    const params = ctx.oidc.params as Record<string, string | undefined>
    const grant = this.#refreshTokens.get(params.refresh_token ?? '')
    if (grant === undefined) throw new errors.InvalidGrant('unknown refresh token')
    if (this.refusedSubjects.has(grant.sub)) throw new errors.InvalidGrant(`subject ${grant.sub} may not act at this resource`)
    this.#refreshTokens.delete(params.refresh_token!)
    ctx.body = await this.#issue(provider, ctx, grant.sub, params.resource ?? grant.resource, ttl)
  }

  async #issue (provider: Provider, ctx: KoaContextWithOIDC, sub: string, resource: string, ttl: number): Promise<Record<string, unknown>> {
    const client = ctx.oidc.client!
    const token = new provider.ClientCredentials({ client, scope: 'mcp' })
    this.#subjects.set(token, sub)
    token.resourceServer = {
      audience: resource,
      scope: 'mcp',
      accessTokenTTL: ttl,
      accessTokenFormat: 'jwt',
      jwt: { sign: { alg: 'ES256' } },
      identifier: () => resource,
    } as unknown as typeof token.resourceServer
    const value = await token.save()
    const body: Record<string, unknown> = { access_token: value, issued_token_type: ACCESS_TOKEN_TYPE, token_type: 'Bearer', expires_in: token.expiration, scope: 'mcp' }
    if (this.issueRefreshTokens) {
      const refreshToken = randomBytes(24).toString('base64url')
      this.#refreshTokens.set(refreshToken, { sub, resource })
      body.refresh_token = refreshToken
    }
    return body
  }
}
