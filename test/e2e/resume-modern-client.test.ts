import { randomUUID } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it, type TestContext } from 'vitest'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { CountingProxy } from '../helpers/counting-proxy.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { loggedLine, startGatewayProcess, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { purge, REDIS_URL, STATE_SECRET } from '../helpers/redis.ts'
import { recordedInRedis, recordedInSqlite, startPair, type ResumeKind } from '../helpers/resume.ts'
import { until } from '../helpers/until.ts'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'

type Json = Record<string, unknown>

const RESEARCH = 'simulate-research-query'
const LONG = 'trigger-long-running-operation'
const ADMIN_TOKEN = 'resume-modern-client-admin-token'

/**
 * A 2026-07-28 client's call that becomes a task only after the decision window (`tasks.decide` by default: after
 * 500 ms) outlives the gateway process that ran it, as a 2025-11-25 task does: the call was made the way a task's
 * call is (as @modelcontextprotocol/server-everything's own task, or a plain call whose stream the server replays),
 * and the process records where that upstream work runs as it turns the call into a task. The process that takes
 * the task over reaches the upstream work again; the upstream ran the call once. In front of a 2026-07-28 upstream,
 * the same for a tool it runs only as its own task.
 *
 * The tests that share the survivor run one after another; the others (a store of their own each) run beside
 * them: most of their time is spent waiting on leases and upstream stages. Each counts only its own calls on
 * the shared upstream, by their arguments.
 */
describe('2026-07-28 tasks that began as synchronous calls survive the death of their gateway process', () => {
  const run = randomUUID()
  const prefix = `mcpgw-resume-modern-client:${run}:`
  // The test in front of a 2026-07-28 upstream has a store of its own: the shared survivor, on `prefix`, must not take its task over.
  const modernPrefix = `mcpgw-resume-modern-client:${run}-modern:`
  let everything: StartedUpstream
  let proxy: CountingProxy
  let redis: Redis
  let file: string
  /** The process on `file` that takes over the tasks of each test's owner: started once, it outlives every test. */
  let survivor: GatewayProcess
  const inProcess: RunningGateway[] = []
  let starting: Promise<unknown> = Promise.resolve()

  /**
   * Starts a gateway in front of server-everything once those started before it are up (or failed to): on a loaded
   * machine server-everything takes seconds to open a session, and many at once outlast a start.
   */
  async function serially<T> (start: () => Promise<T>): Promise<T> {
    const started = starting.then(start)
    starting = started.catch(() => {})
    return await started
  }

  /** The processes of one test, stopped when it ends. */
  function processesOf (onTestFinished: TestContext['onTestFinished']): GatewayProcess[] {
    const processes: GatewayProcess[] = []
    onTestFinished(async () => { await stopAll(processes) })
    return processes
  }

  const upstreamYaml = (): string => `
upstreams:
  - { name: ev, transport: streamable-http, url: ${JSON.stringify(proxy.url)}, timeouts: { connect: 60s } }
`

  beforeAll(async () => {
    everything = await startUpstream('test/fixtures/everything-http.mjs', [], { readyTimeoutMs: 60_000 })
    proxy = new CountingProxy(everything.url)
    await proxy.listen()
    redis = new Redis(REDIS_URL)
    // tasks.decide is left at its default ({ after: 500ms }).
    file = writeConfig(`
store: { kind: redis, url: ${JSON.stringify(REDIS_URL)}, prefix: ${JSON.stringify(prefix)} }
server: { stateSecret: ${JSON.stringify(STATE_SECRET)} }
admin: { port: 0, tokenSha256: ${JSON.stringify(sha256Hex(ADMIN_TOKEN))} }
tasks: { pollInterval: 50ms, ownerLease: 2s }
${upstreamYaml()}`)
    survivor = await startGatewayProcess(file)
  }, 90_000)

  afterAll(async () => {
    await stopAll(survivor === undefined ? [] : [survivor])
    await Promise.all(inProcess.map(async (gw) => await gw.close()))
    redis?.disconnect()
    await purge(prefix)
    await purge(modernPrefix)
    await proxy?.close()
    await everything?.close()
  })

  /**
   * Calls `tool` (of `ev`, unless named with its upstream) through `url` as a 2026-07-28 client with the tasks
   * extension: the call must become a task.
   */
  async function callBecomingTask (url: string, tool: string, args: Json, capabilities: Json = {}): Promise<string> {
    const name = tool.includes('__') ? tool : `ev__${tool}`
    const reply = await ModernRaw.withTasks(url, capabilities).result('tools/call', { name, arguments: args })
    expect(reply.resultType, JSON.stringify(reply)).toBe('task')
    return String(reply.taskId)
  }

  /** Calls of the research query on `topic` the upstream received. */
  function researchCalls (topic: string): number {
    return proxy.countWhere(`tools/call ${RESEARCH}`, (args) => args.topic === topic)
  }

  /** Waits until `taskId` ends, through `url`, and returns the task as tasks/get shows it then. */
  async function ended (url: string, taskId: string): Promise<Json> {
    const task = await ModernRaw.withTasks(url).waitFor(taskId, ['completed', 'failed', 'cancelled'])
    expect(`${String(task.status)} ${String(task.statusMessage ?? '')}`.trim()).toBe('completed')
    return task
  }

  /** What `GET /admin/survival` of `gateway` answers. */
  async function survivalOf (gateway: GatewayProcess): Promise<{ upstreams: Json[] }> {
    const admin = JSON.parse(await loggedLine(gateway, 'admin API listening')) as { address: string }
    const res = await fetch(`${admin.address}/survival`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    return await res.json() as { upstreams: Json[] }
  }

  /** A process on `file` (stopped after the test) that owns the test's task, and the shared survivor. */
  async function ownerAndSurvivor (onTestFinished: TestContext['onTestFinished']): Promise<[GatewayProcess, GatewayProcess]> {
    const owner = await serially(async () => await startGatewayProcess(file))
    processesOf(onTestFinished).push(owner)
    return [owner, survivor]
  }

  async function killAndResume (
    [a, b]: [GatewayProcess, GatewayProcess], taskId: string, kind: ResumeKind, storePrefix = prefix,
  ): Promise<Json> {
    await recordedInRedis(redis, storePrefix, [taskId], kind)
    const from = b.lines.length
    a.child.kill('SIGKILL')
    await a.exited
    await loggedLine(b, 'resuming the upstream work of a task another gateway process ran', { from, timeoutMs: 60_000 })
    return await ended(b.url, taskId)
  }

  describe.concurrent('with the shared survivor', () => {
    it.sequential('SIGKILL of the owner: a research query (the server\'s own task) completes with its real report, created once upstream', { timeout: 90_000 }, async ({ onTestFinished }) => {
      const [a, b] = await ownerAndSurvivor(onTestFinished)
      // What a restart costs, as /admin/survival says it before one: the same for either era's tasks.
      const survival = await survivalOf(a)
      expect(survival).toMatchObject({
        upstreams: [{ upstream: 'ev', resumable: [RESEARCH], others: 'resumed if the upstream replays the call stream (SSE event ids), else lost' }],
      })
      expect(survival.upstreams[0]).not.toHaveProperty('afterWindow')
      const taskId = await callBecomingTask(a.url, RESEARCH, { topic: 'modern kill' })
      const task = await killAndResume([a, b], taskId, 'native')
      expect(JSON.stringify(task.result)).toContain('Research Report: modern kill')
      expect(researchCalls('modern kill')).toBe(1)
    })

    it.sequential('SIGKILL of the owner: a plain call whose stream the server replays completes with its real result, called once', { timeout: 90_000 }, async ({ onTestFinished }) => {
      const [a, b] = await ownerAndSurvivor(onTestFinished)
      const taskId = await callBecomingTask(a.url, LONG, { duration: 3, steps: 3 })
      const task = await killAndResume([a, b], taskId, 'stream')
      expect(JSON.stringify(task.result)).toContain('Long running operation completed. Duration: 3 seconds')
      expect(proxy.countWhere(`tools/call ${LONG}`, (args) => args.duration === 3 && args.steps === 3)).toBe(1)
    })

    it.sequential('a question the research query asked once it was a task, before the kill, is answered through the survivor', { timeout: 90_000 }, async ({ onTestFinished }) => {
      const [a, b] = await ownerAndSurvivor(onTestFinished)
      const elicitation = { elicitation: { form: {} } }
      // The server asks at its third stage, two seconds in: well after the call became a task.
      const taskId = await callBecomingTask(a.url, RESEARCH, { topic: 'jaguar', ambiguous: true }, elicitation)
      const waiting = await ModernRaw.withTasks(a.url, elicitation).waitFor(taskId, ['input_required'])
      const [key] = Object.keys(waiting.inputRequests as Json)
      expect(String(((waiting.inputRequests as Record<string, Json>)[key!]!.params as Json).message)).toContain('jaguar')
      const from = b.lines.length
      a.child.kill('SIGKILL')
      await a.exited
      await loggedLine(b, 'resuming the upstream work of a task another gateway process ran', { from, timeoutMs: 60_000 })
      const viaB = ModernRaw.withTasks(b.url, elicitation)
      expect(Object.keys((await viaB.waitFor(taskId, ['input_required'])).inputRequests as Json)).toEqual([key])
      await viaB.result('tasks/update', { taskId, inputResponses: { [key!]: { action: 'accept', content: { interpretation: 'the car' } } } })
      const task = await ended(b.url, taskId)
      expect(JSON.stringify(task.result)).toContain('jaguar (the car)')
    })
  })

  it.concurrent('SIGKILL of the owner: a call a 2026-07-28 upstream runs only as its own task completes with its real result, created once upstream', { timeout: 90_000 }, async ({ onTestFinished }) => {
    // The upstream is the gateway itself in the 2026-07-28 era in front of the demo server, whose `slow` runs only as a
    // task: the call is refused (-32021) until it declares the tasks extension, then the upstream creates its task.
    const upstream = await startGateway({ upstreams: [demoStdio({ toolSettings: { slow: { taskSupport: 'required' } } })], tasks: { pollInterval: '50ms' } })
    inProcess.push(upstream)
    const modernProxy = new CountingProxy(upstream.url)
    await modernProxy.listen()
    try {
      const modern = writeConfig(`
store: { kind: redis, url: ${JSON.stringify(REDIS_URL)}, prefix: ${JSON.stringify(modernPrefix)} }
server: { stateSecret: ${JSON.stringify(STATE_SECRET)} }
admin: { port: 0, tokenSha256: ${JSON.stringify(sha256Hex(ADMIN_TOKEN))} }
tasks: { pollInterval: 50ms, ownerLease: 2s }
upstreams:
  - { name: u, transport: streamable-http, url: ${JSON.stringify(modernProxy.url)}, era: auto }
`)
      const [a, b] = await startPair(modern, processesOf(onTestFinished))
      // Per era: a 2026-07-28 client's call that becomes a task after the window is not offered to the upstream as
      // a task up front (a quick call stays quick), so only a tool the upstream runs only as a task is resumed.
      expect(await survivalOf(a)).toMatchObject({
        upstreams: [{
          upstream: 'u',
          others: 'resumed if the upstream runs the call as its own task (2026-07-28 tasks extension), else lost',
          afterWindow: 'resumed if the upstream runs the tool only as its own task, else lost',
        }],
      })
      const taskId = await callBecomingTask(a.url, 'u__demo__slow', { duration: 4000, steps: 4 })
      const task = await killAndResume([a, b], taskId, 'native', modernPrefix)
      expect(JSON.stringify(task.result)).toContain('slow finished: 4 steps in 4000 ms')
      expect(upstream.logs().filter((line) => line.msg === 'task created')).toHaveLength(1)
    } finally {
      await modernProxy.close()
    }
  })

  it.concurrent('a process shutting down hands the task over at once, not cancelled upstream; the next one on the SQLite file finishes it', { timeout: 90_000 }, async () => {
    const store = { kind: 'sqlite', path: join(mkdtempSync(join(tmpdir(), 'gw-handover-modern-client-')), 'gateway.db') }
    // A grace long enough for the research query to finish: a task handed over does not wait for it.
    const config = {
      store,
      server: { shutdownGrace: '60s' },
      tasks: { pollInterval: '50ms' },
      upstreams: [{ name: 'ev', transport: 'streamable-http', url: proxy.url, timeouts: { connect: '60s' } }],
    }
    const first = await serially(async () => await startGateway(config))
    inProcess.push(first)
    const taskId = await callBecomingTask(first.url, RESEARCH, { topic: 'modern handover' })
    const upstreamTask = await until('the task recording its upstream task', async () => {
      const resume = (await first.gateway.store.tasks.get(taskId, Date.now()))?.resume
      return resume?.kind === 'native' ? resume.upstreamTaskId : undefined
    })
    await first.close()
    expect(first.gateway.tasks.handedOver).toBe(1)
    const second = await serially(async () => await startGateway(config))
    inProcess.push(second)
    const task = await ended(second.url, taskId)
    expect(JSON.stringify(task.result)).toContain('Research Report: modern handover')
    expect(researchCalls('modern handover')).toBe(1)
    expect(proxy.countWhere('tasks/cancel', (params) => params.taskId === upstreamTask)).toBe(0)
  })

  it.concurrent('kill -9 and restart on SQLite: the next process on the file finishes the research query, created once upstream', { timeout: 90_000 }, async ({ onTestFinished }) => {
    const processes = processesOf(onTestFinished)
    const database = join(mkdtempSync(join(tmpdir(), 'gw-resume-modern-client-')), 'gateway.db')
    const sqlite = writeConfig(`
store: { kind: sqlite, path: ${JSON.stringify(database)} }
tasks: { pollInterval: 50ms }
${upstreamYaml()}`)
    const first = await serially(async () => await startGatewayProcess(sqlite))
    processes.push(first)
    const taskId = await callBecomingTask(first.url, RESEARCH, { topic: 'modern restart' })
    await recordedInSqlite(database, [taskId], 'native')
    first.child.kill('SIGKILL')
    await first.exited
    const second = await serially(async () => await startGatewayProcess(sqlite))
    processes.push(second)
    const task = await ended(second.url, taskId)
    expect(JSON.stringify(task.result)).toContain('Research Report: modern restart')
    expect(researchCalls('modern restart')).toBe(1)
  })
})
