import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { McpError } from '@modelcontextprotocol/sdk/types.js'
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client'
import { parseConfig } from '../../src/config/load.ts'
import { buildGateway } from '../../src/gateway.ts'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'

/** Several upstreams of every transport behind one endpoint, and what happens when one of them fails. */
describe('several upstreams behind one endpoint', () => {
  let v1: StartedUpstream
  let sse: StartedUpstream
  let gw: RunningGateway
  let client: Client

  beforeAll(async () => {
    ;[v1, sse] = await Promise.all([
      startUpstream('test/fixtures/v1-http-upstream.ts', ['--port', '0']),
      startUpstream('test/fixtures/legacy-sse-upstream.ts', ['--port', '0'], { path: '/sse' }),
    ])
    gw = await startGateway({
      upstreams: [
        demoStdio({ tools: { deny: ['throw_*', 'touch_resource'] } }),
        { name: 'plain', transport: 'streamable-http', url: v1.url, prefix: '', tools: { allow: ['add', 'echo', 'slow', 'cancellations', 'whoami'] } },
        { name: 'old', transport: 'sse', url: sse.url },
        { name: 'gone', transport: 'streamable-http', url: 'http://127.0.0.1:9/mcp', timeouts: { connect: '2s' }, restart: { initialDelay: '1h' } },
      ],
    })
    client = await connectV1(gw.url)
  })

  afterAll(async () => {
    await client?.close()
    await gw?.close()
    await Promise.all([v1?.close(), sse?.close()])
  })

  it('merges prefixed, pass-through and legacy SSE tools, honouring allow/deny lists', async () => {
    const names = (await client.listTools()).tools.map((t) => t.name)
    expect(names).toEqual(expect.arrayContaining(['demo__slow', 'add', 'echo', 'slow', 'old__echo']))
    expect(names).not.toContain('demo__throw_error')
    expect(names).not.toContain('demo__touch_resource')
    expect(names.some((n) => n.startsWith('gone__'))).toBe(false)
    expect(textOf(await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } }))).toBe('5')
    expect(textOf(await client.callTool({ name: 'old__echo', arguments: { text: 'over sse' } }))).toContain('over sse')
  })

  it('keeps serving while an upstream is down at start, and names it in /readyz and in errors', async () => {
    const ready = await gw.gateway.app.inject({ url: '/readyz' })
    expect(ready.statusCode).toBe(200)
    const body = ready.json() as { status: string, upstreams: Array<{ name: string, state: string, reason?: string }> }
    expect(body.status).toBe('degraded')
    expect(body.upstreams.find((u) => u.name === 'gone')).toMatchObject({ state: 'down', reason: expect.stringContaining('connect failed') })
    const error = await client.callTool({ name: 'gone__anything', arguments: {} }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(McpError)
    expect((error as McpError).message).toContain("upstream 'gone' is unavailable")
  })

  it('cancels the upstream request when the client cancels its call', async () => {
    const controller = new AbortController()
    const call = client.callTool({ name: 'slow', arguments: { duration: 20_000, steps: 200 } }, undefined, {
      signal: controller.signal,
      onprogress: () => controller.abort('user pressed stop'),
    })
    await expect(call).rejects.toThrow()
    let seen: Array<{ reason: string }> = []
    for (let i = 0; i < 100 && seen.length === 0; i++) {
      seen = JSON.parse(textOf(await client.callTool({ name: 'cancellations', arguments: {} }))) as Array<{ reason: string }>
    }
    expect(seen).toHaveLength(1)
  })

  it('serves a v2 SDK client too', async () => {
    const v2 = new V2Client({ name: 'e2e-v2', version: '1.0.0' })
    await v2.connect(new V2Transport(new URL(gw.url)))
    const result = await v2.callTool({ name: 'echo', arguments: { text: 'from v2' } })
    expect(textOf(result)).toBe('from v2')
    await v2.close()
  })

  it('fails a call whose upstream dies mid-call with an error naming the upstream', async () => {
    const call = client.callTool({ name: 'slow', arguments: { duration: 30_000, steps: 300 } }, undefined, {
      onprogress: () => { void v1.close() },
    })
    const error = await call.catch((e: unknown) => e)
    expect(error).toBeInstanceOf(McpError)
    expect((error as McpError).message).toContain("upstream 'plain'")
  })
})

describe('catalog collisions', () => {
  it('stop the start and name both upstreams', async () => {
    const config = parseConfig({
      store: { kind: 'memory' },
      logging: { level: 'silent' },
      upstreams: [demoStdio({ name: 'one', prefix: '' }), demoStdio({ name: 'two', prefix: '' })],
    })
    const gateway = await buildGateway(config)
    const failure = await gateway.ready.catch((e: unknown) => e)
    await gateway.close()
    expect(failure).toMatchObject({ code: 'GW_ERR_CATALOG_COLLISION' })
    expect((failure as Error).message).toMatch(/tools 'echo' is offered by upstream 'one' and by upstream 'two'/)
  })
})
