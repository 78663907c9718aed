// Smoke test of the upstream servers the gateway is tested against: the bundled demo upstream
// (src/demo, over stdio and over Streamable HTTP). Each is driven by a real v1 SDK client that declares elicitation,
// sampling and roots and answers those requests. No assertion depends on wall-clock timing.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { DEMO_TOOL_NAMES } from '../../src/demo/demo-server.ts'
import { REPO_ROOT, startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { DEMO_MAIN } from '../helpers/built.ts'
import { textOf } from '../helpers/clients.ts'
import { call, createTestClient, rpcErrorOf, startAndCancelSlow, slowWithProgress, ROOTS, type OpenedDemo } from '../helpers/demo-client.ts'

function demoSuite (label: string, open: () => Promise<OpenedDemo>): void {
  describe(label, () => {
    let demo: OpenedDemo
    beforeAll(async () => { demo = await open() })
    afterAll(async () => { await demo.close() })

    it('lists the demo tools with descriptions and input schemas', async () => {
      const { tools } = await demo.client.listTools()
      expect(tools.map((tool) => tool.name)).toEqual([...DEMO_TOOL_NAMES])
      for (const tool of tools) {
        expect(tool.description).toBeTruthy()
        expect(tool.inputSchema.type).toBe('object')
      }
      const slow = tools.find((tool) => tool.name === 'slow')
      expect(slow?.inputSchema.properties).toMatchObject({ duration: { type: 'integer', default: 3000 }, steps: { default: 5 } })
      expect(slow?.inputSchema.required ?? []).toEqual([])
    })

    it('echo returns its text', async () => {
      expect(textOf(await call(demo.client, 'echo', { text: 'hello' }))).toBe('hello')
    })

    it('slow reports progress and finishes', async () => { await slowWithProgress(demo.client) })

    it('slow stops early when cancelled', async () => {
      await startAndCancelSlow(demo.client)
      await vi.waitFor(() => { expect(demo.stderr()).toMatch(/slow: cancelled at step \d+\/600 .*test cancel/) })
    })

    it('invalid arguments give a tool error, an unknown tool a JSON-RPC error', async () => {
      const bad = await call(demo.client, 'echo', { text: 42 })
      expect(bad.isError).toBe(true)
      expect(textOf(bad)).toMatch(/Invalid arguments for tool echo/)
      expect((await rpcErrorOf(call(demo.client, 'no_such_tool'))).code).toBe(-32602)
    })

    it('ask_user elicits a name (accept, decline, cancel)', async () => {
      demo.state.formAnswer = { action: 'accept', content: { name: 'Ada' } }
      expect(textOf(await call(demo.client, 'ask_user'))).toBe('Hello, Ada!')
      const request = demo.state.elicitations.at(-1)
      expect(request).toMatchObject({ mode: 'form', message: 'What is your name?', requestedSchema: { required: ['name'] } })
      demo.state.formAnswer = { action: 'decline' }
      expect(textOf(await call(demo.client, 'ask_user'))).toBe('The user declined to answer.')
      demo.state.formAnswer = { action: 'cancel' }
      expect(textOf(await call(demo.client, 'ask_user', { message: 'Name?' }))).toBe('The user cancelled the request.')
      expect(demo.state.elicitations.at(-1)?.message).toBe('Name?')
    })

    it('ask_url sends a URL-mode elicitation', async () => {
      const result = await call(demo.client, 'ask_url', { url: 'https://example.com/consent' })
      expect(textOf(result)).toMatch(/^The user accepted opening https:\/\/example.com\/consent/)
      expect(demo.state.elicitations.at(-1)).toMatchObject({ mode: 'url', url: 'https://example.com/consent' })
    })

    it('summarize returns the text of the sampled model reply', async () => {
      expect(textOf(await call(demo.client, 'summarize', { text: 'A long story about a cat.' }))).toBe('A short summary.')
      const sampled = demo.state.samplings.at(-1)
      expect(sampled?.maxTokens).toBe(200)
      expect(JSON.stringify(sampled?.messages)).toContain('A long story about a cat.')
    })

    it('list_roots returns the client roots', async () => {
      expect(JSON.parse(textOf(await call(demo.client, 'list_roots')))).toEqual(ROOTS)
    })

    it('fail_tool returns isError, throw_error a JSON-RPC error', async () => {
      const failed = await call(demo.client, 'fail_tool', { reason: 'testing' })
      expect(failed.isError).toBe(true)
      expect(textOf(failed)).toBe('fail_tool failed on purpose: testing')
      const thrown = await rpcErrorOf(call(demo.client, 'throw_error'))
      expect(thrown.code).toBe(-32602)
      expect(thrown.message).toMatch(/thrown on purpose/)
      const custom = await rpcErrorOf(call(demo.client, 'throw_error', { code: -32050, message: 'custom failure' }))
      expect(custom.code).toBe(-32050)
      expect(custom.message).toMatch(/custom failure/)
      expect(custom.data).toEqual({ tool: 'throw_error' })
    })

    it('serves the greeting prompt with completion', async () => {
      const { prompts } = await demo.client.listPrompts()
      expect(prompts).toContainEqual(expect.objectContaining({ name: 'greeting', arguments: [expect.objectContaining({ name: 'name', required: true })] }))
      const prompt = await demo.client.getPrompt({ name: 'greeting', arguments: { name: 'Grace' } })
      expect(JSON.stringify(prompt.messages)).toContain('greeting for Grace')
      const completion = await demo.client.complete({ ref: { type: 'ref/prompt', name: 'greeting' }, argument: { name: 'name', value: 'al' } })
      expect(completion.completion.values).toEqual(['Alan', 'Alice'])
    })

    it('serves the readme resource and the items template with completion', async () => {
      const { resources } = await demo.client.listResources()
      expect(resources.map((resource) => resource.uri)).toEqual(expect.arrayContaining(['demo://readme', 'demo://items/1', 'demo://items/5']))
      const readme = await demo.client.readResource({ uri: 'demo://readme' })
      expect(readme.contents[0]).toMatchObject({ uri: 'demo://readme', mimeType: 'text/markdown', text: expect.stringContaining('# Demo upstream') })
      const { resourceTemplates } = await demo.client.listResourceTemplates()
      expect(resourceTemplates).toContainEqual(expect.objectContaining({ uriTemplate: 'demo://items/{id}' }))
      const item = await demo.client.readResource({ uri: 'demo://items/2' })
      const first = item.contents[0]
      expect(first !== undefined && 'text' in first ? JSON.parse(first.text) : undefined).toMatchObject({ id: '2', name: 'banana' })
      expect((await rpcErrorOf(demo.client.readResource({ uri: 'demo://items/99' }))).code).toBe(-32602)
      const completion = await demo.client.complete({ ref: { type: 'ref/resource', uri: 'demo://items/{id}' }, argument: { name: 'id', value: '' } })
      expect(completion.completion.values).toEqual(['1', '2', '3', '4', '5'])
    })

    it('touch_resource notifies subscribers only', async () => {
      await demo.client.subscribeResource({ uri: 'demo://readme' })
      const before = demo.state.updatedUris.length
      expect(textOf(await call(demo.client, 'touch_resource', { uri: 'demo://readme' }))).toBe('touched demo://readme (revision 2); notified 1 subscribed session(s)')
      await vi.waitFor(() => { expect(demo.state.updatedUris.slice(before)).toEqual(['demo://readme']) })
      const readme = await demo.client.readResource({ uri: 'demo://readme' })
      expect(JSON.stringify(readme.contents)).toContain('revision: 2')
      await demo.client.unsubscribeResource({ uri: 'demo://readme' })
      expect(textOf(await call(demo.client, 'touch_resource'))).toBe('touched demo://readme (revision 3); notified 0 subscribed session(s)')
      expect(demo.state.updatedUris.length).toBe(before + 1)
    })

    it('toggle_extra_tool adds and removes "extra" with list_changed', async () => {
      const before = demo.state.toolListChanges
      expect(textOf(await call(demo.client, 'toggle_extra_tool'))).toBe('extra tool added')
      await vi.waitFor(() => { expect(demo.state.toolListChanges).toBe(before + 1) })
      expect((await demo.client.listTools()).tools.map((tool) => tool.name)).toContain('extra')
      expect(textOf(await call(demo.client, 'extra', { note: 'hi' }))).toBe('extra tool called: hi')
      expect(textOf(await call(demo.client, 'toggle_extra_tool'))).toBe('extra tool removed')
      await vi.waitFor(() => { expect(demo.state.toolListChanges).toBe(before + 2) })
      expect((await demo.client.listTools()).tools.map((tool) => tool.name)).not.toContain('extra')
    })
  })
}

demoSuite('demo upstream over stdio', async () => {
  const { client, state } = createTestClient()
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [DEMO_MAIN],
    cwd: REPO_ROOT,
    stderr: 'pipe',
  })
  let stderr = ''
  transport.stderr?.on('data', (chunk: Buffer) => { stderr += chunk.toString('utf8') })
  await client.connect(transport)
  return { client, state, stderr: () => stderr, close: async () => { await client.close() } }
})

demoSuite('demo upstream over Streamable HTTP', async () => {
  const upstream = await startUpstream(DEMO_MAIN, ['--http', '0'])
  const { client, state } = createTestClient()
  await client.connect(new StreamableHTTPClientTransport(new URL(upstream.url)))
  return {
    client,
    state,
    stderr: upstream.stderr,
    close: async () => {
      await client.close()
      await upstream.close()
    },
  }
})

describe('demo upstream over Streamable HTTP with two sessions', () => {
  let upstream: StartedUpstream
  const a = createTestClient()
  const b = createTestClient()
  beforeAll(async () => {
    upstream = await startUpstream(DEMO_MAIN, ['--http', '0'])
    await a.client.connect(new StreamableHTTPClientTransport(new URL(upstream.url)))
    await b.client.connect(new StreamableHTTPClientTransport(new URL(upstream.url)))
  })
  afterAll(async () => {
    await a.client.close()
    await b.client.close()
    await upstream.close()
  })

  it('shares resources and tools between sessions and notifies the other session', async () => {
    await a.client.subscribeResource({ uri: 'demo://items/3' })
    // A's notifications arrive on its standalone GET stream, which its client opens on its own
    // schedule after initialization; touching until one arrives avoids depending on that timing.
    await vi.waitFor(async () => {
      expect(textOf(await call(b.client, 'touch_resource', { uri: 'demo://items/3' }))).toMatch(/notified 1 subscribed session\(s\)$/)
      expect(a.state.updatedUris).toContain('demo://items/3')
    })
    expect(b.state.updatedUris).toEqual([])
    const item = await a.client.readResource({ uri: 'demo://items/3' })
    expect(JSON.stringify(item.contents)).not.toContain('"revision":1')

    expect(textOf(await call(b.client, 'toggle_extra_tool'))).toBe('extra tool added')
    await vi.waitFor(() => { expect(a.state.toolListChanges).toBe(1) })
    expect((await a.client.listTools()).tools.map((tool) => tool.name)).toContain('extra')
    expect(textOf(await call(a.client, 'toggle_extra_tool'))).toBe('extra tool removed')
    await vi.waitFor(() => { expect(b.state.toolListChanges).toBe(2) })
    expect((await b.client.listTools()).tools.map((tool) => tool.name)).not.toContain('extra')
  })
})

describe('two demo processes over stdio', () => {
  const a = createTestClient()
  const b = createTestClient()
  const transport = (): StdioClientTransport => new StdioClientTransport({
    command: process.execPath,
    args: [DEMO_MAIN],
    cwd: REPO_ROOT,
    stderr: 'ignore',
  })
  beforeAll(async () => {
    await a.client.connect(transport())
    await b.client.connect(transport())
  })
  afterAll(async () => {
    await a.client.close()
    await b.client.close()
  })

  it('keep their state in memory, each its own, like any stdio server', async () => {
    expect(textOf(await call(b.client, 'touch_resource'))).toBe('touched demo://readme (revision 2); notified 0 subscribed session(s)')
    expect(textOf(await call(b.client, 'touch_resource'))).toBe('touched demo://readme (revision 3); notified 0 subscribed session(s)')
    expect(JSON.stringify((await a.client.readResource({ uri: 'demo://readme' })).contents)).toContain('revision: 1')
    expect(textOf(await call(a.client, 'touch_resource'))).toBe('touched demo://readme (revision 2); notified 0 subscribed session(s)')

    expect(textOf(await call(b.client, 'toggle_extra_tool'))).toBe('extra tool added')
    expect((await b.client.listTools()).tools.map((tool) => tool.name)).toContain('extra')
    expect((await a.client.listTools()).tools.map((tool) => tool.name)).not.toContain('extra')
    expect(a.state.toolListChanges).toBe(0)
  })
})

describe('demo upstream with a client that declares no capabilities', () => {
  let client: Client
  beforeAll(async () => {
    client = new Client({ name: 'no-capabilities', version: '1.0.0' }, { capabilities: {} })
    await client.connect(new StdioClientTransport({ command: process.execPath, args: [DEMO_MAIN], cwd: REPO_ROOT, stderr: 'ignore' }))
  })
  afterAll(async () => { await client.close() })

  it('answers the interactive tools with isError results', async () => {
    const expected: Array<[string, Record<string, unknown>, RegExp]> = [
      ['ask_user', {}, /form elicitation/],
      ['ask_url', {}, /url elicitation/],
      ['summarize', { text: 'x' }, /^sampling\/createMessage failed: /],
      ['list_roots', {}, /^roots\/list failed: /],
    ]
    for (const [name, args, message] of expected) {
      const result = await call(client, name, args)
      expect(result.isError, name).toBe(true)
      expect(textOf(result), name).toMatch(message)
    }
  })
})
