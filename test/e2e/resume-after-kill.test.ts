import { afterAll, beforeAll, describe, expect, it, type TestContext } from 'vitest'
import { startUpstream } from '../fixtures/spawn-upstream.ts'
import { CountingProxy } from '../helpers/counting-proxy.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { loggedLine, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { legacyTask, next, RawSession } from '../helpers/raw-session.ts'
import { STATE_SECRET } from '../helpers/redis.ts'
import { SHARED_KINDS, sharedStore, type SharedKind, type SharedStore } from '../helpers/shared-store.ts'
import { expectCompleted, recordedInStore, startPair, startResumeUpstreams, type ResumeKind, type ResumeUpstreams } from '../helpers/resume.ts'

type Json = Record<string, unknown>

const TOOL = 'ev__simulate-research-query'

/**
 * Two gateway processes on one shared store (Redis, then PostgreSQL); the one that runs the tasks is killed with
 * SIGKILL mid-task, and the other adopts them. In front of @modelcontextprotocol/server-everything over Streamable
 * HTTP (`simulate-research-query` runs as the server's own task, four stages of a second; its other tools are plain
 * calls whose streams it replays with its own event store) and of an upstream that replays its call streams (plain
 * calls): the new owner reaches the upstream tasks again, or reads the rest of the calls' streams, on the same
 * upstream sessions, and the client sees the tasks finish with the upstream's real results.
 *
 * The tests of one store run concurrently (the stores one after another): most of their time is spent waiting on
 * leases and upstream stages. Each has its own key prefix or schema (its processes see no other test's tasks or
 * leases) and its own counting proxies in front of the shared upstreams (its counts are its own calls'); the one
 * that restarts its upstream has an upstream of its own. Their gateway processes connect only to the upstream the
 * test calls, and those that connect to server-everything start one pair at a time: on a loaded machine it takes
 * seconds to open a session, and many at once outlast a start.
 */
describe.each(SHARED_KINDS)('running tasks on %s survive the death of their gateway process', (kind: SharedKind) => {
  let upstreams: ResumeUpstreams

  beforeAll(async () => {
    upstreams = await startResumeUpstreams()
  }, 90_000)

  afterAll(async () => {
    await upstreams?.close()
  })

  /** One test's own place in the store, counting proxies, config file and processes, all removed when the test ends. */
  interface Scenario {
    store: SharedStore
    uses: 'ev' | 'rp'
    everythingProxy: CountingProxy
    replayProxy: CountingProxy
    file: string
    processes: GatewayProcess[]
    inProcess: RunningGateway[]
  }

  /** `uses`: the upstream the test's processes connect to (`ev` server-everything, `rp` the replaying upstream). */
  async function scenario (onTestFinished: TestContext['onTestFinished'], uses: 'ev' | 'rp', replayUrl = upstreams.replayable.url): Promise<Scenario> {
    const store = sharedStore(kind, 'mcpgw-resume')
    const everythingProxy = new CountingProxy(upstreams.everything.url)
    const replayProxy = new CountingProxy(replayUrl)
    await Promise.all([everythingProxy.listen(), replayProxy.listen()])
    const file = writeConfig(`
store: ${store.yaml}
server: { stateSecret: ${JSON.stringify(STATE_SECRET)} }
tasks: { pollInterval: 50ms, ownerLease: 2s }
upstreams:
${uses === 'ev'
  ? `  - { name: ev, transport: streamable-http, url: ${JSON.stringify(everythingProxy.url)}, timeouts: { connect: 60s } }`
  : `  - { name: rp, transport: streamable-http, url: ${JSON.stringify(replayProxy.url)} }`}
`)
    const s: Scenario = { store, uses, everythingProxy, replayProxy, file, processes: [], inProcess: [] }
    onTestFinished(async () => {
      await stopAll(s.processes)
      await Promise.all(s.inProcess.map(async (gw) => await gw.close()))
      await Promise.all([everythingProxy.close(), replayProxy.close()])
      await store.drop()
    })
    return s
  }

  let evStarting: Promise<unknown> = Promise.resolve()

  /** Starts the test's two processes; for server-everything, once the pairs started before are up (or failed to). */
  async function pair (s: Scenario): Promise<[GatewayProcess, GatewayProcess]> {
    if (s.uses === 'rp') return await startPair(s.file, s.processes)
    const started = evStarting.then(async () => await startPair(s.file, s.processes))
    evStarting = started.catch(() => {})
    return await started
  }

  /** Waits until the store says, for each task, how another process reaches its upstream work again. */
  async function recorded (s: Scenario, taskIds: string[], resume: ResumeKind): Promise<void> {
    const store = await s.store.open()
    try {
      await recordedInStore(store, taskIds, resume)
    } finally {
      await store.close()
    }
  }

  /**
   * Kills `a` (which runs the task), waits until `b` has taken its tasks over, and answers through `b` the question
   * the task asked before the kill; returns the question and the task's result message.
   */
  async function killThenAnswer (
    [a, b]: [GatewayProcess, GatewayProcess],
    session: RawSession,
    taskId: string,
    content: Json,
  ): Promise<{ question: Json, result: Json }> {
    const from = b.lines.length
    a.child.kill('SIGKILL')
    await a.exited
    await loggedLine(b, 'took over the tasks of a lost gateway process', { from })
    const viaB = session.on(b.url)
    const controller = new AbortController()
    try {
      const stream = await viaB.stream({ taskResult: taskId }, controller.signal)
      const question = await next(stream, (m) => m.method === 'elicitation/create')
      await viaB.post({ jsonrpc: '2.0', id: question.id, result: { action: 'accept', content } })
      return { question, result: await next(stream, (m) => 'result' in m || 'error' in m) }
    } finally {
      controller.abort()
    }
  }

  it.concurrent('SIGKILL of the owner mid-task: every task completes with its real report, none run twice upstream', async ({ onTestFinished }) => {
    const s = await scenario(onTestFinished, 'ev')
    const [a, b] = await pair(s)
    const session = await RawSession.open(a.url)
    const taskIds = await Promise.all(Array.from({ length: 10 }, async (_, i) => await legacyTask(session, TOOL, { topic: `topic ${i}` })))
    await recorded(s, taskIds, 'native')
    a.child.kill('SIGKILL')
    await a.exited
    await expectCompleted(session.on(b.url), taskIds, (i) => `Research Report: topic ${i}`)
    expect(s.everythingProxy.count('tools/call simulate-research-query')).toBe(10)
  })

  it.concurrent('a plain call whose stream the upstream replays (its own event store) completes after the kill, called once', async ({ onTestFinished }) => {
    const s = await scenario(onTestFinished, 'ev')
    const [a, b] = await pair(s)
    const session = await RawSession.open(a.url)
    const taskId = await legacyTask(session, 'ev__trigger-long-running-operation', { duration: 3, steps: 3 })
    await recorded(s, [taskId], 'stream')
    a.child.kill('SIGKILL')
    await a.exited
    const viaB = session.on(b.url)
    expect((await viaB.waitFor(taskId, ['completed', 'failed', 'cancelled'])).status).toBe('completed')
    expect(JSON.stringify((await viaB.request('tasks/result', { taskId })).result)).toContain('Long running operation completed. Duration: 3 seconds')
    expect(s.everythingProxy.count('tools/call trigger-long-running-operation')).toBe(1)
  })

  it.concurrent('an elicitation the upstream task asked before the kill is answered through the process that adopted it', async ({ onTestFinished }) => {
    const s = await scenario(onTestFinished, 'ev')
    const [a, b] = await pair(s)
    const session = await RawSession.open(a.url, { elicitation: { form: {} } })
    const taskId = await legacyTask(session, TOOL, { topic: 'jaguar', ambiguous: true })
    await recorded(s, [taskId], 'native')
    // The upstream's question is stored for the client (the task waits for input) before the kill.
    await session.waitFor(taskId, ['input_required'])
    a.child.kill('SIGKILL')
    await a.exited
    const viaB = session.on(b.url)
    const controller = new AbortController()
    const stream = await viaB.stream({ taskResult: taskId }, controller.signal)
    const question = await next(stream, (m) => m.method === 'elicitation/create')
    expect(String((question.params as Json).message)).toContain('jaguar')
    const answered = await viaB.post({ jsonrpc: '2.0', id: question.id, result: { action: 'accept', content: { interpretation: 'the gateway' } } })
    expect(answered.status).toBe(202)
    const result = await next(stream, (m) => 'result' in m || 'error' in m)
    controller.abort()
    expect(JSON.stringify(result)).toContain('jaguar (the gateway)')
    expect((await viaB.waitFor(taskId, ['completed', 'failed'])).status).toBe('completed')
  })

  it.concurrent('an elicitation answered after another process adopted the task reaches the upstream task', async ({ onTestFinished }) => {
    const s = await scenario(onTestFinished, 'ev')
    const [a, b] = await pair(s)
    const session = await RawSession.open(a.url, { elicitation: { form: {} } })
    const taskId = await legacyTask(session, TOOL, { topic: 'mercury', ambiguous: true })
    await recorded(s, [taskId], 'native')
    await session.waitFor(taskId, ['input_required'])
    const { result } = await killThenAnswer([a, b], session, taskId, { interpretation: 'the planet' })
    expect(JSON.stringify(result)).toContain('mercury (the planet)')
  })

  it.concurrent('plain calls, SIGKILL of the owner mid-call: every task completes with the call\'s real result, none called twice', async ({ onTestFinished }) => {
    const s = await scenario(onTestFinished, 'rp')
    const [a, b] = await pair(s)
    const session = await RawSession.open(a.url)
    const taskIds = await Promise.all(Array.from({ length: 5 }, async (_, i) => await legacyTask(session, 'rp__slow_report', { topic: `stream ${i}`, ms: 3000 })))
    await recorded(s, taskIds, 'stream')
    a.child.kill('SIGKILL')
    await a.exited
    await expectCompleted(session.on(b.url), taskIds, (i) => `report on stream ${i} after 3 steps`)
    expect(s.replayProxy.count('tools/call slow_report')).toBe(5)
    expect(s.replayProxy.count('notifications/cancelled')).toBe(0)
  })

  it.concurrent('plain calls: a question the call asked before the kill is answered through the process that adopted it', async ({ onTestFinished }) => {
    const s = await scenario(onTestFinished, 'rp')
    const [a, b] = await pair(s)
    const session = await RawSession.open(a.url, { elicitation: { form: {} } })
    const taskId = await legacyTask(session, 'rp__ask_then_report', { topic: 'tides' })
    await recorded(s, [taskId], 'stream')
    await session.waitFor(taskId, ['input_required'])
    const { question, result } = await killThenAnswer([a, b], session, taskId, { answer: 'high at noon' })
    expect(String((question.params as Json).message)).toContain('tides')
    expect(JSON.stringify(result)).toContain('report on tides: high at noon')
  })

  it.concurrent('plain calls: a task whose upstream forgot the call\'s session fails, saying why', async ({ onTestFinished }) => {
    // An upstream of its own: the test restarts it.
    let replayable = await startUpstream('test/fixtures/replayable-upstream.ts', ['--port', '0'])
    onTestFinished(async () => { await replayable.close() })
    const s = await scenario(onTestFinished, 'rp', replayable.url)
    const [a, b] = await pair(s)
    const session = await RawSession.open(a.url)
    const taskId = await legacyTask(session, 'rp__slow_report', { topic: 'forgotten', ms: 20_000, steps: 20 })
    await recorded(s, [taskId], 'stream')
    a.child.kill('SIGKILL')
    await a.exited
    // The upstream restarts (on another port, behind the same proxy): its sessions and their streams are gone.
    await replayable.close()
    replayable = await startUpstream('test/fixtures/replayable-upstream.ts', ['--port', '0'])
    s.replayProxy.retarget(replayable.url)
    const task = await session.on(b.url).waitFor(taskId, ['completed', 'failed', 'cancelled'])
    expect(task.status).toBe('failed')
    expect(String(task.statusMessage)).toMatch(/^gateway process stopped during execution, and the stream of its upstream call could not be reached again: /)
    const result = await session.on(b.url).request('tasks/result', { taskId })
    expect(result.error).toMatchObject({ code: -32603 })
  })

  it.concurrent('plain calls: a process shutting down hands the calls over without cancelling them upstream', async ({ onTestFinished }) => {
    const s = await scenario(onTestFinished, 'rp')
    const config = { store: s.store.config, server: { stateSecret: STATE_SECRET }, tasks: { pollInterval: '50ms', ownerLease: '2s' }, upstreams: [{ name: 'rp', transport: 'streamable-http', url: s.replayProxy.url }] }
    const [a, b] = await Promise.all([startGateway(config), startGateway(config)])
    s.inProcess.push(a, b)
    const session = await RawSession.open(a.url)
    const taskIds = await Promise.all(Array.from({ length: 3 }, async (_, i) => await legacyTask(session, 'rp__slow_report', { topic: `handover ${i}`, ms: 6000 })))
    await recorded(s, taskIds, 'stream')
    await a.close()
    expect(a.gateway.tasks.handedOver).toBe(3)
    await expectCompleted(session.on(b.url), taskIds, (i) => `report on handover ${i} after 3 steps`)
    expect(s.replayProxy.count('tools/call slow_report')).toBe(3)
    expect(s.replayProxy.count('notifications/cancelled')).toBe(0)
  })
})
