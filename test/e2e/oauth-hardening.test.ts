import { exportJWK, exportSPKI, generateKeyPair, SignJWT } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import type { RunningGateway } from '../helpers/gateway.ts'
import { challengeOf, injectInitialize, type InjectedReply } from '../helpers/inject.ts'
import { JwksServer, signingKey, startOAuthGateway, type SigningKey } from '../helpers/jwks-server.ts'
import { RawSession } from '../helpers/raw-session.ts'

type Json = Record<string, unknown>

const STATIC_ALICE = 'static-token-of-alice'

function base64url (value: Json): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url')
}

function refusal (reply: InjectedReply): { status: number, challenge: string, message: string } {
  const error = reply.body.error as { message?: string } | undefined
  return { status: reply.status, challenge: challengeOf(reply), message: error?.message ?? '' }
}

/** Who a token names, and which tokens are tokens at all. */
describe('auth.oauth: principals and token checks', () => {
  const jwks = new JwksServer()
  let key: SigningKey
  let gw: RunningGateway

  beforeAll(async () => {
    ({ gw, key } = await startOAuthGateway(jwks, { requiredScopes: ['mcp'] }, { tokens: [{ principal: 'alice', sha256: sha256Hex(STATIC_ALICE) }] }))
  })

  afterAll(async () => {
    await gw?.close()
    await jwks.close()
  })

  it('keeps a static-token principal and an OAuth subject of the same name apart', async () => {
    const staticAlice = await RawSession.open(gw.url, {}, { authorization: `Bearer ${STATIC_ALICE}` })
    const task = ((await staticAlice.request('tools/call', { name: 'demo__echo', arguments: { text: 'static alice' }, task: {} })).result as Json).task as Json
    await staticAlice.waitFor(String(task.taskId), ['completed'])

    const jwt = await jwks.token(key, { sub: 'alice' })
    const oauthAlice = await RawSession.open(gw.url, {}, { authorization: `Bearer ${jwt}` })
    const listed = ((await oauthAlice.request('tasks/list')).result as { tasks: Json[] }).tasks
    expect(listed.map((t) => t.taskId)).not.toContain(task.taskId)
    expect((await oauthAlice.request('tasks/get', { taskId: task.taskId })).error).toMatchObject({ code: -32602 })
    expect((await oauthAlice.request('tasks/result', { taskId: task.taskId })).error).toMatchObject({ code: -32602 })
    // The static principal's session is unknown to the OAuth subject.
    const intruder = new RawSession(gw.url, { authorization: `Bearer ${jwt}` })
    intruder.sessionId = staticAlice.sessionId
    expect((await intruder.post({ jsonrpc: '2.0', id: 9, method: 'tools/list' })).status).toBe(404)
    // The static principal still sees its own task, under the name it always had.
    expect((await staticAlice.request('tasks/get', { taskId: task.taskId })).result).toMatchObject({ status: 'completed' })
    const principals = new Set(gw.logs().filter((line) => typeof line.audit === 'string').map((line) => line.principal))
    expect(principals).toEqual(new Set(['alice']))
    await oauthAlice.request('tools/call', { name: 'demo__echo', arguments: { text: 'oauth alice' }, task: {} })
    const audited = gw.logs().filter((line) => line.audit === 'task.created').map((line) => line.principal)
    expect(audited).toEqual(['alice', 'oauth:alice'])
  })

  it('refuses alg none, HMAC keyed with the public key and unknown algorithms with 401 invalid_token', async () => {
    const rsa = await generateKeyPair('RS256', { extractable: true })
    jwks.keys = [key, { kid: 'rsa-1', privateKey: rsa.privateKey, jwk: { ...await exportJWK(rsa.publicKey), kid: 'rsa-1', use: 'sig' } }]
    const pem = new TextEncoder().encode(await exportSPKI(rsa.publicKey))
    const hmac = async (alg: string): Promise<string> => await new SignJWT(jwks.claims()).setProtectedHeader({ alg, kid: 'rsa-1' }).sign(pem)
    const cases: Array<[string, string]> = [
      ['none', `${base64url({ alg: 'none', typ: 'JWT' })}.${base64url(jwks.claims())}.`],
      ['HS256', await hmac('HS256')],
      ['HS512', await hmac('HS512')],
      ['XS999', `${base64url({ alg: 'XS999', kid: 'key-1' })}.${base64url(jwks.claims())}.${Buffer.from('sig').toString('base64url')}`],
      // What the token says is echoed in the challenge only as far as a header can carry it.
      ['X??injected??1', `${base64url({ alg: 'X\r\ninjected: 1', kid: 'key-1' })}.${base64url(jwks.claims())}.${Buffer.from('sig').toString('base64url')}`],
    ]
    for (const [alg, token] of cases) {
      const res = refusal(await injectInitialize(gw.app, token))
      expect.soft({ alg, status: res.status }).toEqual({ alg, status: 401 })
      expect.soft(res.challenge, alg).toContain('error="invalid_token"')
      expect.soft(res.message, alg).toContain(`alg ${alg}`)
    }
    jwks.keys = [key]
  })

  it('refuses a token without exp, and another kind of JWT, but accepts typ JWT and at+jwt', async () => {
    const noExp = refusal(await injectInitialize(gw.app, await jwks.token(key, {}, { expiresIn: null })))
    expect(noExp.status).toBe(401)
    expect(noExp.challenge).toContain('error="invalid_token"')
    expect(noExp.message).toContain('exp')
    const logout = refusal(await injectInitialize(gw.app, await jwks.token(key, {}, { header: { typ: 'logout+jwt' } })))
    expect(logout.status).toBe(401)
    expect(logout.message).toContain('typ')
    for (const typ of ['JWT', 'at+jwt', 'application/at+jwt']) {
      expect((await injectInitialize(gw.app, await jwks.token(key, {}, { header: { typ } }))).status, typ).toBe(200)
    }
    const odd = refusal(await injectInitialize(gw.app, await jwks.token(key, {}, { header: { typ: 'x\r\nset-cookie: a="b"' } })))
    expect(odd.status).toBe(401)
    expect(odd.challenge).toContain('its typ x??set-cookie??a??b? is not')
  })

  it('names the needed scope in 401 and 403 challenges, and answers 401 first when a token has neither principal nor scope', async () => {
    const missing = refusal(await injectInitialize(gw.app, undefined))
    expect(missing.status).toBe(401)
    expect(missing.challenge).toContain('scope="mcp"')
    const noScope = refusal(await injectInitialize(gw.app, await jwks.token(key, { scope: 'other' })))
    expect(noScope.status).toBe(403)
    expect(noScope.challenge).toContain('error="insufficient_scope"')
    expect(noScope.challenge).toContain('scope="mcp"')
    const neither = refusal(await injectInitialize(gw.app, await jwks.token(key, { sub: null, scope: 'other' })))
    expect(neither.status).toBe(401)
    expect(neither.challenge).toContain('error="invalid_token"')
    expect(neither.challenge).toContain('scope="mcp"')
  })
})

/** RFC 9068 tokens when the operator says the issuer issues them. */
describe('auth.oauth.requireTyp', () => {
  const jwks = new JwksServer()
  let key: SigningKey
  let gw: RunningGateway

  beforeAll(async () => {
    ({ gw, key } = await startOAuthGateway(jwks, { requireTyp: true }, {}, { listen: false }))
  })

  afterAll(async () => {
    await gw?.close()
    await jwks.close()
  })

  it('accepts only tokens typed at+jwt', async () => {
    for (const [typ, status] of [[undefined, 401], ['JWT', 401], ['at+jwt', 200], ['application/at+jwt', 200]] as const) {
      const res = await injectInitialize(gw.app, await jwks.token(key, {}, { header: typ === undefined ? {} : { typ } }))
      expect({ typ, status: res.status }).toEqual({ typ, status })
    }
  })
})

/** The issuer's JWKS endpoint failing: it is asked at most once per cooldown, and the failure is logged with its cause. */
describe('auth.oauth: a failing issuer', () => {
  const jwks = new JwksServer()
  let key: SigningKey
  let gw: RunningGateway

  beforeAll(async () => {
    jwks.failing = true
    ;({ gw, key } = await startOAuthGateway(jwks, { jwksCooldown: '1h' }, {}, { listen: false }))
  })

  afterAll(async () => {
    await gw?.close()
    await jwks.close()
  })

  it('fetches the keys once per cooldown: once for 100 valid tokens on a cold start and not again for 100 tokens with random key ids', async () => {
    const answer = async (): Promise<number> => (await injectInitialize(gw.app, await jwks.token(key))).status
    const answers = await Promise.all(Array.from({ length: 100 }, answer))
    expect(new Set(answers)).toEqual(new Set([503]))
    expect.soft(jwks.fetches, 'fetches for 100 valid tokens').toBe(1)
    const before = jwks.fetches
    // One after another, so that none of them can share a fetch another one started.
    const strangers = await Promise.all(Array.from({ length: 100 }, async (_, i) => await jwks.token(await signingKey(`random-${i}-${Math.random()}`))))
    const more: Array<ReturnType<typeof refusal>> = []
    for (const token of strangers) more.push(refusal(await injectInitialize(gw.app, token)))
    expect(new Set(more.map((r) => r.status))).toEqual(new Set([503]))
    expect(more[0]!.message).toContain('signing keys cannot be fetched')
    expect.soft(jwks.fetches - before, 'fetches for 100 tokens with random key ids').toBe(0)
    const failures = gw.logs().filter((line) => line.msg === 'could not fetch the issuer\'s signing keys')
    expect(failures).toHaveLength(1)
    expect(JSON.stringify(failures[0])).toContain('500')
  })
})
