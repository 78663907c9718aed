import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { REPO_ROOT } from '../fixtures/spawn-upstream.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'

/** A reference server of the MCP project, installed from the npm registry. */
function server (name: string): string {
  return join(REPO_ROOT, `node_modules/@modelcontextprotocol/${name}/dist/index.js`)
}

/**
 * server-filesystem keeps its allowed directories in its process: those it was started with, replaced by
 * the client's roots when the client declares the roots capability (asked right after the handshake, and
 * again on roots/list_changed). Behind the gateway each client gets its own process, asked for its own roots.
 */
describe('@modelcontextprotocol/server-filesystem behind the gateway', () => {
  const base = mkdtempSync(join(tmpdir(), 'gw-fs-'))
  const dir = (name: string): string => {
    const path = join(base, name)
    mkdirSync(path)
    writeFileSync(join(path, 'note.txt'), `in ${name}`)
    return path
  }
  const [started, alpha, beta, gamma] = ['started', 'alpha', 'beta', 'gamma'].map(dir) as [string, string, string, string]
  let gw: RunningGateway
  const clients: Client[] = []

  const connect = async (roots?: () => string[]): Promise<Client> => {
    const onRoots = roots === undefined ? undefined : () => ({ roots: roots().map((path) => ({ uri: pathToFileURL(path).href })) })
    const client = await connectV1(gw.url, onRoots === undefined ? { capabilities: {} } : { onRoots })
    clients.push(client)
    return client
  }
  const allowed = async (client: Client): Promise<string> => textOf(await client.callTool({ name: 'fs__list_allowed_directories', arguments: {} }))

  beforeAll(async () => {
    gw = await startGateway({ upstreams: [{ name: 'fs', transport: 'stdio', command: process.execPath, args: [server('server-filesystem'), started], timeouts: { connect: '60s' } }] })
  }, 60_000)

  afterAll(async () => {
    for (const client of clients) await client.close()
    await gw?.close()
    rmSync(base, { recursive: true, force: true })
  })

  it('asks each client for its own roots and keeps them apart', async () => {
    let aliceRoots = [alpha]
    const alice = await connect(() => aliceRoots)
    const bob = await connect(() => [beta])
    const carol = await connect()
    // The server asks for roots once its handshake is done, in the background: wait until it has them.
    await vi.waitFor(async () => { expect(await allowed(alice)).toContain(alpha) }, { timeout: 15_000, interval: 100 })
    await vi.waitFor(async () => { expect(await allowed(bob)).toContain(beta) }, { timeout: 15_000, interval: 100 })
    expect(await allowed(alice)).not.toContain(beta)
    expect(await allowed(carol)).toContain(started)
    expect(textOf(await alice.callTool({ name: 'fs__read_text_file', arguments: { path: join(alpha, 'note.txt') } }))).toBe('in alpha')
    const refused = await bob.callTool({ name: 'fs__read_text_file', arguments: { path: join(alpha, 'note.txt') } })
    expect(refused.isError).toBe(true)

    // A client's roots/list_changed reaches its own session, which asks it again.
    aliceRoots = [gamma]
    await alice.sendRootsListChanged()
    await vi.waitFor(async () => { expect(await allowed(alice)).toContain(gamma) }, { timeout: 15_000, interval: 100 })
    expect(await allowed(bob)).toContain(beta)
  })
})

/**
 * server-memory keeps its knowledge graph in a file that every one of its processes reads (so two clients
 * share it, as they would without the gateway) and tells a subscribed client when its own process changed it.
 */
describe('@modelcontextprotocol/server-memory behind the gateway', () => {
  const base = mkdtempSync(join(tmpdir(), 'gw-memory-'))
  let gw: RunningGateway
  const clients: Client[] = []

  beforeAll(async () => {
    gw = await startGateway({
      upstreams: [{ name: 'mem', transport: 'stdio', command: process.execPath, args: [server('server-memory')], env: { MEMORY_FILE_PATH: join(base, 'memory.jsonl') }, timeouts: { connect: '60s' } }],
    })
  }, 60_000)

  afterAll(async () => {
    for (const client of clients) await client.close()
    await gw?.close()
    rmSync(base, { recursive: true, force: true })
  })

  it('stores what one client creates, shows it to another, and tells the subscribed client of its own changes', async () => {
    const [alice, bob] = [await connectV1(gw.url, { capabilities: {} }), await connectV1(gw.url, { capabilities: {} })]
    clients.push(alice, bob)
    const updates: string[] = []
    alice.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { updates.push(n.params.uri) })
    await alice.subscribeResource({ uri: 'memory://knowledge-graph' })
    await alice.callTool({ name: 'mem__create_entities', arguments: { entities: [{ name: 'Ada', entityType: 'person', observations: ['writes programs'] }] } })
    await vi.waitFor(() => { expect(updates).toEqual(['memory://knowledge-graph']) }, { timeout: 10_000, interval: 20 })
    expect(textOf(await bob.callTool({ name: 'mem__read_graph', arguments: {} }))).toContain('writes programs')
    await bob.callTool({ name: 'mem__add_observations', arguments: { observations: [{ entityName: 'Ada', contents: ['likes engines'] }] } })
    expect(textOf(await alice.callTool({ name: 'mem__open_nodes', arguments: { names: ['Ada'] } }))).toContain('likes engines')
    const read = await alice.readResource({ uri: 'memory://knowledge-graph' })
    expect(JSON.stringify(read.contents)).toContain('likes engines')
  })
})
