import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import { ListRootsRequestSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js'
import { REPO_ROOT, startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'

type Json = Record<string, unknown>

const EVERYTHING = join(REPO_ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')

/** Hands on everything `inner` carries, and records each message the client receives before the SDK reads it. */
function recording (inner: Transport, received: JSONRPCMessage[]): Transport {
  const outer: Transport = {
    start: async () => { await inner.start() },
    send: async (message, options) => { await inner.send(message, options) },
    close: async () => { await inner.close() },
    setProtocolVersion: (version) => inner.setProtocolVersion?.(version),
    get sessionId () { return inner.sessionId },
  }
  inner.onmessage = (message, extra) => {
    received.push(message)
    outer.onmessage?.(message, extra)
  }
  inner.onclose = () => outer.onclose?.()
  inner.onerror = (error) => outer.onerror?.(error)
  return outer
}

/**
 * Connects a real SDK v1 client that declares roots, and returns the first `count` roots/list requests it
 * receives as they came on the wire (their ids left out: the gateway gives relayed requests its own).
 */
async function rootsRequests (
  transport: Transport,
  count: number,
  afterConnect: (client: Client) => Promise<unknown> = async () => {},
): Promise<{ requests: Json[], client: Client }> {
  const received: JSONRPCMessage[] = []
  const client = new Client({ name: 'e2e-v1', version: '1.0.0' }, { capabilities: { roots: { listChanged: true } } })
  let asked = 0
  let done: () => void = () => {}
  const enough = new Promise<void>((resolve) => { done = resolve })
  client.setRequestHandler(ListRootsRequestSchema, () => {
    if (++asked === count) done()
    return { roots: [{ uri: 'file:///srv/project', name: 'project' }] }
  })
  await client.connect(recording(transport, received))
  await afterConnect(client)
  await enough
  const requests = received
    .filter((m) => (m as Json).method === 'roots/list')
    .slice(0, count)
    .map((m) => {
      const { id: _id, ...rest } = m as Json
      return rest
    })
  return { requests, client }
}

describe('requests the upstream sends, as the client receives them', () => {
  let everything: StartedUpstream
  let gw: RunningGateway
  const clients: Client[] = []

  beforeAll(async () => {
    everything = await startUpstream('test/fixtures/everything-http.mjs', [], { readyTimeoutMs: 60_000 })
    gw = await startGateway({
      upstreams: [
        { name: 'stdio', transport: 'stdio', command: process.execPath, args: [EVERYTHING, 'stdio'], timeouts: { connect: '60s' } },
        // Both offer the same resources: the second's are left out, as a collision would stop the gateway.
        { name: 'http', transport: 'streamable-http', url: everything.url, resources: { deny: ['*'] }, timeouts: { connect: '60s' } },
      ],
    })
  }, 90_000)

  afterAll(async () => {
    for (const client of clients) await client.close()
    await gw?.close()
    await everything?.close()
  })

  it('relays server-everything\'s roots/list over stdio and Streamable HTTP exactly as it sends it, with no params added', async () => {
    const overStdio = await rootsRequests(new StdioClientTransport({ command: process.execPath, args: [EVERYTHING, 'stdio'], stderr: 'ignore' }), 1)
    const overHttp = await rootsRequests(new StreamableHTTPClientTransport(new URL(everything.url)), 1)
    clients.push(overStdio.client, overHttp.client)
    // What the server sends: no params at all.
    expect(overStdio.requests).toEqual([{ jsonrpc: '2.0', method: 'roots/list' }])
    expect(overHttp.requests).toEqual(overStdio.requests)

    // Through the gateway the client's first call opens its sessions with both upstreams, and each asks.
    const through = await rootsRequests(new StreamableHTTPClientTransport(new URL(gw.url)), 2, async (client) => {
      await client.callTool({ name: 'stdio__echo', arguments: { message: 'open the sessions' } })
    })
    clients.push(through.client)
    expect(through.requests).toEqual([...overStdio.requests, ...overHttp.requests])
  })
})
