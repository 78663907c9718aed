// Hot reload through POST /admin/reload: the admin API reads the configuration file again and the gateway
// puts it in force (tokens, permissions, limits, filters, upstreams) without a restart; a file that does
// not validate changes nothing; options read only at start keep their running values and are named.
import { writeFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { loadConfig } from '../../src/config/load.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { initialize } from '../helpers/jwks-server.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { writeConfig } from '../helpers/process.ts'

type Json = Record<string, unknown>

const ADMIN_TOKEN = 'admin-token-7d1c3b9e5a'
/** A secret in the environment the configuration file is read with. */
const ENV_SECRET = 'env-secret-4f9a27c1e8d3'
const TOKENS = { alice: 'alice-token-0123456789', bob: 'bob-token-0123456789', carol: 'carol-token-0123456789' }
const bearer = (who: keyof typeof TOKENS): Record<string, string> => ({ authorization: `Bearer ${TOKENS[who]}` })
const token = (who: keyof typeof TOKENS, scopes: string[]): Json => ({ principal: who, sha256: sha256Hex(TOKENS[who]), scopes })
const ELICIT = { elicitation: { form: {} } }

type Editable = Json & { server: Json, auth: Json, tasks: Json, limits: Json, upstreams: Json[] }

/** The configuration the gateway starts with; the tests write it as JSON, which is YAML too. */
function initial (): Editable {
  return {
    store: { kind: 'memory' },
    server: { port: 0, reloadGrace: '300ms' },
    tasks: { decide: 'always', pollInterval: '50ms', maxActivePerPrincipal: 1 },
    limits: {} as Json,
    auth: {
      tokens: [token('alice', ['echo']), token('bob', ['all'])],
      permissions: [{ scope: 'echo', tools: ['demo__echo'] }, { scope: 'all', upstreams: ['*'] }],
    } as Json,
    admin: { port: 0, tokenSha256: sha256Hex(ADMIN_TOKEN) },
    upstreams: [demoStdio({ resources: { deny: ['*'] } }), demoStdio({ name: 'spare', resources: { deny: ['*'] } })],
  }
}

function adminOf (gw: RunningGateway): FastifyInstance {
  const admin = gw.gateway.admin
  if (admin === undefined) throw new Error('the admin API is not configured')
  return admin
}

const toolNames = async (client: ModernRaw): Promise<string[]> => ((await client.result('tools/list')).tools as Json[]).map((t) => String(t.name)).sort()

describe('POST /admin/reload', () => {
  let file: string
  let gw: RunningGateway
  /** The configuration last put in force. */
  let running: Editable

  /** A copy of the configuration in force with `change` made to it. */
  function configuration (change: (config: Editable) => void = () => {}): Editable {
    const config = structuredClone(running)
    change(config)
    return config
  }

  /** Writes the file and asks the admin API to reload it. */
  async function reload (config: Json | string): Promise<LightMyRequestResponse> {
    writeFileSync(file, typeof config === 'string' ? config : JSON.stringify(config))
    const response = await adminOf(gw).inject({ method: 'POST', url: '/admin/reload', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    if (response.statusCode === 200 && typeof config !== 'string') running = config as Editable
    return response
  }

  const logged = (text: string): Json[] => gw.logs().filter((l) => String(l.msg).includes(text))

  beforeAll(async () => {
    running = initial()
    const config = configuration()
    file = writeConfig(JSON.stringify(config))
    gw = await startGateway(config, {}, { configSource: () => loadConfig(file, { ...process.env, RELOAD_SECRET: ENV_SECRET }) })
  })

  afterAll(async () => {
    await gw?.close()
  })

  it('refuses a reload without the admin token or with a wrong one: 401, and nothing is read', async () => {
    writeFileSync(file, JSON.stringify(configuration((c) => { c.tasks.maxActivePerPrincipal = 7 })))
    const missing = await adminOf(gw).inject({ method: 'POST', url: '/admin/reload' })
    expect({ status: missing.statusCode, code: missing.json<{ error: Json }>().error.code }).toEqual({ status: 401, code: 'GW_ERR_ADMIN_TOKEN_MISSING' })
    for (const authorization of ['Bearer wrong-token', bearer('bob').authorization]) {
      const wrong = await adminOf(gw).inject({ method: 'POST', url: '/admin/reload', headers: { authorization } })
      expect({ status: wrong.statusCode, code: wrong.json<{ error: Json }>().error.code }).toEqual({ status: 401, code: 'GW_ERR_ADMIN_TOKEN_INVALID' })
    }
    expect(logged('configuration reload')).toEqual([])
    // The file is back to what runs: the next reload changes nothing.
    expect((await reload(configuration())).json<Json>()).toEqual({ status: 'applied', changes: [], notApplied: [] })
  })

  it('takes a new token at once and refuses a removed one at its next request', async () => {
    const bob = new ModernRaw(gw.url, {}, bearer('bob'))
    expect(await toolNames(bob)).toContain('demo__slow')
    expect((await initialize(gw.url, TOKENS.carol)).status).toBe(401)

    const response = await reload(configuration((c) => { c.auth.tokens = [token('alice', ['echo']), token('carol', ['all'])] }))
    expect(response.statusCode).toBe(200)
    expect(response.json<Json>()).toEqual({ status: 'applied', changes: [{ path: 'auth.tokens', change: 'changed' }], notApplied: [] })
    expect(logged('configuration reload: auth.tokens changed')).toEqual([expect.objectContaining({ level: 30, option: 'auth.tokens', change: 'changed' })])
    expect(logged('configuration reloaded through the admin API').at(-1)).toMatchObject({ audit: 'config.reload', outcome: 'applied', changes: ['auth.tokens changed'] })

    expect((await initialize(gw.url, TOKENS.carol)).status).toBe(200)
    const refused = await bob.request('tools/list')
    expect(refused.status).toBe(401)
    expect(await toolNames(new ModernRaw(gw.url, {}, bearer('carol')))).toContain('demo__slow')
  })

  it('applies a permission change to the next request of a caller', async () => {
    const alice = new ModernRaw(gw.url, {}, bearer('alice'))
    expect(await toolNames(alice)).toEqual(['demo__echo'])
    const more = configuration((c) => {
      c.auth.permissions = [{ scope: 'echo', tools: ['demo__echo', 'spare__slow'] }, { scope: 'all', upstreams: ['*'] }]
    })
    expect((await reload(more)).json<Json>()).toMatchObject({ changes: [{ path: 'auth.permissions', change: 'changed' }] })
    expect(await toolNames(alice)).toEqual(['demo__echo', 'spare__slow'])
    expect((await alice.request('tools/call', { name: 'demo__slow', arguments: { duration: 1 } })).body.error).toMatchObject({ message: "Unknown tool: 'demo__slow'" })
  })

  it('applies new task and rate limits to the next request', async () => {
    const carol = ModernRaw.withTasks(gw.url, {}, bearer('carol'))
    const first = await carol.result('tools/call', { name: 'demo__slow', arguments: { duration: 60_000, steps: 1 } })
    const second = await carol.request('tools/call', { name: 'demo__slow', arguments: { duration: 60_000, steps: 1 } })
    expect(second.body.error).toMatchObject({ code: -32054 })

    expect((await reload(configuration((c) => { c.tasks.maxActivePerPrincipal = 2 }))).json<Json>()).toMatchObject({ changes: [{ path: 'tasks.maxActivePerPrincipal', change: 'changed' }] })
    const again = await carol.result('tools/call', { name: 'demo__slow', arguments: { duration: 60_000, steps: 1 } })
    expect(again.resultType).toBe('task')
    for (const taskId of [first.taskId, again.taskId]) await carol.result('tasks/cancel', { taskId })

    const limited = configuration((c) => { c.limits.requestsPerPrincipal = { rate: 0.001, burst: 2 } })
    expect((await reload(limited)).json<Json>()).toMatchObject({ changes: [{ path: 'limits.requestsPerPrincipal', change: 'changed' }] })
    const statuses = []
    for (let i = 0; i < 3; i++) statuses.push((await carol.request('tools/list')).status)
    expect(statuses).toEqual([200, 200, 429])
    expect((await reload(configuration((c) => { c.limits = {} }))).json<Json>()).toMatchObject({ changes: [{ path: 'limits.requestsPerPrincipal', change: 'changed' }] })
    expect((await carol.request('tools/list')).status).toBe(200)
  })

  it('answers 422 with every problem of a file that does not validate, logs each, and keeps the running configuration', async () => {
    const before = gw.gateway.upstreams.slice()
    const response = await reload('server: { port: 1, stateSecret: short }\ntasks: { maxActivePerPrincipal: 0 }\nupstreams:\n  - name: bad name\n    transport: stdio\n    command: node\n')
    expect(response.statusCode).toBe(422)
    const error = response.json<{ error: { code: string, problems: Array<{ path: string }> } }>().error
    expect(error.code).toBe('GW_ERR_CONFIG_INVALID')
    const paths = error.problems.map((p) => p.path)
    expect(paths).toEqual(expect.arrayContaining(['server.stateSecret', 'tasks.maxActivePerPrincipal', 'upstreams[0].name']))
    for (const path of paths) expect(gw.logs().filter((l) => l.path === path && l.level === 50)).toHaveLength(1)
    expect(logged('configuration reload rejected')).toHaveLength(1)
    expect(logged('configuration reload through the admin API rejected')).toEqual([expect.objectContaining({ audit: 'config.reload', outcome: 'rejected', problems: paths.length })])
    // Still the same upstreams, tokens and limits.
    expect(gw.gateway.upstreams.length).toBe(before.length)
    for (const [i, upstream] of gw.gateway.upstreams.entries()) expect(upstream).toBe(before[i])
    const carol = ModernRaw.withTasks(gw.url, {}, bearer('carol'))
    expect(await toolNames(carol)).toContain('spare__echo')
    expect((await carol.request('tools/list')).status).toBe(200)
  })

  it('never shows a value from the environment in the 422 answer or the log: it names the variable', async () => {
    // eslint-disable-next-line no-template-curly-in-string -- YAML with a ${VAR} placeholder, on purpose
    const response = await reload(JSON.stringify(configuration((config) => { config.server.sessionIdleTimeout = '${RELOAD_SECRET}' })))
    expect(response.statusCode).toBe(422)
    expect(response.body).not.toContain(ENV_SECRET)
    expect(response.json<{ error: { problems: unknown[] } }>().error.problems).toEqual([
      // eslint-disable-next-line no-template-curly-in-string
      { path: 'server.sessionIdleTimeout', message: expect.stringContaining('the value of ${RELOAD_SECRET} is not a duration') },
    ])
    expect(logged('configuration reload through the admin API rejected').length).toBeGreaterThan(0)
    expect(JSON.stringify(gw.logs())).not.toContain(ENV_SECRET)
  })

  it('keeps options read only at start, names them in the answer and in one warning, and applies the rest', async () => {
    const changed = configuration((c) => {
      c.server = { port: 1, path: '/other', reloadGrace: '300ms' }
      c.store = { kind: 'sqlite', path: './data/unused.db' }
      c.tasks.pollInterval = '75ms'
    })
    const response = await reload(changed)
    expect(response.statusCode).toBe(200)
    const answer = response.json<{ changes: Json[], notApplied: Array<{ option: string }> }>()
    expect(answer.notApplied.map((n) => n.option).sort()).toEqual(['server.path', 'server.port', 'store.busyWait', 'store.kind', 'store.lockStaleAfter', 'store.path'])
    expect(answer.changes).toEqual([{ path: 'tasks.pollInterval', change: 'changed' }])
    const warnings = logged('take effect only at a restart')
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toMatchObject({ level: 40, options: expect.arrayContaining(['server.port', 'server.path', 'store.kind', 'store.path']) })
    const carol = ModernRaw.withTasks(gw.url, {}, bearer('carol'))
    const task = await carol.result('tools/call', { name: 'demo__echo', arguments: { text: 'x' } })
    expect(task.pollIntervalMs).toBe(75)
    expect((await fetch(gw.url.replace('/mcp', '/other'), { method: 'POST' })).status).toBe(404)
  })

  it('retunes an upstream\'s filters in place, and lets a task on a removed upstream run until reloadGrace, then fails it with the reason', async () => {
    const carol = ModernRaw.withTasks(gw.url, ELICIT, bearer('carol'))
    const demo = gw.gateway.upstreams.find((u) => u.name === 'demo')
    // The file names the options read only at start as they run (the previous test changed them in the file only).
    running = configuration((c) => { c.server = { port: 0, reloadGrace: '300ms' }; c.store = { kind: 'memory' } })
    const denied = await reload(configuration((c) => { c.upstreams[0] = demoStdio({ resources: { deny: ['*'] }, tools: { deny: ['slow'] } }) }))
    expect(denied.json<Json>()).toEqual({ status: 'applied', changes: [{ path: 'upstreams.demo.tools', change: 'changed' }], notApplied: [] })
    // The same instance (its sessions and tasks stay), with the new filter once its lists are read again.
    expect(gw.gateway.upstreams.find((u) => u.name === 'demo')).toBe(demo)
    await vi.waitFor(async () => { expect(await toolNames(carol)).not.toContain('demo__slow') }, { timeout: 10_000, interval: 20 })
    expect(await toolNames(carol)).toContain('demo__echo')

    const handle = await carol.result('tools/call', { name: 'spare__ask_user', arguments: { message: 'Name?' } })
    const taskId = String(handle.taskId)
    await carol.waitFor(taskId, ['input_required'])
    const removed = await reload(configuration((c) => { c.upstreams = [c.upstreams[0]!] }))
    expect(removed.json<Json>()).toMatchObject({ changes: [{ path: 'upstreams.spare', change: 'removed' }] })
    expect((await carol.request('tools/call', { name: 'spare__echo', arguments: { text: 'x' } })).body.error).toMatchObject({ message: "upstream 'spare' is unavailable: a configuration reload removed it" })
    // Nobody answers: after server.reloadGrace the call is cancelled and the task fails, saying why.
    const failed = await carol.waitFor(taskId, ['failed', 'completed', 'cancelled'])
    expect(failed).toMatchObject({ status: 'failed' })
    expect(String(failed.statusMessage)).toBe("upstream 'spare' is unavailable: a configuration reload removed it; calls still running after server.reloadGrace (300ms) were cancelled")
    await vi.waitFor(() => { expect(logged('closed the previous instance of an upstream')).toEqual([expect.objectContaining({ upstream: 'spare', cancelled: 1 })]) }, { timeout: 10_000, interval: 20 })
    expect(logged('server.reloadGrace is over')).toHaveLength(1)
  })

  it('replaces an upstream whose options changed: new calls use the new settings, a task on the previous instance runs to its end there', async () => {
    const carol = ModernRaw.withTasks(gw.url, ELICIT, bearer('carol'))
    const handle = await carol.result('tools/call', { name: 'demo__ask_user', arguments: { message: 'Name?' } })
    const taskId = String(handle.taskId)
    const asking = await carol.waitFor(taskId, ['input_required'])
    const [key] = Object.keys(asking.inputRequests as Json)

    const replaced = await reload(configuration((c) => {
      c.server = { port: 0, reloadGrace: '1m' }
      c.upstreams = [{ ...c.upstreams[0]!, prefix: 'd2' }]
    }))
    expect(replaced.json<Json>()).toEqual({ status: 'applied', changes: [{ path: 'server.reloadGrace', change: 'changed' }, { path: 'upstreams.demo', change: 'replaced' }], notApplied: [] })
    await vi.waitFor(async () => { expect(await toolNames(carol)).toContain('d2__echo') }, { timeout: 20_000, interval: 50 })
    expect((await toolNames(carol)).filter((name) => name.startsWith('demo__'))).toEqual([])
    // The admin API shows the previous instance draining, with its task's call (waiting on carol: it holds no slot), next to the new one.
    const listed = (await adminOf(gw).inject({ method: 'GET', url: '/admin/upstreams', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json<{ upstreams: Json[] }>().upstreams
    expect(listed).toMatchObject([
      { name: 'demo', state: 'ready' },
      { name: 'demo', state: 'draining', calls: { active: 0, parked: 1 }, draining: { why: 'replaced', graceEndsAt: expect.stringMatching(/^\d{4}-/) } },
    ])
    expect(listed[0]).not.toHaveProperty('draining')
    expect(((await carol.result('tools/call', { name: 'd2__echo', arguments: { text: 'new' } }).then((t) => carol.waitFor(String(t.taskId), ['completed']))).result as Json)).toMatchObject({ content: [{ text: 'new' }] })

    expect(await carol.result('tasks/update', { taskId, inputResponses: { [key!]: { action: 'accept', content: { name: 'Ada' } } } })).toEqual({ resultType: 'complete' })
    expect(await carol.waitFor(taskId, ['completed', 'failed', 'cancelled'])).toMatchObject({ status: 'completed', result: { content: [{ text: 'Hello, Ada!' }] } })
    await vi.waitFor(() => { expect(logged('closed the previous instance of an upstream').at(-1)).toMatchObject({ upstream: 'demo', cancelled: 0 }) }, { timeout: 10_000, interval: 20 })
    const after = (await adminOf(gw).inject({ method: 'GET', url: '/admin/upstreams', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json<{ upstreams: Json[] }>().upstreams
    expect(after.map((u) => u.state)).toEqual(['ready'])
  })
})
