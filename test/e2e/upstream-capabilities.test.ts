// What the gateway announces is what its upstreams offer: the capabilities of initialize (and of server/discover)
// are the union of the configured upstreams' own, plus the gateway's tasks, and their instructions reach the
// client. Checked against servers the project did not write, each compared with a direct connection to it.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { LoggingMessageNotificationSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { parseConfig } from '../../src/config/load.ts'
import { REPO_ROOT, startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { fixture } from '../helpers/built.ts'
import { connectV1 } from '../helpers/clients.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { TcpProxy } from '../helpers/tcp-proxy.ts'

type Json = Record<string, unknown>

const EVERYTHING = join(REPO_ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')
const FILESYSTEM = join(REPO_ROOT, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js')
const dir = mkdtempSync(join(tmpdir(), 'gw-caps-'))
writeFileSync(join(dir, 'note.txt'), 'a note')

const everything = (extra: Json = {}): Json => ({
  name: 'ev', transport: 'stdio', command: process.execPath, args: [EVERYTHING, 'stdio'], timeouts: { connect: '60s' }, ...extra,
})
const filesystem = (extra: Json = {}): Json => ({
  name: 'fs', transport: 'stdio', command: process.execPath, args: [FILESYSTEM, dir], timeouts: { connect: '60s' }, ...extra,
})

interface Announced {
  capabilities: Json
  instructions: string | undefined
}

/** What a server announces to an SDK v1 client that connects to it directly over stdio. */
async function direct (args: string[]): Promise<Announced> {
  const client = new Client({ name: 'direct', version: '1.0.0' }, { capabilities: {} })
  await client.connect(new StdioClientTransport({ command: process.execPath, args, stderr: 'ignore' }))
  try {
    return { capabilities: client.getServerCapabilities() as Json, instructions: client.getInstructions() }
  } finally {
    await client.close()
  }
}

/** What the gateway announces to a new SDK v1 session. */
async function throughGateway (gw: RunningGateway): Promise<Announced> {
  const client = await connectV1(gw.url, { capabilities: {} })
  try {
    return { capabilities: client.getServerCapabilities() as Json, instructions: client.getInstructions() }
  } finally {
    await client.close()
  }
}

/** The JSON-RPC error code a request gets, or 'ok'. */
async function outcome (request: () => Promise<unknown>): Promise<number | 'ok'> {
  try {
    await request()
    return 'ok'
  } catch (err) {
    return (err as { code: number }).code
  }
}

/** What each method of an optional capability gets from a client (SDK v1) that does not look at the capabilities first. */
async function optionalMethods (client: Client): Promise<Record<string, number | 'ok'>> {
  return {
    'resources/subscribe': await outcome(() => client.subscribeResource({ uri: 'file:///note.txt' })),
    'logging/setLevel': await outcome(() => client.setLoggingLevel('info')),
    'completion/complete': await outcome(() => client.complete({ ref: { type: 'ref/prompt', name: 'p' }, argument: { name: 'a', value: '' } })),
    'prompts/list': await outcome(() => client.listPrompts()),
    'resources/list': await outcome(() => client.listResources()),
  }
}

const DISCOVER_KEYS = ['tools', 'prompts', 'resources', 'completions', 'logging']

afterAll(() => {
  rmSync(dir, { recursive: true, force: true })
})

describe('@modelcontextprotocol/server-filesystem (tools only) behind the gateway', () => {
  let gw: RunningGateway
  let reference: Announced

  beforeAll(async () => {
    [gw, reference] = await Promise.all([
      startGateway({ upstreams: [filesystem({ prefix: '' })] }),
      direct([FILESYSTEM, dir]),
    ])
  }, 90_000)

  afterAll(async () => {
    await gw?.close()
  })

  it('initialize announces tools as the server does, and the gateway\'s tasks, but no prompts, resources, completions or logging', async () => {
    const { capabilities, instructions } = await throughGateway(gw)
    expect(Object.keys(reference.capabilities)).toEqual(['tools'])
    expect(Object.keys(capabilities).sort()).toEqual(['tasks', 'tools'])
    expect(capabilities.tools).toEqual(reference.capabilities.tools)
    expect(instructions).toBe(reference.instructions)
  })

  it('a method of a capability nobody announced gets -32601, as it does from the server directly', async () => {
    const viaGateway = await connectV1(gw.url, { capabilities: {} })
    const client = new Client({ name: 'direct', version: '1.0.0' }, { capabilities: {} })
    await client.connect(new StdioClientTransport({ command: process.execPath, args: [FILESYSTEM, dir], stderr: 'ignore' }))
    try {
      const directly = await optionalMethods(client)
      expect(directly).toEqual({ 'resources/subscribe': -32601, 'logging/setLevel': -32601, 'completion/complete': -32601, 'prompts/list': -32601, 'resources/list': -32601 })
      expect(await optionalMethods(viaGateway)).toEqual(directly)
    } finally {
      await viaGateway.close()
      await client.close()
    }
  })

  it('server/discover (2026-07-28) announces tools and the tasks extension only', async () => {
    const result = await new ModernRaw(gw.url).result('server/discover')
    const capabilities = result.capabilities as Json
    expect(DISCOVER_KEYS.filter((key) => key in capabilities)).toEqual(['tools'])
    expect(capabilities.extensions).toEqual({ 'io.modelcontextprotocol/tasks': {} })
    expect(result.instructions).toBeUndefined()
  })
})

describe('@modelcontextprotocol/server-everything behind the gateway', () => {
  let gw: RunningGateway
  let reference: Announced

  beforeAll(async () => {
    [gw, reference] = await Promise.all([
      startGateway({ upstreams: [everything({ prefix: '' })] }),
      direct([EVERYTHING, 'stdio']),
    ])
  }, 90_000)

  afterAll(async () => {
    await gw?.close()
  })

  it('initialize announces what the server announces directly, and passes its instructions on unchanged', async () => {
    const { capabilities, instructions } = await throughGateway(gw)
    expect(capabilities).toEqual(reference.capabilities)
    expect(reference.instructions?.length).toBeGreaterThan(1000)
    expect(instructions).toBe(reference.instructions)
  })

  it('server/discover (2026-07-28) announces the same capabilities, with the tasks extension, and the same instructions', async () => {
    const result = await new ModernRaw(gw.url).result('server/discover')
    const capabilities = result.capabilities as Json
    for (const key of DISCOVER_KEYS) expect(capabilities[key]).toEqual(reference.capabilities[key])
    expect(capabilities.extensions).toEqual({ 'io.modelcontextprotocol/tasks': {} })
    expect(result.instructions).toBe(reference.instructions)
  })
})

describe('a reload changes what new sessions are told', () => {
  let gw: RunningGateway
  let everythingInstructions: string | undefined

  const reload = async (raw: Json): Promise<void> => {
    const report = await gw.gateway.reload(parseConfig({ store: { kind: 'memory' }, ...raw, server: { port: 0, ...(raw.server as Json | undefined) } }, {}))
    expect(report).toBeDefined()
  }

  beforeAll(async () => {
    let reference: Announced
    [gw, reference] = await Promise.all([
      startGateway({ upstreams: [filesystem()] }),
      direct([EVERYTHING, 'stdio']),
    ])
    everythingInstructions = reference.instructions
  }, 90_000)

  afterAll(async () => {
    await gw?.close()
  })

  it('an upstream added with prompts, resources, completions and logging makes new sessions see them, labelled instructions included', async () => {
    const before = await connectV1(gw.url, { capabilities: {} })
    expect(before.getServerCapabilities()?.prompts).toBeUndefined()
    // The added upstream connects after the reload has answered; connected clients are told its lists changed.
    const listed = new Promise<void>((resolve) => before.setNotificationHandler(ToolListChangedNotificationSchema, () => resolve()))
    await reload({ upstreams: [filesystem(), everything()] })
    await listed
    const after = await throughGateway(gw)
    expect(Object.keys(after.capabilities).sort()).toEqual(['completions', 'logging', 'prompts', 'resources', 'tasks', 'tools'])
    expect(after.capabilities.resources).toEqual({ subscribe: true, listChanged: true })
    // Several upstreams: each one's instructions under a heading that names it and the prefix of its names.
    expect(after.instructions).toBe(`## ev (its tools and prompts are named ev__…)\n\n${everythingInstructions}`)
    const discovered = await new ModernRaw(gw.url).result('server/discover')
    expect(Object.keys(discovered.capabilities as Json)).toEqual(expect.arrayContaining(['prompts', 'completions']))
    expect(discovered.instructions).toBe(after.instructions)
    // A session keeps what it was told at initialize (the protocol has no way to change it); the methods follow the upstreams.
    expect(before.getServerCapabilities()?.prompts).toBeUndefined()
    expect((await before.listPrompts()).prompts.length).toBeGreaterThan(0)
    await before.close()
  })

  it('server.instructions replaces the upstreams\' instructions; false drops them; an upstream\'s instructions: false leaves its own out', async () => {
    await reload({ server: { instructions: 'Use the ev tools for demos.' }, upstreams: [filesystem(), everything()] })
    expect((await throughGateway(gw)).instructions).toBe('Use the ev tools for demos.')
    expect((await new ModernRaw(gw.url).result('server/discover')).instructions).toBe('Use the ev tools for demos.')
    await reload({ server: { instructions: false }, upstreams: [filesystem(), everything()] })
    expect((await throughGateway(gw)).instructions).toBeUndefined()
    expect((await new ModernRaw(gw.url).result('server/discover')).instructions).toBeUndefined()
    await reload({ upstreams: [filesystem(), everything({ instructions: false })] })
    expect((await throughGateway(gw)).instructions).toBeUndefined()
  })

  it('with several upstreams that give instructions, each one\'s text follows a heading naming it, in the order configured', async () => {
    const client = await connectV1(gw.url, { capabilities: {} })
    const listed = new Promise<void>((resolve) => client.setNotificationHandler(ToolListChangedNotificationSchema, () => resolve()))
    // Only ev2 is new (ev is as the last test left it): the list change is ev2 coming up.
    await reload({ upstreams: [filesystem(), everything({ instructions: false }), everything({ name: 'ev2', prefix: '' })] })
    await listed
    await client.close()
    await reload({ upstreams: [filesystem(), everything(), everything({ name: 'ev2', prefix: '' })] })
    const text = everythingInstructions!
    expect((await throughGateway(gw)).instructions).toBe(`## ev (its tools and prompts are named ev__…)\n\n${text}\n\n## ev2\n\n${text}`)
  })

  it('an upstream removed takes its capabilities with it', async () => {
    await reload({ upstreams: [filesystem()] })
    const { capabilities, instructions } = await throughGateway(gw)
    expect(Object.keys(capabilities).sort()).toEqual(['tasks', 'tools'])
    expect(instructions).toBeUndefined()
  })
})

describe('an upstream that is down at start', () => {
  let everything: StartedUpstream | undefined
  let proxy: TcpProxy | undefined
  let gw: RunningGateway | undefined

  afterAll(async () => {
    await gw?.close()
    await proxy?.close()
    await everything?.close()
  })

  it('adds what it offers, and its instructions, for the sessions that start once it has connected', { timeout: 90_000 }, async () => {
    everything = await startUpstream('test/fixtures/everything-http.mjs', [], { readyTimeoutMs: 60_000 })
    proxy = await TcpProxy.start(everything.url)
    await proxy.cut('refuse')
    gw = await startGateway({
      upstreams: [
        filesystem(),
        { name: 'ev', transport: 'streamable-http', url: `http://127.0.0.1:${proxy.port}/mcp`, restart: { initialDelay: '50ms', maxDelay: '200ms' } },
      ],
    })
    const early = await connectV1(gw.url, { capabilities: {} })
    expect(Object.keys(early.getServerCapabilities() ?? {}).sort()).toEqual(['tasks', 'tools'])
    expect(early.getInstructions()).toBeUndefined()
    // Connected clients are told the lists changed when it comes up.
    const listed = new Promise<void>((resolve) => early.setNotificationHandler(ToolListChangedNotificationSchema, () => resolve()))
    await proxy.restore()
    await listed
    const late = await throughGateway(gw)
    expect(Object.keys(late.capabilities).sort()).toEqual(['completions', 'logging', 'prompts', 'resources', 'tasks', 'tools'])
    expect(late.instructions).toMatch(/^## ev \(its tools and prompts are named ev__…\)\n\n# Everything Server/)
    await early.close()
  })
})

describe('logging/setLevel', () => {
  let gw: RunningGateway

  beforeAll(async () => {
    gw = await startGateway({ upstreams: [{ name: 'c', transport: 'stdio', command: process.execPath, args: [fixture('conformance-upstream')], prefix: '' }] })
  }, 60_000)

  afterAll(async () => {
    await gw?.close()
  })

  it('sets the level of the client\'s own session of each upstream that offers logging', async () => {
    const client = await connectV1(gw.url, { capabilities: {} })
    const messages: string[] = []
    client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => { messages.push(String(notification.params.data)) })
    // The tool logs at info, related to its call: what passes the level arrives before the call's result.
    await client.setLoggingLevel('warning')
    await client.callTool({ name: 'test_tool_with_logging', arguments: {} })
    expect(messages).toEqual([])
    await client.setLoggingLevel('info')
    await client.callTool({ name: 'test_tool_with_logging', arguments: {} })
    expect(messages).toEqual(['Tool execution started', 'Tool processing data', 'Tool execution completed'])
    await client.close()
  })
})
