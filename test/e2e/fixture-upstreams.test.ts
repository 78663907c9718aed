// Smoke test of the fixture upstreams the gateway is tested against: the v1-SDK Streamable HTTP fixture
// and the legacy HTTP+SSE fixture, each driven by a real v1 SDK client.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import type { RecordedCancellation } from '../fixtures/v1-http-upstream.ts'

import { textOf } from '../helpers/clients.ts'
import { call, createTestClient, startAndCancelSlow, slowWithProgress } from '../helpers/demo-client.ts'

describe('v1 SDK Streamable HTTP fixture', () => {
  let upstream: StartedUpstream
  let client: Client
  beforeAll(async () => {
    upstream = await startUpstream('test/fixtures/v1-http-upstream.ts', ['--port', '0', '--name', 'v1-fixture'])
    client = createTestClient().client
    await client.connect(new StreamableHTTPClientTransport(new URL(upstream.url)))
  })
  afterAll(async () => {
    await client.close()
    await upstream.close()
  })

  it('serves add, whoami, echo, slow, running, prompt and resource', async () => {
    expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual(['add', 'whoami', 'echo', 'slow', 'running', 'cancellations'])
    expect(textOf(await call(client, 'add', { a: 2, b: 3 }))).toBe('5')
    expect(textOf(await call(client, 'whoami'))).toBe('v1-fixture')
    expect(textOf(await call(client, 'echo', { text: 'hi' }))).toBe('hi')
    await slowWithProgress(client)
    const prompt = await client.getPrompt({ name: 'hello', arguments: { name: 'Bob' } })
    expect(JSON.stringify(prompt.messages)).toContain('Say hello to Bob.')
    const info = await client.readResource({ uri: 'v1://info' })
    expect(JSON.stringify(info.contents)).toContain('v1-fixture')
  })

  it('counts the slow calls that are running', async () => {
    expect(textOf(await call(client, 'running'))).toBe('0')
    const controller = new AbortController()
    let started!: () => void
    const firstProgress = new Promise<void>((resolve) => { started = resolve })
    const pending = client.callTool({ name: 'slow', arguments: { duration: 60_000, steps: 600 } }, undefined, {
      signal: controller.signal,
      onprogress: () => started(),
    })
    await firstProgress
    expect(textOf(await call(client, 'running'))).toBe('1')
    controller.abort('counted')
    await expect(pending).rejects.toThrow(/counted/)
    await vi.waitFor(async () => { expect(textOf(await call(client, 'running'))).toBe('0') })
  })

  it('records the cancellations it receives', async () => {
    await startAndCancelSlow(client)
    await vi.waitFor(async () => {
      const recorded = JSON.parse(textOf(await call(client, 'cancellations'))) as RecordedCancellation[]
      expect(recorded).toContainEqual(expect.objectContaining({ reason: 'test cancel', steps: 600 }))
    })
  })
})

describe('legacy HTTP+SSE fixture', () => {
  let upstream: StartedUpstream
  let client: Client
  beforeAll(async () => {
    upstream = await startUpstream('test/fixtures/legacy-sse-upstream.ts', ['--port', '0'], { path: '/sse' })
    client = createTestClient().client
    await client.connect(new SSEClientTransport(new URL(upstream.url)))
  })
  afterAll(async () => {
    await client.close()
    await upstream.close()
  })

  it('serves echo and ping_back', async () => {
    expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual(['echo', 'ping_back'])
    expect(textOf(await call(client, 'echo', { text: 'over sse' }))).toBe('over sse')
    expect(textOf(await call(client, 'ping_back'))).toBe('pong: the client answered ping')
  })
})
