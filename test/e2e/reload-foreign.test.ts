// Reloading in front of a server the project did not write: @modelcontextprotocol/server-memory (a knowledge
// graph kept in its process) is added to a running gateway, used by a connected client whose state it keeps
// across calls, and removed again, all through POST /admin/reload while the client keeps its session.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { loadConfig } from '../../src/config/load.ts'
import { REPO_ROOT } from '../fixtures/spawn-upstream.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { writeConfig } from '../helpers/process.ts'
import { until } from '../helpers/until.ts'

const ADMIN_TOKEN = 'admin-token-3e9b1f7c2d'
const dir = mkdtempSync(join(tmpdir(), 'gw-reload-memory-'))
const memory = {
  name: 'mem',
  transport: 'stdio',
  command: process.execPath,
  args: [join(REPO_ROOT, 'node_modules/@modelcontextprotocol/server-memory/dist/index.js')],
  env: { MEMORY_FILE_PATH: join(dir, 'memory.jsonl') },
  timeouts: { connect: '60s' },
}
const configuration = (upstreams: unknown[]): string => JSON.stringify({
  store: { kind: 'memory' },
  server: { port: 0, reloadGrace: '5s' },
  admin: { port: 0, tokenSha256: sha256Hex(ADMIN_TOKEN) },
  upstreams,
})

describe('a configuration reload in front of @modelcontextprotocol/server-memory', () => {
  let file: string
  let gw: RunningGateway
  let client: Client
  let listChanges = 0

  const reload = async (upstreams: unknown[]): Promise<Record<string, unknown>> => {
    writeFileSync(file, configuration(upstreams))
    const response = await gw.gateway.admin!.inject({ method: 'POST', url: '/admin/reload', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    expect(response.statusCode).toBe(200)
    return response.json()
  }
  const toolNames = async (): Promise<string[]> => (await client.listTools()).tools.map((tool) => tool.name)

  beforeAll(async () => {
    file = writeConfig(configuration([demoStdio()]))
    const raw = JSON.parse(configuration([demoStdio()])) as Record<string, unknown>
    gw = await startGateway(raw, {}, { configSource: () => loadConfig(file) })
    client = await connectV1(gw.url)
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => { listChanges++ })
  })

  afterAll(async () => {
    await client?.close()
    await gw?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('adds it: the connected client is told, lists its tools and keeps its graph across calls; removing it takes them away', async () => {
    expect(await toolNames()).not.toContain('mem__read_graph')
    expect(await reload([demoStdio(), memory])).toMatchObject({ status: 'applied', changes: [{ path: 'upstreams.mem', change: 'added' }] })
    await vi.waitFor(async () => { expect(await toolNames()).toContain('mem__create_entities') }, { timeout: 60_000, interval: 100 })
    expect(listChanges).toBeGreaterThan(0)

    await client.callTool({ name: 'mem__create_entities', arguments: { entities: [{ name: 'Ada', entityType: 'person', observations: ['wrote the first program'] }] } })
    expect(textOf(await client.callTool({ name: 'mem__read_graph', arguments: {} }))).toContain('wrote the first program')

    // The gateway tells a session of a list change once until it reads the list again (as a client does when
    // told), and the addition may have been told again after the client's last read (once the upstream was up):
    // once all that has reached the client, it reads its list, so it is told of the next change.
    const told = (msg: string, outcome?: string): number => gw.logs()
      .filter((l) => l.msg === msg && l.method === 'notifications/tools/list_changed' && (outcome === undefined || l.outcome === outcome)).length
    await until('the gateway telling all it had to of the addition', () => {
      const sent = told('sent a list change')
      return sent === told('list change for a session', 'window') && listChanges === sent ? true : undefined
    })
    expect(await toolNames()).toContain('mem__read_graph')
    const seen = listChanges
    expect(await reload([demoStdio()])).toMatchObject({ changes: [{ path: 'upstreams.mem', change: 'removed' }] })
    await vi.waitFor(() => { expect(listChanges).toBeGreaterThan(seen) }, { timeout: 10_000, interval: 20 })
    expect(await toolNames()).not.toContain('mem__read_graph')
    const refused = await client.callTool({ name: 'mem__read_graph', arguments: {} }).then(() => undefined, (err: unknown) => err)
    expect(String(refused)).toContain("upstream 'mem' is unavailable: a configuration reload removed it")
    // The demo upstream went on serving the same session throughout.
    expect(textOf(await client.callTool({ name: 'demo__echo', arguments: { text: 'still here' } }))).toContain('still here')
  }, 90_000)
})
