import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { postRpc } from '../helpers/inject.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { RawSession } from '../helpers/raw-session.ts'
import { textOf } from '../helpers/clients.ts'
import { startStatelessUpstream } from '../helpers/stateless-upstream.ts'

type Json = Record<string, unknown>

const TOKENS = { alice: 'alice-token-0123456789', bob: 'bob-token-0123456789', carol: 'carol-token-0123456789', dave: 'dave-token-0123456789' }
const bearer = (who: keyof typeof TOKENS): Record<string, string> => ({ authorization: `Bearer ${TOKENS[who]}` })
/** The credential the operator configured for the upstream, from the environment. */
const UPSTREAM_SECRET = 'Bearer upstream-service-credential'

/**
 * An HTTP MCP server that answers with the Authorization header each request reached it with:
 * `whoami` (tool), `greet` (prompt) and secret://note (resource). Every header it saw is recorded.
 */
async function startHeaderEcho (): Promise<{ url: string, seen: string[], close: () => Promise<void> }> {
  const seen: string[] = []
  const build = (): McpServer => {
    const server = new McpServer({ name: 'header-echo', version: '1.0.0' })
    const auth = (extra: { requestInfo?: { headers: Record<string, string | string[] | undefined> } }): string => String(extra.requestInfo?.headers.authorization ?? '(none)')
    server.registerTool('whoami', { description: 'the Authorization header of this request' }, async (extra) => ({ content: [{ type: 'text', text: auth(extra) }] }))
    server.registerPrompt('greet', { description: 'a greeting' }, async (extra) => ({ messages: [{ role: 'user', content: { type: 'text', text: auth(extra) } }] }))
    server.registerResource('note', 'secret://note', {}, async (uri, extra) => ({ contents: [{ uri: uri.href, text: auth(extra) }] }))
    return server
  }
  const upstream = await startStatelessUpstream(build, (req) => { seen.push(req.headers.authorization ?? '(none)') })
  return { ...upstream, seen }
}

const names = (list: unknown, key = 'name'): string[] => (list as Json[]).map((entry) => String(entry[key])).sort()

describe('permissions by scope, and upstream credentials', () => {
  let echo: Awaited<ReturnType<typeof startHeaderEcho>>
  let gw: RunningGateway

  beforeAll(async () => {
    echo = await startHeaderEcho()
    const token = (principal: keyof typeof TOKENS, scopes: string[]): Json => ({ principal, sha256: sha256Hex(TOKENS[principal]), scopes })
    gw = await startGateway({
      auth: {
        tokens: [token('alice', ['admin']), token('bob', ['echo']), token('carol', []), token('dave', ['notes'])],
        permissions: [
          { scope: 'admin', upstreams: ['*'] },
          { scope: 'echo', tools: ['demo__echo'] },
          { scope: 'notes', upstreams: ['notes', 'plain'] },
        ],
      },
      limits: { sessionsPerPrincipal: 3 },
      upstreams: [
        demoStdio(),
        // eslint-disable-next-line no-template-curly-in-string
        { name: 'notes', transport: 'streamable-http', url: echo.url, era: 'legacy', forwardAuthorization: true, headers: { Authorization: '${UPSTREAM_AUTH}' } },
        // eslint-disable-next-line no-template-curly-in-string
        { name: 'plain', transport: 'streamable-http', url: echo.url, era: 'legacy', headers: { Authorization: '${UPSTREAM_AUTH}' }, resources: { deny: ['*'] } },
      ],
    }, { UPSTREAM_AUTH: UPSTREAM_SECRET })
  })

  afterAll(async () => {
    await gw?.close()
    await echo?.close()
  })

  it('lists only what the caller\'s scopes grant, in both eras', async () => {
    type Listed = { tools: string[], prompts: string[], resources: string[], modern: string[], scope: unknown }
    const listed = async (who: keyof typeof TOKENS): Promise<Listed> => {
      const session = await RawSession.open(gw.url, {}, bearer(who))
      const tools = names(((await session.request('tools/list')).result as Json).tools)
      const prompts = names(((await session.request('prompts/list')).result as Json).prompts)
      const resources = names(((await session.request('resources/list')).result as Json).resources, 'uri')
      await session.close()
      const modern = await new ModernRaw(gw.app, {}, bearer(who)).result('tools/list')
      return { tools, prompts, resources, modern: names(modern.tools), scope: modern.cacheScope }
    }
    const alice = await listed('alice')
    expect(alice.tools).toEqual(expect.arrayContaining(['demo__echo', 'demo__slow', 'notes__whoami', 'plain__whoami']))
    expect(alice.prompts).toEqual(expect.arrayContaining(['notes__greet', 'plain__greet']))
    expect(alice.resources).toContain('secret://note')
    expect(alice.modern).toEqual(alice.tools)
    const bob = await listed('bob')
    expect(bob).toEqual({ tools: ['demo__echo'], prompts: [], resources: [], modern: ['demo__echo'], scope: 'private' })
    expect(await listed('carol')).toEqual({ tools: [], prompts: [], resources: [], modern: [], scope: 'private' })
    const dave = await listed('dave')
    expect(dave.tools).toEqual(['notes__whoami', 'plain__whoami'])
    expect(dave.resources).toEqual(['secret://note'])
  })

  it('refuses what the scopes do not grant exactly as if it did not exist, for calls, tasks, prompts and resources', async () => {
    const bob = await RawSession.open(gw.url, {}, bearer('bob'))
    const refusal = async (method: string, params: Json, from: string, to: string): Promise<void> => {
      const denied = await bob.request(method, params)
      const unknown = await bob.request(method, JSON.parse(JSON.stringify(params).replaceAll(from, to)) as Json)
      expect(unknown.error, `${method} of an unknown name is refused`).toBeDefined()
      expect(denied.error).toEqual(JSON.parse(JSON.stringify(unknown.error).replaceAll(to, from)))
    }
    await refusal('tools/call', { name: 'demo__slow', arguments: { seconds: 1 } }, 'demo__slow', 'demo__nothing')
    await refusal('tools/call', { name: 'notes__whoami', arguments: {}, task: { ttl: 60_000 } }, 'notes__whoami', 'notes__nothing')
    await refusal('prompts/get', { name: 'notes__greet' }, 'notes__greet', 'notes__nothing')
    await refusal('resources/read', { uri: 'secret://note' }, 'secret://note', 'secret://nothing')
    expect(textOf((await bob.request('tools/call', { name: 'demo__echo', arguments: { text: 'allowed' } })).result as Json)).toContain('allowed')
    await bob.close()

    const modern = new ModernRaw(gw.app, {}, bearer('bob'))
    const denied = await modern.request('tools/call', { name: 'demo__slow', arguments: {} })
    const unknown = await modern.request('tools/call', { name: 'demo__nothing', arguments: {} })
    expect(denied.status).toBe(unknown.status)
    expect((denied.body.error as Json).message).toBe(String((unknown.body.error as Json).message).replace('demo__nothing', 'demo__slow'))
  })

  it('sends the caller\'s own token only to the upstream configured with forwardAuthorization', async () => {
    const alice = await RawSession.open(gw.url, {}, bearer('alice'))
    const dave = await RawSession.open(gw.url, {}, bearer('dave'))
    const call = async (session: RawSession, name: string): Promise<string> => textOf((await session.request('tools/call', { name, arguments: {} })).result as Json)
    expect(await call(alice, 'notes__whoami')).toBe(`Bearer ${TOKENS.alice}`)
    // Connections carrying a caller's token are never lent to another caller.
    expect(await call(dave, 'notes__whoami')).toBe(`Bearer ${TOKENS.dave}`)
    expect(await call(alice, 'notes__whoami')).toBe(`Bearer ${TOKENS.alice}`)
    expect(await call(alice, 'plain__whoami')).toBe(UPSTREAM_SECRET)

    const read = (await dave.request('resources/read', { uri: 'secret://note' })).result as Json
    expect((read.contents as Json[])[0]!.text).toBe(`Bearer ${TOKENS.dave}`)
    const prompt = (await alice.request('prompts/get', { name: 'plain__greet' })).result as Json
    expect(JSON.stringify(prompt)).toContain(UPSTREAM_SECRET)

    // A task runs later, in the background, still with its creator's token.
    const created = (await alice.request('tools/call', { name: 'notes__whoami', arguments: {}, task: { ttl: 60_000 } })).result as Json
    const taskId = String((created.task as Json).taskId)
    expect(textOf((await alice.request('tasks/result', { taskId })).result as Json)).toBe(`Bearer ${TOKENS.alice}`)
    const modern = await new ModernRaw(gw.app, {}, bearer('dave')).result('tools/call', { name: 'notes__whoami', arguments: {} })
    expect(textOf(modern)).toBe(`Bearer ${TOKENS.dave}`)
    await alice.close()
    await dave.close()

    // The upstream without forwardAuthorization never saw a client's token; the other saw only the configured one
    // besides, and never the token of a caller whose scopes do not grant it (bob and carol only listed).
    const clientTokens = new Set(Object.values(TOKENS).map((t) => `Bearer ${t}`))
    expect(echo.seen.filter((h) => !clientTokens.has(h) && h !== UPSTREAM_SECRET)).toEqual([])
    expect(echo.seen.filter((h) => h === `Bearer ${TOKENS.bob}` || h === `Bearer ${TOKENS.carol}`)).toEqual([])

    // Forwarded or not, no token and no upstream credential reaches the log (captured at debug level).
    const log = JSON.stringify(gw.logs())
    for (const secret of [...Object.values(TOKENS), UPSTREAM_SECRET.slice('Bearer '.length)]) expect(log).not.toContain(secret)
  })

  it('limits the sessions one principal holds at once (limits.sessionsPerPrincipal)', async () => {
    const sessions = [await RawSession.open(gw.url, {}, bearer('carol')), await RawSession.open(gw.url, {}, bearer('carol')), await RawSession.open(gw.url, {}, bearer('carol'))]
    const initialize = { jsonrpc: '2.0', id: 7, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'e2e', version: '1' } } }
    const refused = await postRpc(gw.app, initialize, bearer('carol'))
    expect(refused.status).toBe(429)
    const body = refused.body
    expect(body).toMatchObject({ jsonrpc: '2.0', id: 7, error: { code: -32057 } })
    expect(String((body.error as Json).message)).toContain('limits.sessionsPerPrincipal')
    // Another principal is not affected; ending a session makes room.
    const other = await RawSession.open(gw.url, {}, bearer('bob'))
    await other.close()
    await sessions.pop()!.close()
    sessions.push(await RawSession.open(gw.url, {}, bearer('carol')))
    for (const session of sessions) await session.close()
  })
})
