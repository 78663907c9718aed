import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { McpError, ResourceUpdatedNotificationSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { DEMO_MAIN } from '../helpers/built.ts'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'

/**
 * Synchronous calls relayed live, against the demo upstream over stdio and over Streamable HTTP:
 * every server→client request reaches the calling client and its answer goes back upstream.
 */
describe.each(['stdio', 'streamable-http'] as const)('sync calls through the gateway to the demo over %s', (transport) => {
  let demoHttp: StartedUpstream | undefined
  let gw: RunningGateway
  let client: Client
  const elicitAnswers: Array<'accept' | 'decline'> = []

  beforeAll(async () => {
    let upstream: Record<string, unknown>
    if (transport === 'stdio') {
      upstream = demoStdio()
    } else {
      demoHttp = await startUpstream(DEMO_MAIN, ['--http', '0'])
      upstream = { name: 'demo', transport: 'streamable-http', url: demoHttp.url }
    }
    gw = await startGateway({ upstreams: [upstream] })
    client = await connectV1(gw.url, {
      onElicit: (params) => {
        const action = elicitAnswers.shift() ?? 'accept'
        return action === 'accept'
          ? { action, content: { name: `Ada (asked: ${String(params.message)})` } }
          : { action }
      },
      onSample: () => ({ role: 'assistant', model: 'test-model', content: { type: 'text', text: 'a short summary' } }),
      onRoots: () => ({ roots: [{ uri: 'file:///srv/project', name: 'project' }] }),
    })
  })

  afterAll(async () => {
    await client?.close()
    await gw?.close()
    await demoHttp?.close()
  })

  it('lists the demo tools under the demo__ prefix', async () => {
    const { tools } = await client.listTools()
    const names = tools.map((t) => t.name)
    expect(names).toEqual(expect.arrayContaining(['demo__slow', 'demo__echo', 'demo__ask_user', 'demo__summarize', 'demo__list_roots']))
    expect(names.every((n) => n.startsWith('demo__'))).toBe(true)
  })

  it('forwards progress with the client\'s own progress token', async () => {
    const seen: number[] = []
    const result = await client.callTool({ name: 'demo__slow', arguments: { duration: 60, steps: 3 } }, undefined, {
      onprogress: (p) => { seen.push(p.progress) },
    })
    expect(textOf(result)).toContain('3 steps')
    expect(seen.length).toBeGreaterThanOrEqual(2)
    expect(seen).toEqual([...seen].sort((a, b) => a - b))
  })

  it('relays an elicitation and returns the accepted answer upstream', async () => {
    elicitAnswers.push('accept')
    const result = await client.callTool({ name: 'demo__ask_user', arguments: { message: 'Who are you?' } })
    expect(textOf(result)).toContain('Ada (asked: Who are you?)')
  })

  it('relays a declined elicitation', async () => {
    elicitAnswers.push('decline')
    const result = await client.callTool({ name: 'demo__ask_user', arguments: {} })
    expect(textOf(result).toLowerCase()).toContain('declined')
  })

  it('relays sampling and roots requests', async () => {
    const summary = await client.callTool({ name: 'demo__summarize', arguments: { text: 'a long text' } })
    expect(textOf(summary)).toContain('a short summary')
    const roots = await client.callTool({ name: 'demo__list_roots', arguments: {} })
    expect(textOf(roots)).toContain('file:///srv/project')
  })

  it('passes an isError result through and keeps an upstream JSON-RPC error code', async () => {
    const failed = await client.callTool({ name: 'demo__fail_tool', arguments: { reason: 'disk full' } })
    expect(failed.isError).toBe(true)
    expect(textOf(failed)).toContain('disk full')
    const error = await client.callTool({ name: 'demo__throw_error', arguments: { code: -32011, message: 'quota exceeded' } }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(McpError)
    expect((error as McpError).code).toBe(-32011)
    expect((error as McpError).message).toContain('quota exceeded')
  })

  it('forwards prompts, resources, templates and completion', async () => {
    const prompts = await client.listPrompts()
    expect(prompts.prompts.map((p) => p.name)).toContain('demo__greeting')
    const prompt = await client.getPrompt({ name: 'demo__greeting', arguments: { name: 'Grace' } })
    expect(JSON.stringify(prompt.messages)).toContain('Grace')
    const resources = await client.listResources()
    expect(resources.resources.map((r) => r.uri)).toContain('demo://readme')
    const readme = await client.readResource({ uri: 'demo://readme' })
    expect(readme.contents[0]?.uri).toBe('demo://readme')
    const templates = await client.listResourceTemplates()
    expect(templates.resourceTemplates.map((t) => t.uriTemplate)).toContain('demo://items/{id}')
    const item = await client.readResource({ uri: 'demo://items/2' })
    expect(JSON.stringify(item.contents)).toContain('banana')
    const completion = await client.complete({ ref: { type: 'ref/prompt', name: 'demo__greeting' }, argument: { name: 'name', value: 'G' } })
    expect(completion.completion.values.length).toBeGreaterThan(0)
  })

  it('delivers resource updates to subscribers and tool list changes to everyone', async () => {
    const updated = new Promise<string>((resolve) => {
      client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => resolve(n.params.uri))
    })
    await client.subscribeResource({ uri: 'demo://readme' })
    await client.callTool({ name: 'demo__touch_resource', arguments: { uri: 'demo://readme' } })
    expect(await updated).toBe('demo://readme')

    const changed = new Promise<void>((resolve) => {
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => resolve())
    })
    await client.callTool({ name: 'demo__toggle_extra_tool', arguments: {} })
    await changed
    let names: string[] = []
    for (let i = 0; i < 50 && !names.includes('demo__extra'); i++) {
      names = (await client.listTools()).tools.map((t) => t.name)
    }
    expect(names).toContain('demo__extra')
  })
})

/** Many relayed requests answered at once, with answers and results larger than a pipe holds. */
describe('a burst of relayed elicitations over stdio', () => {
  it('leaves no pile of drain listeners on the pipes: no MaxListenersExceededWarning in the gateway or the demo', async () => {
    const warnings: string[] = []
    const onWarning = (warning: Error): void => {
      if (warning.name === 'MaxListenersExceededWarning') warnings.push(warning.message)
    }
    process.on('warning', onWarning)
    const gw = await startGateway({ upstreams: [demoStdio()] })
    const name = 'n'.repeat(300_000)
    const client = await connectV1(gw.url, { onElicit: () => ({ action: 'accept', content: { name } }) })
    try {
      const results = await Promise.all(Array.from({ length: 40 }, (_, i) => client.callTool({ name: 'demo__ask_user', arguments: { message: `burst ${i}` } })))
      for (const result of results) expect(textOf(result)).toBe(`Hello, ${name}!`)
      const demoWarnings = gw.logs().filter((line) => String(line.stderr ?? '').includes('MaxListenersExceededWarning')).map((line) => String(line.stderr))
      expect([...warnings, ...demoWarnings]).toEqual([])
    } finally {
      process.off('warning', onWarning)
      await client.close()
      await gw.close()
    }
  })
})
