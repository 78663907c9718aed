import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { toNodeHandler } from '@modelcontextprotocol/node'
import { createMcpHandler, McpServer as ModernServer } from '@modelcontextprotocol/server'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { textOf } from '../helpers/clients.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { RawSession } from '../helpers/raw-session.ts'
import { startStatelessUpstream } from '../helpers/stateless-upstream.ts'

type Json = Record<string, unknown>

const ALICE = 'Bearer alice-own-upstream-credential'
const BOB = 'Bearer bob-own-upstream-credential'

interface Echo {
  url: string
  close (): Promise<void>
}

/** A 2026-07-28 HTTP MCP server (v2 SDK) whose tool `whoami` answers with the request's Authorization header. */
async function startModernHeaderEcho (): Promise<Echo> {
  const handler = createMcpHandler(({ requestInfo }) => {
    const server = new ModernServer({ name: 'modern-header-echo', version: '1.0.0' }, { capabilities: { tools: {} } })
    server.registerTool('whoami', { description: 'the Authorization header of this request' }, async () => ({
      content: [{ type: 'text', text: requestInfo?.headers.get('authorization') ?? '(none)' }],
    }))
    return server
  })
  const node = toNodeHandler(handler)
  const http = createServer((req, res) => { node(req, res).catch(() => res.destroy()) })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    close: async () => await new Promise((resolve) => { http.closeAllConnections(); http.close(() => resolve()) }),
  }
}

/** A legacy HTTP MCP server (v1 SDK) whose tool `whoami` answers with the Authorization header the request reached it with. */
async function startHeaderEcho (): Promise<Echo> {
  return await startStatelessUpstream(() => {
    const server = new McpServer({ name: 'header-echo', version: '1.0.0' })
    server.registerTool('whoami', { description: 'the Authorization header of this request' }, async (extra) => ({
      content: [{ type: 'text', text: String(extra.requestInfo?.headers.authorization ?? '(none)') }],
    }))
    return server
  })
}

describe('forwardAuthorization with auth off: a caller\'s credential is never lent to another', () => {
  let echo: Echo
  let modern: Echo
  let gw: RunningGateway

  beforeAll(async () => {
    echo = await startHeaderEcho()
    modern = await startModernHeaderEcho()
    const upstream = { transport: 'streamable-http', url: echo.url, era: 'legacy', forwardAuthorization: true }
    gw = await startGateway({
      upstreams: [
        { ...upstream, name: 'own' },
        { ...upstream, name: 'common', sessions: 'shared' },
        { ...upstream, name: 'each', sessions: 'per-call' },
        { ...upstream, name: 'modern', url: modern.url, era: 'auto' },
      ],
    })
  })

  afterAll(async () => {
    await gw?.close()
    await echo?.close()
    await modern?.close()
  })

  const whoami = async (client: ModernRaw, upstream: string): Promise<string> => textOf(await client.result('tools/call', { name: `${upstream}__whoami`, arguments: {} }))

  it('gives a 2026-07-28 client without an Authorization header a session of its own, in every sharing mode', async () => {
    expect(gw.gateway.upstreams[3]!.era).toBe('2026-07-28')
    for (const upstream of ['own', 'common', 'each', 'modern']) {
      const alice = new ModernRaw(gw.url, {}, { authorization: ALICE })
      const bob = new ModernRaw(gw.url, {}, { authorization: BOB })
      const nobody = new ModernRaw(gw.url)
      expect(await whoami(alice, upstream)).toBe(ALICE)
      // The same anonymous principal and capabilities, other credentials (or none): never alice's session.
      expect(await whoami(nobody, upstream)).toBe('(none)')
      expect(await whoami(bob, upstream)).toBe(BOB)
      expect(await whoami(alice, upstream)).toBe(ALICE)
      expect(await whoami(nobody, upstream)).toBe('(none)')
    }
  })

  it('warns at start, once per upstream, that each caller\'s own token leaves the gateway', () => {
    const warnings = gw.logs().filter((line) => line.level === 40 && String(line.msg).includes('(forwardAuthorization)'))
    expect(warnings.map((line) => line.upstream).sort()).toEqual(['common', 'each', 'modern', 'own'])
    for (const line of warnings) expect(line.msg).toMatch(new RegExp(`^upstream '${String(line.upstream)}' is sent each caller's own Authorization header \\(forwardAuthorization\\): a token issued for the gateway reaches another server`))
  })

  it('keeps the credential out of session keys and the log', async () => {
    const session = await RawSession.open(gw.url, {}, { authorization: ALICE })
    expect(textOf((await session.request('tools/call', { name: 'own__whoami', arguments: {} })).result as Json)).toBe(ALICE)
    await session.close()
    const log = JSON.stringify(gw.logs())
    for (const secret of [ALICE, BOB]) expect(log).not.toContain(secret.slice('Bearer '.length))
  })
})
