import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { logFingerprint } from '../../src/observability/logger.ts'
import { DEMO_MAIN } from '../helpers/built.ts'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { until } from '../helpers/until.ts'

interface Entry { client: Client, sessionId: string, changes: number }

/**
 * One list change of an upstream that tells all its sessions (the demo over HTTP keeps one tool list for all
 * of them): every client's own session announces it, and so does the gateway's; each client hears of it once,
 * however far apart the copies arrive, and hears of the next change once it has read the list again.
 */
describe('a list change announced by many upstream sessions at once', () => {
  let demo: StartedUpstream
  let gw: RunningGateway
  const clients: Entry[] = []

  beforeAll(async () => {
    demo = await startUpstream(DEMO_MAIN, ['--http', '0'])
    gw = await startGateway({ upstreams: [{ name: 'demo', transport: 'streamable-http', url: demo.url }] })
    for (let i = 0; i < 3; i++) {
      const client = await connectV1(gw.url, { capabilities: {} })
      const entry = { client, sessionId: (client.transport as StreamableHTTPClientTransport).sessionId!, changes: 0 }
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => { entry.changes++ })
      clients.push(entry)
    }
    // List changes go out on a session's GET stream, which its client opens on its own after initializing.
    await until('every client holding its GET stream', () => {
      const open = new Set(gw.logs().filter((l) => l.msg === 'opened a standalone stream').map((l) => l.sessionId))
      return clients.every((entry) => open.has(logFingerprint(entry.sessionId))) ? true : undefined
    })
  })

  afterAll(async () => {
    for (const { client } of clients) await client.close()
    await gw?.close()
    await demo?.close()
  })

  /** The gateway's debug lines about tool list changes for each client's session with message `msg` (and `outcome`). */
  const counted = (msg: string, outcome?: string): number[] => {
    const lines = gw.logs().filter((l) => l.msg === msg && l.method === 'notifications/tools/list_changed' && (outcome === undefined || l.outcome === outcome))
    return clients.map((entry) => lines.filter((l) => l.sessionId === logFingerprint(entry.sessionId)).length)
  }
  /** Tool list changes that reached each client's session in the gateway (sent, merged into a window, or held back). */
  const arrived = (): number[] => counted('list change for a session')
  const toolNames = async (entry: Entry): Promise<string[]> => (await entry.client.listTools()).tools.map((t) => t.name)

  /**
   * Toggles the demo's extra tool through a, then waits on the gateway until every copy of the change has reached
   * every client's session (`copies`: a's and b's own upstream sessions announce it to them, the gateway's to
   * everyone) and no gathering window is open, so nothing more will be sent; then until each client has received
   * what was sent. Each client has then heard `expected` notifications in all.
   */
  async function toggle (copies: number[], expected: number[], answer: string): Promise<void> {
    const [a] = clients as [Entry]
    const before = arrived()
    expect(textOf(await a.client.callTool({ name: 'demo__toggle_extra_tool', arguments: {} }))).toBe(answer)
    const want = before.map((n, i) => n + copies[i]!)
    const sent = (): number[] => counted('sent a list change')
    await until('every copy of the change reaching every session', () => arrived().every((n, i) => n >= want[i]!) ? true : undefined, {
      describeLast: () => `: arrived ${JSON.stringify(arrived())} of ${JSON.stringify(want)}`,
    })
    const windows = (): number[] => counted('list change for a session', 'window')
    await until('every gathering window closing', () => windows().every((n, i) => sent()[i] === n) ? true : undefined, {
      describeLast: () => `: ${JSON.stringify(sent())} sent of ${JSON.stringify(windows())} windows`,
    })
    await until('the notifications reaching the clients', () => clients.every((entry, i) => entry.changes >= sent()[i]!) ? true : undefined, {
      describeLast: () => `: received ${JSON.stringify(clients.map((entry) => entry.changes))} of ${JSON.stringify(sent())}`,
    })
    expect(arrived()).toEqual(want)
    expect(sent()).toEqual(expected)
    expect(clients.map((entry) => entry.changes)).toEqual(expected)
  }

  it('reaches each client once, with sessions or without, and again once the client has listed', async () => {
    const [a, b, c] = clients as [Entry, Entry, Entry]
    // a and b have sessions of their own with the upstream; c only listed (it sees what new sessions list).
    for (const { client } of [a, b]) expect(textOf(await client.callTool({ name: 'demo__echo', arguments: { text: 'hi' } }))).toBe('hi')
    expect(await toolNames(c)).not.toContain('demo__extra')
    expect(gw.gateway.upstreams[0]!.load.sessions).toBe(2)

    await toggle([2, 2, 1], [1, 1, 1], 'extra tool added')
    for (const entry of clients) expect(await toolNames(entry)).toContain('demo__extra')

    // All three listed again: each hears of the next change once more.
    await toggle([2, 2, 1], [2, 2, 2], 'extra tool removed')
    // a and c list again, b does not: the third change reaches a and c, not b, which was told and has not read since.
    expect(await toolNames(a)).not.toContain('demo__extra')
    expect(await toolNames(c)).not.toContain('demo__extra')
    await toggle([2, 2, 1], [3, 2, 3], 'extra tool added')
    // When b reads, it reads the list as it is now.
    expect(await toolNames(b)).toContain('demo__extra')
  })
})
