import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { startCluster, type Cluster } from '../helpers/cluster.ts'
import { CountingProxy } from '../helpers/counting-proxy.ts'
import type { GatewayProcess } from '../helpers/process.ts'
import { legacyTask, next, RawSession } from '../helpers/raw-session.ts'
import { REDIS_URL } from '../helpers/redis.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const TOOL = 'ev__simulate-research-query'
const TASKS = 50

/**
 * A rolling deploy: three gateway processes on one Redis behind a round-robin balancer, in front of
 * @modelcontextprotocol/server-everything over Streamable HTTP, are replaced one after another (SIGTERM, then a
 * new process in its place) while 50 tasks run as the server's own tasks, half of them waiting for the user to
 * answer a question. Every process hands its tasks over as it stops; every task completes with the upstream's
 * real report, each ran once upstream, and the questions asked before the deploy are answered after it.
 */
describe('a rolling restart of all three processes while 50 tasks run', () => {
  let everything: StartedUpstream
  let proxy: CountingProxy
  let cluster: Cluster
  let redis: Redis

  beforeAll(async () => {
    everything = await startUpstream('test/fixtures/everything-http.mjs', [], { readyTimeoutMs: 60_000 })
    proxy = new CountingProxy(everything.url)
    await proxy.listen()
    cluster = await startCluster(`
logging: { level: info }
tasks: { pollInterval: 100ms, ownerLease: 2s }
upstreams:
  - name: ev
    transport: streamable-http
    url: ${JSON.stringify(proxy.url)}
    timeouts: { connect: 60s }
    maxConcurrentCalls: 100
`)
    redis = new Redis(REDIS_URL)
  }, 90_000)

  afterAll(async () => {
    redis?.disconnect()
    await cluster?.close()
    await proxy?.close()
    await everything?.close()
  })

  it('fails no task: each completes once upstream with its real report, questions asked before it answered after it', { timeout: 120_000 }, async () => {
    const elicitation = { elicitation: { form: {} } }
    const sessions = await Promise.all(Array.from({ length: 10 }, async () => await RawSession.open(cluster.url, elicitation)))
    const tasks = await Promise.all(Array.from({ length: TASKS }, async (_, i) => {
      const session = sessions[i % sessions.length]!
      const ambiguous = i % 2 === 0
      return { i, session, ambiguous, id: await legacyTask(session, TOOL, { topic: `deploy ${i}`, ambiguous }) }
    }))
    // Every task runs upstream, recorded where; every question is asked (and stored for its client).
    await until('every task recording its upstream task', async () => {
      const stored = await Promise.all(tasks.map(async (task) => await redis.hmget(`${cluster.prefix}task:${task.id}`, 'res', 'status')))
      return stored.every(([res, status], n) => res !== null && res !== '' && (!tasks[n]!.ambiguous || status === 'input_required')) ? true : undefined
    }, { timeoutMs: 60_000 })

    const stopped: GatewayProcess[] = []
    for (let index = 0; index < cluster.processes.length; index++) {
      stopped.push(cluster.processes[index]!)
      await cluster.replace(index)
    }
    const handedOver = stopped.map((process) => {
      const line = process.lines.find((l) => l.includes('"handed running tasks over"'))
      return line === undefined ? 0 : (JSON.parse(line) as Json).handedOver as number
    })
    // The first process stopped ran about a third of the tasks; the later ones had also taken over the earlier ones'.
    expect(handedOver[0]).toBeGreaterThan(0)
    expect(handedOver.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(TASKS)

    // The questions asked before the deploy reach their clients now, through whichever process, and are answered.
    await Promise.all(tasks.filter((task) => task.ambiguous).map(async (task) => {
      const controller = new AbortController()
      try {
        const stream = await task.session.stream({ taskResult: task.id }, controller.signal)
        const question = await next(stream, (m) => m.method === 'elicitation/create')
        await (await task.session.post({ jsonrpc: '2.0', id: question.id, result: { action: 'accept', content: { interpretation: `answer ${task.i}` } } })).text()
      } finally {
        controller.abort()
      }
    }))

    for (const task of tasks) {
      const final = await task.session.waitFor(task.id, ['completed', 'failed', 'cancelled'])
      expect(final.status, `task ${task.i}: ${JSON.stringify(final)}`).toBe('completed')
      const report = JSON.stringify((await task.session.request('tasks/result', { taskId: task.id })).result)
      expect(report).toContain(task.ambiguous ? `deploy ${task.i} (answer ${task.i})` : `Research Report: deploy ${task.i}`)
    }
    expect(proxy.count('tools/call simulate-research-query')).toBe(TASKS)
    expect(proxy.count('tasks/cancel')).toBe(0)
    for (const process of [...stopped, ...cluster.processes]) {
      expect(process.lines.filter((line) => /"level":(50|60)/.test(line) || /unhandled|uncaught/i.test(line))).toEqual([])
    }
  })
})
