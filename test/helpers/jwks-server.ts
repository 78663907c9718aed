import { once } from 'node:events'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose'
import { demoStdio, startGateway, type RunningGateway, type StartOptions } from './gateway.ts'

type Json = Record<string, unknown>

/** The protected resource (the gateway's public URL) the test tokens are issued for. */
export const RESOURCE = 'https://gateway.test/mcp'

export interface SigningKey {
  kid: string
  privateKey: CryptoKey
  jwk: JWK
}

export async function signingKey (kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair('ES256')
  return { kid, privateKey, jwk: { ...await exportJWK(publicKey), kid, alg: 'ES256', use: 'sig' } }
}

export interface TokenOptions {
  expiresIn?: string | number | null
  issuer?: string
  audience?: string
  /** Protected header fields beyond alg and kid (typ, for example). */
  header?: Json
}

/** An authorization server's JWKS endpoint, served by the test; `keys` is what it publishes now. */
export class JwksServer {
  keys: SigningKey[] = []
  fetches = 0
  /** While set, the endpoint answers 500 (the issuer is having trouble). */
  failing = false
  readonly #server: Server = createServer((_req, res) => {
    this.fetches++
    if (this.failing) {
      res.writeHead(500).end()
      return
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: this.keys.map((k) => k.jwk) }))
  })

  issuer = ''
  jwksUri = ''

  async listen (): Promise<void> {
    this.#server.listen(0, '127.0.0.1')
    await once(this.#server, 'listening')
    const base = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`
    this.issuer = `${base}/`
    this.jwksUri = `${base}/jwks.json`
  }

  async close (): Promise<void> {
    this.#server.close()
    await once(this.#server, 'close')
  }

  /** An access token signed by `key` with the usual claims, overridable; a claim or `expiresIn` set to null is left out. */
  async token (key: SigningKey, claims: Json = {}, options: TokenOptions = {}): Promise<string> {
    const payload = Object.fromEntries(Object.entries({ scope: 'mcp tasks', ...claims }).filter(([, value]) => value !== null))
    const jwt = new SignJWT(payload)
      .setProtectedHeader({ ...options.header, alg: 'ES256', kid: key.kid })
      .setIssuer(options.issuer ?? this.issuer)
      .setAudience(options.audience ?? RESOURCE)
      .setIssuedAt()
    if (claims.sub !== null) jwt.setSubject(typeof claims.sub === 'string' ? claims.sub : 'alice')
    if (options.expiresIn !== null) jwt.setExpirationTime(options.expiresIn ?? '5m')
    return await jwt.sign(key.privateKey)
  }

  /** The claims `token()` would sign, for tokens the test assembles itself. */
  claims (extra: Json = {}): Json {
    const now = Math.floor(Date.now() / 1000)
    return { iss: this.issuer, aud: RESOURCE, sub: 'alice', scope: 'mcp tasks', iat: now, exp: now + 300, ...extra }
  }
}

/** A legacy-era initialize POST with an optional bearer token. */
export async function initialize (url: string, token: string | undefined): Promise<Response> {
  return await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(token !== undefined && { authorization: `Bearer ${token}` }) },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } } }),
  })
}

/**
 * Serves `jwks` with one signing key (`key-1`) and starts a gateway in front of the demo upstream whose
 * `auth.oauth` trusts it (`oauth` adds to or overrides the issuer, JWKS and resource; `auth` adds static
 * tokens or permissions; `options.listen: false` for tests that only inject). Close both after the tests:
 * `gw.close()`, `jwks.close()`.
 */
export async function startOAuthGateway (
  jwks: JwksServer,
  oauth: Json = {},
  auth: Json = {},
  options: StartOptions = {},
): Promise<{ gw: RunningGateway, key: SigningKey }> {
  await jwks.listen()
  const key = await signingKey('key-1')
  jwks.keys = [key]
  const gw = await startGateway({
    auth: { ...auth, oauth: { issuer: jwks.issuer, jwksUri: jwks.jwksUri, resource: RESOURCE, ...oauth } },
    upstreams: [demoStdio()],
  }, {}, options)
  return { gw, key }
}
