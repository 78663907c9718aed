import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js'
import { McpError } from '@modelcontextprotocol/sdk/types.js'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { REPO_ROOT } from '../fixtures/spawn-upstream.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { RawSession } from '../helpers/raw-session.ts'
import { startStatelessUpstream, type StatelessUpstream } from '../helpers/stateless-upstream.ts'

type Json = Record<string, unknown>

/** A reference server of the MCP project, installed from the npm registry. */
function server (name: string): string {
  return join(REPO_ROOT, `node_modules/@modelcontextprotocol/${name}/dist/index.js`)
}

const EVERYTHING = server('server-everything')
const MEMORY = server('server-memory')
const TOKENS = { whole: 'whole-upstream-token-0123', echo: 'echo-only-token-0123456' }

/** What a request ended with, as a client sees it: its result, or its JSON-RPC error's code and message (and data, when asked). */
async function outcome (request: Promise<unknown>, withData = false): Promise<Json> {
  try {
    return { result: await request }
  } catch (err) {
    if (err instanceof McpError) return { error: { code: err.code, message: err.message, ...(withData && { data: err.data }) } }
    throw err
  }
}

/** A real SDK v1 client on `url`, sending `token` as its bearer token when given. */
async function overHttp (url: string, token?: string): Promise<Client> {
  const client = new Client({ name: 'e2e-v1', version: '1.0.0' }, { capabilities: {} })
  const headers = token === undefined ? undefined : { authorization: `Bearer ${token}` }
  await client.connect(new StreamableHTTPClientTransport(new URL(url), headers && { requestInit: { headers } }))
  return client
}

/** A real SDK v1 client that starts the server itself, without the gateway. */
async function direct (script: string, env: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'e2e-v1', version: '1.0.0' }, { capabilities: {} })
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [script, ...(script === EVERYTHING ? ['stdio'] : [])], env: { ...process.env as Record<string, string>, ...env }, stderr: 'ignore' }))
  return client
}

/** The requests a client makes for names and URIs no upstream lists (each run directly and through the gateway). */
const UNKNOWN = {
  tool: (c: Client) => c.callTool({ name: 'no-such-tool', arguments: {} }),
  prompt: (c: Client) => c.getPrompt({ name: 'no-such-prompt' }),
  resource: (c: Client) => c.readResource({ uri: 'demo://resource/no-such-resource' }),
  completion: (c: Client) => c.complete({ ref: { type: 'ref/prompt', name: 'no-such-prompt' }, argument: { name: 'x', value: '' } }),
  'resource completion': (c: Client) => c.complete({ ref: { type: 'ref/resource', uri: 'demo://no-such/{x}' }, argument: { name: 'x', value: '' } }),
}

/**
 * server-everything behind a gateway that passes its names through (`prefix: ""`, the only upstream):
 * what the gateway lists nothing for goes to the upstream, which answers as it does without the gateway.
 */
describe('names no upstream lists, with one upstream owning the namespace', () => {
  let gw: RunningGateway
  let directly: Client
  let through: Client
  let echoOnly: Client

  beforeAll(async () => {
    gw = await startGateway({
      auth: {
        tokens: [
          { principal: 'whole', sha256: sha256Hex(TOKENS.whole), scopes: ['ev'] },
          { principal: 'narrow', sha256: sha256Hex(TOKENS.echo), scopes: ['echo'] },
        ],
        permissions: [{ scope: 'ev', upstreams: ['ev'] }, { scope: 'echo', tools: ['echo'] }],
      },
      upstreams: [{ name: 'ev', transport: 'stdio', command: process.execPath, args: [EVERYTHING, 'stdio'], prefix: '', tools: { deny: ['get-sum'] }, resources: { deny: ['Dynamic *', 'demo://resource/dynamic/*'] }, timeouts: { connect: '60s' } }],
    })
    ;[directly, through, echoOnly] = await Promise.all([direct(EVERYTHING), overHttp(gw.url, TOKENS.whole), overHttp(gw.url, TOKENS.echo)])
  }, 60_000)

  afterAll(async () => {
    await Promise.all([directly?.close(), through?.close(), echoOnly?.close()])
    await gw?.close()
  })

  for (const [what, request] of Object.entries(UNKNOWN)) {
    it(`answers an unknown ${what} as the server does without the gateway`, async () => {
      const expected = await outcome(request(directly))
      expect(await outcome(request(through))).toEqual(expected)
    })
  }

  it('answers a 2026-07-28 client\'s call of an unknown tool, and its unknown prompt, with the upstream\'s own answer', async () => {
    const expected = await outcome(UNKNOWN.tool(directly)) as { result: Json }
    expect(expected.result.isError).toBe(true)
    const modern = new ModernRaw(gw.url, {}, { authorization: `Bearer ${TOKENS.whole}` })
    expect(await modern.result('tools/call', { name: 'no-such-tool', arguments: {} })).toEqual({ ...expected.result, resultType: 'complete' })
    // And an unknown prompt with the upstream's error: what the SDK v1 client above shows, less the prefix it adds.
    const refused = await outcome(UNKNOWN.prompt(directly)) as { error: { code: number, message: string } }
    const wire = { code: refused.error.code, message: refused.error.message.replace(`MCP error ${refused.error.code}: `, '') }
    expect((await modern.request('prompts/get', { name: 'no-such-prompt' })).body.error).toEqual(wire)
  })

  it('refuses a 2025-11-25 task of an unknown tool itself: no task is made for a tool nobody lists', async () => {
    const session = await RawSession.open(gw.url, {}, { authorization: `Bearer ${TOKENS.whole}` })
    const reply = await session.request('tools/call', { name: 'no-such-tool', arguments: {}, task: { ttl: 60_000 } })
    expect(reply.error).toEqual({ code: -32602, message: "Unknown tool: 'no-such-tool'", data: { code: 'GW_ERR_TOOL_NOT_FOUND' } })
    await session.close()
  })

  it('never forwards a name the operator denied or the caller may not use', async () => {
    // get-sum exists upstream (it would answer with the sum), but the operator denied it.
    expect(await outcome(through.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } }))).toEqual({ error: { code: -32602, message: "MCP error -32602: Unknown tool: 'get-sum'" } })
    // A caller granted only the tool echo: a listed tool it may not use, and an unknown one, are refused alike.
    expect(await outcome(echoOnly.callTool({ name: 'get-env', arguments: {} }))).toEqual({ error: { code: -32602, message: "MCP error -32602: Unknown tool: 'get-env'" } })
    expect(await outcome(echoOnly.callTool({ name: 'no-such-tool', arguments: {} }))).toEqual({ error: { code: -32602, message: "MCP error -32602: Unknown tool: 'no-such-tool'" } })
    expect(await outcome(echoOnly.getPrompt({ name: 'no-such-prompt' }))).toEqual({ error: { code: -32602, message: "MCP error -32602: Unknown prompt: 'no-such-prompt'" } })
    // The server has this resource, but the operator denied it: its template (by its name) and its URI.
    const uri = 'demo://resource/dynamic/text/1'
    expect(await outcome(directly.readResource({ uri }))).toMatchObject({ result: { contents: [{ uri }] } })
    expect(await outcome(through.readResource({ uri }))).toEqual({ error: { code: -32002, message: `MCP error -32002: Resource not found: '${uri}'` } })
  })
})

/**
 * server-memory as the only upstream with an empty prefix, beside a prefixed one: unknown names go to it,
 * except those in the other upstream's part of the namespace.
 */
describe('names no upstream lists, with one of several upstreams passing its names through', () => {
  const base = mkdtempSync(join(tmpdir(), 'gw-unknown-'))
  const env = { MEMORY_FILE_PATH: join(base, 'memory.jsonl') }
  let gw: RunningGateway
  let directly: Client
  let through: Client

  beforeAll(async () => {
    gw = await startGateway({
      upstreams: [
        { name: 'mem', transport: 'stdio', command: process.execPath, args: [MEMORY], env, prefix: '', timeouts: { connect: '60s' } },
        demoStdio(),
      ],
    })
    ;[directly, through] = await Promise.all([direct(MEMORY, env), overHttp(gw.url)])
  }, 60_000)

  afterAll(async () => {
    await Promise.all([directly?.close(), through?.close()])
    await gw?.close()
    rmSync(base, { recursive: true, force: true })
  })

  it('answers an unknown tool as the server does without the gateway', async () => {
    const expected = await outcome(UNKNOWN.tool(directly))
    expect(expected).toMatchObject({ result: { isError: true } })
    expect(await outcome(UNKNOWN.tool(through))).toEqual(expected)
  })

  it('keeps its own error for an unknown name under another upstream\'s prefix', async () => {
    expect(await outcome(through.callTool({ name: 'demo__no-such-tool', arguments: {} }))).toEqual({ error: { code: -32602, message: "MCP error -32602: Unknown tool: 'demo__no-such-tool'" } })
  })
})

/** Two upstreams passing their names through: neither owns a name nobody lists, so the gateway answers. */
describe('names no upstream lists, with two upstreams passing their names through', () => {
  let gw: RunningGateway
  let client: Client

  beforeAll(async () => {
    const only = (tool: string): Json => ({ tools: { allow: [tool] }, prompts: { deny: ['*'] }, resources: { deny: ['*'] } })
    gw = await startGateway({ upstreams: [demoStdio({ name: 'one', prefix: '', ...only('echo') }), demoStdio({ name: 'two', prefix: '', ...only('slow') })] })
    client = await overHttp(gw.url)
  }, 60_000)

  afterAll(async () => {
    await client?.close()
    await gw?.close()
  })

  it('refuses an unknown tool with its own error', async () => {
    expect(await outcome(client.callTool({ name: 'no-such-tool', arguments: {} }))).toEqual({ error: { code: -32602, message: "MCP error -32602: Unknown tool: 'no-such-tool'" } })
  })
})

/** The upstream owning the names is down: a name it would answer for is unavailable, not unknown. */
describe('names no upstream lists, while the upstream owning them is down', () => {
  let gw: RunningGateway
  let client: Client

  beforeAll(async () => {
    gw = await startGateway({
      upstreams: [
        { name: 'gone', transport: 'streamable-http', url: 'http://127.0.0.1:9/mcp', prefix: '', timeouts: { connect: '2s' }, restart: { initialDelay: '1h' } },
        demoStdio(),
      ],
    })
    client = await overHttp(gw.url)
  }, 60_000)

  afterAll(async () => {
    await client?.close()
    await gw?.close()
  })

  it('says the owner is unavailable', async () => {
    const refused = await outcome(client.callTool({ name: 'no-such-tool', arguments: {} })) as { error: { code: number, message: string } }
    expect(refused.error.code).toBe(-32050)
    expect(refused.error.message).toContain("upstream 'gone' is unavailable")
    // A name under another upstream's prefix is that upstream's: unknown there.
    expect(await outcome(client.callTool({ name: 'demo__no-such-tool', arguments: {} }))).toEqual({ error: { code: -32602, message: "MCP error -32602: Unknown tool: 'demo__no-such-tool'" } })
  })
})

/**
 * A server that answers a resource it does not have with the 2025 spec's -32002 and data of its own. The
 * SDK the gateway talks to upstreams with would turn that into -32602 with only the `uri`.
 */
describe('errors as the upstream sent them', () => {
  let upstream: StatelessUpstream
  let gw: RunningGateway
  let directly: Client
  let through: Client

  beforeAll(async () => {
    upstream = await startStatelessUpstream(() => {
      const server = new McpServer({ name: 'files', version: '1.0.0' })
      server.registerResource('file', new ResourceTemplate('file:///{name}', { list: undefined }), {}, async (uri) => {
        throw new McpError(-32002, `no file ${uri.href}`, { uri: uri.href, reason: 'deleted' })
      })
      return server
    })
    gw = await startGateway({ upstreams: [{ name: 'files', transport: 'streamable-http', url: upstream.url, prefix: '' }] })
    ;[directly, through] = await Promise.all([overHttp(upstream.url), overHttp(gw.url)])
  }, 60_000)

  afterAll(async () => {
    await Promise.all([directly?.close(), through?.close()])
    await gw?.close()
    await upstream?.close()
  })

  it('passes on an error\'s code, message and data unchanged', async () => {
    const read = (c: Client) => c.readResource({ uri: 'file:///gone.txt' })
    const expected = await outcome(read(directly), true)
    expect(expected).toMatchObject({ error: { code: -32002, data: { uri: 'file:///gone.txt', reason: 'deleted' } } })
    expect(await outcome(read(through), true)).toEqual(expected)
  })
})
