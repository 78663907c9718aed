import { setTimeout as delay } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { DEMO_MAIN } from '../helpers/built.ts'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'

/** How long the test goes on listening after the first notification: ten times the gateway's gathering window. */
const QUIET_MS = 500

/**
 * One list change of an upstream that tells all its sessions (the demo over HTTP keeps one tool list for all
 * of them): every client's own session announces it, and so does the gateway's; each client hears of it once.
 */
describe('a list change announced by many upstream sessions at once', () => {
  let demo: StartedUpstream
  let gw: RunningGateway
  const clients: Array<{ client: Client, changes: number }> = []

  beforeAll(async () => {
    demo = await startUpstream(DEMO_MAIN, ['--http', '0'])
    gw = await startGateway({ upstreams: [{ name: 'demo', transport: 'streamable-http', url: demo.url }] })
    for (let i = 0; i < 3; i++) {
      const entry = { client: await connectV1(gw.url, { capabilities: {} }), changes: 0 }
      entry.client.setNotificationHandler(ToolListChangedNotificationSchema, () => { entry.changes++ })
      clients.push(entry)
    }
  })

  afterAll(async () => {
    for (const { client } of clients) await client.close()
    await gw?.close()
    await demo?.close()
  })

  it('reaches each client once, with sessions or without', async () => {
    const [a, b, c] = clients as [typeof clients[0], typeof clients[0], typeof clients[0]]
    // a and b have sessions of their own with the upstream; c only listed (it sees what new sessions list).
    for (const { client } of [a, b]) expect(textOf(await client.callTool({ name: 'demo__echo', arguments: { text: 'hi' } }))).toBe('hi')
    expect((await c.client.listTools()).tools.map((t) => t.name)).not.toContain('demo__extra')
    expect(gw.gateway.upstreams[0]!.load.sessions).toBe(2)

    expect(textOf(await a.client.callTool({ name: 'demo__toggle_extra_tool', arguments: {} }))).toBe('extra tool added')
    await vi.waitFor(() => {
      for (const entry of clients) expect(entry.changes).toBeGreaterThanOrEqual(1)
    }, { timeout: 10_000, interval: 20 })
    await delay(QUIET_MS)
    expect(clients.map((entry) => entry.changes)).toEqual([1, 1, 1])
    for (const { client } of clients) expect((await client.listTools()).tools.map((t) => t.name)).toContain('demo__extra')
  })
})
