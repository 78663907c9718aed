// Hot reload of the real CLI process: SIGHUP reads the configuration file again and puts it in force while
// sessions stay open and a task keeps running on the upstream the new file removes.
import { writeFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { McpError, ToolListChangedNotificationSchema, type ElicitResult } from '@modelcontextprotocol/sdk/types.js'
import { connectV1, textOf } from '../helpers/clients.ts'
import { demoStdioYaml, startGatewayProcess, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { runTask, type StreamOutcome } from '../helpers/tasks.ts'

/** The demo upstreams under several names: their resources would collide, so they are not exposed. */
function config (...upstreams: string[]): string {
  return `
server: { reloadGrace: 2m }
store: { kind: memory }
tasks: { pollInterval: 50ms }
logging: { level: info }
upstreams:
${upstreams.map((name) => `${demoStdioYaml(name)}\n    resources: { deny: ['*'] }`).join('\n')}
`
}

/** Log lines of the process (JSON) whose msg contains `text`. */
function logged (gw: GatewayProcess, text: string): Array<Record<string, unknown>> {
  return gw.lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => String(l.msg).includes(text))
}

const toolNames = async (client: Client): Promise<string[]> => (await client.listTools()).tools.map((t) => t.name)

describe('SIGHUP to the gateway process', () => {
  let file: string
  let gw: GatewayProcess
  let client: Client
  let listChanges = 0
  /** The pending elicitation of the running task: answering it lets the task end. */
  let answer: ((result: ElicitResult) => void) | undefined

  beforeAll(async () => {
    file = writeConfig(config('old', 'kept'))
    gw = await startGatewayProcess(file)
    client = await connectV1(gw.url, {
      onElicit: () => new Promise<ElicitResult>((resolve) => { answer = resolve }),
    })
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => { listChanges++ })
  })

  afterAll(async () => {
    await client?.close()
    gw?.child.kill('SIGTERM')
    await gw?.exited
  })

  it('adds an upstream and removes another while a task runs on it: the task completes, the session stays, clients are told', { timeout: 90_000 }, async () => {
    expect(await toolNames(client)).toEqual(expect.arrayContaining(['old__ask_user', 'kept__echo']))
    // A task on the upstream about to go, held in input_required by an unanswered elicitation.
    const task: Promise<StreamOutcome> = runTask(client, 'old__ask_user', { message: 'Name?' })
    await vi.waitFor(() => { expect(answer).toBeDefined() }, { timeout: 20_000, interval: 20 })

    writeFileSync(file, config('kept', 'fresh'))
    const before = listChanges
    gw.child.kill('SIGHUP')
    await vi.waitFor(() => { expect(logged(gw, 'configuration reload: upstreams.fresh added')).toHaveLength(1) }, { timeout: 20_000, interval: 20 })
    expect(logged(gw, 'configuration reload: upstreams.old removed')).toHaveLength(1)

    // The new upstream's tools appear once it is up, and the client hears of it on its own session.
    await vi.waitFor(async () => { expect(await toolNames(client)).toContain('fresh__echo') }, { timeout: 30_000, interval: 50 })
    await vi.waitFor(() => { expect(listChanges).toBeGreaterThan(before) }, { timeout: 10_000, interval: 20 })
    const tools = await toolNames(client)
    expect(tools.filter((name) => name.startsWith('old__'))).toEqual([])
    expect(tools).toContain('kept__echo')
    expect(textOf(await client.callTool({ name: 'fresh__echo', arguments: { text: 'new' } }))).toBe('new')
    const refused = await client.callTool({ name: 'old__echo', arguments: { text: 'gone' } }).catch((err: unknown) => err)
    expect(refused).toBeInstanceOf(McpError)
    expect((refused as McpError).message).toContain("upstream 'old' is unavailable: a configuration reload removed it")

    // The task on the removed upstream still runs to its end, within server.reloadGrace.
    answer!({ action: 'accept', content: { name: 'Ada' } })
    const outcome = await task
    expect(outcome.error).toBeUndefined()
    expect(textOf(outcome.result)).toBe('Hello, Ada!')
    await vi.waitFor(() => { expect(logged(gw, 'closed the previous instance of an upstream')).toHaveLength(1) }, { timeout: 10_000, interval: 20 })
    expect(logged(gw, 'closed the previous instance of an upstream')[0]).toMatchObject({ upstream: 'old', cancelled: 0 })
  })

  it('keeps a file that does not validate out: every problem is logged with its path, the running configuration stays', async () => {
    writeFileSync(file, `
server: { port: seventy }
store: { kind: memory }
limits: { pollBurst: -1 }
upstreams:
${demoStdioYaml('other')}
    maxSessions: 0
`)
    gw.child.kill('SIGHUP')
    await vi.waitFor(() => { expect(logged(gw, 'configuration reload rejected')).toHaveLength(1) }, { timeout: 20_000, interval: 20 })
    const paths = gw.lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => String(l.msg).startsWith('configuration reload: ') && typeof l.path === 'string').map((l) => l.path)
    expect(paths).toEqual(expect.arrayContaining(['server.port', 'limits.pollBurst', 'upstreams[0].maxSessions']))
    expect(logged(gw, 'configuration reload rejected')[0]).toMatchObject({ level: 50, problems: paths.length })
    // Nothing changed: the upstreams of the last good file serve, nothing was started or removed.
    expect(await toolNames(client)).toEqual(expect.arrayContaining(['kept__echo', 'fresh__echo']))
    expect((await toolNames(client)).some((name) => name.startsWith('other__'))).toBe(false)
    expect(textOf(await client.callTool({ name: 'kept__echo', arguments: { text: 'still' } }))).toBe('still')
  })
})
