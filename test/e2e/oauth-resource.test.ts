import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import type { RunningGateway } from '../helpers/gateway.ts'
import { challengeOf, injectInitialize } from '../helpers/inject.ts'
import { JwksServer, RESOURCE, signingKey, startOAuthGateway, type SigningKey } from '../helpers/jwks-server.ts'
import { RawSession } from '../helpers/raw-session.ts'

type Json = Record<string, unknown>

const STATIC_TOKEN = 'static-token-for-ops'

/** The OAuth 2.1 resource server mode: JWT access tokens checked against a real JWKS endpoint. */
describe('auth.oauth: JWT access tokens', () => {
  const jwks = new JwksServer()
  let first: SigningKey
  let gw: RunningGateway

  beforeAll(async () => {
    ({ gw, key: first } = await startOAuthGateway(jwks, { scopesSupported: ['mcp', 'tasks'], requiredScopes: ['mcp'], jwksCooldown: '0s' }, {
      tokens: [{ principal: 'ops', sha256: sha256Hex(STATIC_TOKEN), scopes: ['tasks'] }],
      permissions: [{ scope: 'tasks', upstreams: ['demo'] }, { scope: 'echo', tools: ['demo__echo'] }],
    }))
  })

  afterAll(async () => {
    await gw?.close()
    await jwks.close()
  })

  it('serves the protected resource metadata and points to it from every 401', async () => {
    const metadata = await gw.app.inject({ url: '/.well-known/oauth-protected-resource/mcp' })
    expect(metadata.statusCode).toBe(200)
    expect(metadata.json()).toEqual({ resource: RESOURCE, authorization_servers: [jwks.issuer], bearer_methods_supported: ['header'], scopes_supported: ['mcp', 'tasks'] })
    const refused = await injectInitialize(gw.app, undefined)
    expect(refused.status).toBe(401)
    expect(challengeOf(refused)).toBe('Bearer realm="mcp-task-gateway", resource_metadata="https://gateway.test/.well-known/oauth-protected-resource/mcp", scope="mcp"')
  })

  it('accepts a valid token, binds the session to its subject, and still accepts the static tokens', async () => {
    const alice = await jwks.token(first, { sub: 'alice' })
    const session = await RawSession.open(gw.url, {}, { authorization: `Bearer ${alice}` })
    const tools = await session.request('tools/list')
    expect(((tools.result as Json).tools as Json[]).length).toBeGreaterThan(0)
    // Another principal's token cannot use alice's session.
    const bob = new RawSession(gw.url, { authorization: `Bearer ${await jwks.token(first, { sub: 'bob' })}` })
    bob.sessionId = session.sessionId
    expect((await bob.post({ jsonrpc: '2.0', id: 2, method: 'tools/list' })).status).toBe(404)
    expect((await injectInitialize(gw.app, STATIC_TOKEN)).status).toBe(200)
  })

  it('maps the token\'s scope claim to the tools it may list and call', async () => {
    const listed = async (scope: string | string[], claim = 'scope'): Promise<string[]> => {
      const session = await RawSession.open(gw.url, {}, { authorization: `Bearer ${await jwks.token(first, { scope: undefined, [claim]: scope })}` })
      return ((await session.request('tools/list')).result as { tools: Json[] }).tools.map((tool) => String(tool.name))
    }
    expect(await listed('mcp echo')).toEqual(['demo__echo'])
    expect(await listed(['mcp', 'echo'], 'scp')).toEqual(['demo__echo'])
    expect(await listed('mcp')).toEqual([])
    expect((await listed('mcp tasks')).length).toBeGreaterThan(1)
  })

  it('refuses expired, foreign and tampered tokens with invalid_token, and a token without the required scope with 403', async () => {
    const cases: Array<[string, string, number, string]> = [
      ['expired', await jwks.token(first, {}, { expiresIn: Math.floor(Date.now() / 1000) - 120 }), 401, 'has expired'],
      ['another issuer', await jwks.token(first, {}, { issuer: 'https://elsewhere.test/' }), 401, 'is not valid'],
      ['another audience', await jwks.token(first, {}, { audience: 'https://other.test/mcp' }), 401, 'is not valid'],
      ['tampered', `${(await jwks.token(first)).slice(0, -4)}AAAA`, 401, 'is not valid'],
      ['no mcp scope', await jwks.token(first, { scope: 'tasks' }), 403, 'lacks the scope mcp'],
    ]
    for (const [what, token, status, message] of cases) {
      const res = await injectInitialize(gw.app, token)
      expect(res.status, what).toBe(status)
      const challenge = challengeOf(res)
      expect(challenge, what).toContain(status === 403 ? 'error="insufficient_scope"' : 'error="invalid_token"')
      expect(challenge, what).toContain('resource_metadata=')
      expect(JSON.stringify(res.body), what).toContain(message)
    }
  })

  it('writes audit lines with the principal for task create, finish, retrieve and cancel, and never a token', async () => {
    const token = await jwks.token(first, { sub: 'dora' })
    const session = await RawSession.open(gw.url, {}, { authorization: `Bearer ${token}` })
    const quick = ((await session.request('tools/call', { name: 'demo__echo', arguments: { text: 'audited' }, task: {} })).result as Json).task as Json
    const result = await session.request('tasks/result', { taskId: quick.taskId })
    expect(JSON.stringify(result.result)).toContain('audited')
    const slow = ((await session.request('tools/call', { name: 'demo__slow', arguments: { duration: 30_000 }, task: {} })).result as Json).task as Json
    expect((await session.request('tasks/cancel', { taskId: slow.taskId })).result).toMatchObject({ status: 'cancelled' })
    const audit = gw.logs().filter((line) => typeof line.audit === 'string' && line.principal === 'oauth:dora')
    expect(audit.map((line) => [line.audit, line.taskId])).toEqual(expect.arrayContaining([
      ['task.created', quick.taskId], ['task.finished', quick.taskId], ['task.retrieved', quick.taskId],
      ['task.created', slow.taskId], ['task.cancelled', slow.taskId],
    ]))
    const text = JSON.stringify(gw.logs())
    for (const secret of [token, token.split('.')[2]!, STATIC_TOKEN]) expect(text).not.toContain(secret)
  })

  it('answers 503 when the issuer\'s keys cannot be fetched, not that the token is invalid', async () => {
    jwks.failing = true
    try {
      const res = await injectInitialize(gw.app, await jwks.token(await signingKey('key-unseen')))
      expect(res.status).toBe(503)
      expect(JSON.stringify(res.body)).toContain('signing keys cannot be fetched')
    } finally {
      jwks.failing = false
    }
  })

  it('follows a key rotation: a token signed with a new key id is accepted once the issuer publishes it', async () => {
    const second = await signingKey('key-2')
    const token = await jwks.token(second, { sub: 'carol' })
    expect((await injectInitialize(gw.app, token)).status).toBe(401)
    jwks.keys = [first, second]
    const before = jwks.fetches
    expect((await injectInitialize(gw.app, token)).status).toBe(200)
    expect(jwks.fetches).toBeGreaterThan(before)
    // The old key still works while it is published; once withdrawn, and the keys fetched again, it does not.
    jwks.keys = [second]
    const stranger = await signingKey('key-3')
    expect((await injectInitialize(gw.app, await jwks.token(stranger))).status).toBe(401)
    expect((await injectInitialize(gw.app, await jwks.token(first))).status).toBe(401)
  })
})
