import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { DEMO_MAIN } from '../helpers/built.ts'
import { startCluster, type Cluster } from '../helpers/cluster.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { legacyTask, RawSession } from '../helpers/raw-session.ts'
import { SHARED_KINDS } from '../helpers/shared-store.ts'
import { until } from '../helpers/until.ts'
import type { GatewayStore } from '../../src/store/types.ts'

type Json = Record<string, unknown>

const LEASE_MS = 2000
/** Failover bound: the lease lapses, then a survivor's next scan (every lease/5) takes the tasks over. */
const FAILOVER_MS = LEASE_MS + LEASE_MS / 5
/**
 * Room for the machine: process scheduling, store round trips, the survivor's first scan after the kill. The
 * bound tells a failover by lease (seconds) from the only other ways such a task could end (its TTL, LONG_MS;
 * a hang), so it is generous: a loaded machine cannot reach it while a failover that waits on anything but the
 * lease does.
 */
const SLACK_MS = 20_000
/** Far longer than the test runs. */
const LONG_MS = 600_000
const LOST = 'gateway process lost during execution'
const TERMINAL = new Set(['completed', 'failed', 'cancelled'])
const NATIVE = 'ev__simulate-research-query'
const REPLAYED = 'rp__ask_then_report'
const EXTENSION = 'm__demo__ask_user'

/** One task of the run, whichever era created it. */
interface Tracked {
  id: string
  era: 'legacy' | 'modern'
  tool: string
  asks: boolean
  /** A task of server-everything's own task tool, waiting for its question to be answered when the victim dies. */
  native: boolean
  /** A plain call of an upstream that replays its call streams, still running when the victim dies. */
  replayed?: boolean
  /** A task a 2026-07-28 upstream runs as its own (tasks extension), waiting for its question when the victim dies. */
  extension?: boolean
  /** Runs far longer than the test: still running when the victim is killed, cancelled by the test if it survives. */
  long: boolean
  /** The legacy session that created it. */
  session?: RawSession
  /** Its status and result shortly before the kill. */
  before?: { status: string, result: unknown }
}

function legacyStatus (reply: Json): Json {
  // An error instead of a task fails the test saying what came, not as a property of undefined.
  if (reply.result === undefined) throw new Error(`expected a task, got ${JSON.stringify(reply)}`)
  return reply.result as Json
}

/**
 * 300 tasks of both eras run on three gateway processes behind a round-robin balancer, 20 more as tasks of
 * @modelcontextprotocol/server-everything's own (each waiting for an answer), 10 as plain calls of an upstream
 * that replays its call streams and 10 as tasks of a 2026-07-28 upstream with the tasks extension (the gateway
 * itself, in front of the demo server); one process is killed with SIGKILL in the middle. A survivor takes its
 * tasks over within the lease: it resumes the upstreams' own tasks (they complete once answered) and the
 * replayable calls, runs the idempotent tool again, and fails the rest; nothing that had completed is lost; the
 * survivors log no unhandled error. Both stores' clusters use the same upstreams, started once.
 */
describe('chaos', () => {
  let demo: StartedUpstream
  let modernUpstream: RunningGateway
  let everything: StartedUpstream
  let replayable: StartedUpstream

  beforeAll(async () => {
    ;[demo, everything, replayable] = await Promise.all([
      startUpstream(DEMO_MAIN, ['--http', '0']),
      startUpstream('test/fixtures/everything-http.mjs', [], { readyTimeoutMs: 60_000 }),
      startUpstream('test/fixtures/replayable-upstream.ts', ['--port', '0']),
    ])
    // In front of the same demo server over Streamable HTTP: each question comes on the stream of its own call.
    modernUpstream = await startGateway({
      upstreams: [{ name: 'demo', transport: 'streamable-http', url: demo.url, tools: { allow: ['ask_user'] }, prompts: { deny: ['*'] }, resources: { deny: ['*'] } }],
      tasks: { decide: 'always', pollInterval: '100ms' },
    })
  }, 60_000)

  afterAll(async () => {
    await modernUpstream?.close()
    await demo?.close()
    await everything?.close()
    await replayable?.close()
  })

  describe.each(SHARED_KINDS)('chaos: one of three gateway processes on %s killed with SIGKILL under 340 tasks', (kind) => {
    let cluster: Cluster
    /** The processes' store, read by the test: what each task records, and who owns it. */
    let store: GatewayStore

    beforeAll(async () => {
      cluster = await startCluster(`
logging: { level: info }
metrics: { listener: main }
tasks: { pollInterval: 100ms, ownerLease: ${LEASE_MS}ms, maxActivePerPrincipal: 1000, decide: always }
upstreams:
  - name: demo
    transport: streamable-http
    url: ${JSON.stringify(demo.url)}
    maxConcurrentCalls: 400
  - name: redo
    transport: streamable-http
    url: ${JSON.stringify(demo.url)}
    tools: { allow: [slow] }
    prompts: { deny: ['*'] }
    resources: { deny: ['*'] }
    toolSettings: { slow: { idempotent: true } }
    maxConcurrentCalls: 400
  - name: ev
    transport: streamable-http
    url: ${JSON.stringify(everything.url)}
    tools: { allow: [simulate-research-query] }
    prompts: { deny: ['*'] }
    resources: { deny: ['*'] }
    timeouts: { connect: 60s }
    # Both clients that start these tasks may live on one process: all 20 wait for their answers there at once.
    maxConcurrentCalls: 400
  - name: rp
    transport: streamable-http
    url: ${JSON.stringify(replayable.url)}
    maxConcurrentCalls: 400
  - { name: m, transport: streamable-http, url: ${JSON.stringify(modernUpstream.url)}, era: auto, maxConcurrentCalls: 400, prompts: { deny: ['*'] }, resources: { deny: ['*'] } }
`, { store: kind })
      store = await cluster.store.open()
    }, 60_000)

    afterAll(async () => {
      await store?.close()
      await cluster?.close()
    })

    it('leaves every task terminal, fails or re-runs the lost ones within the lease, and keeps every completed result', async () => {
      const sessions = await Promise.all(Array.from({ length: 10 }, async () => await RawSession.open(cluster.url)))
      const modern = ModernRaw.withTasks(cluster.url, { elicitation: { form: {} } })
      const tracked: Tracked[] = []

      const read = async (task: Tracked): Promise<{ status: string, result: unknown, statusMessage: unknown, lastUpdatedAt: unknown }> => {
        if (task.era === 'legacy') {
          const got = legacyStatus(await task.session!.request('tasks/get', { taskId: task.id }))
          const result = got.status === 'completed' ? (await task.session!.request('tasks/result', { taskId: task.id })).result : undefined
          return { status: got.status as string, result, statusMessage: got.statusMessage, lastUpdatedAt: got.lastUpdatedAt }
        }
        const got = (await modern.request('tasks/get', { taskId: task.id })).body.result as Json
        return { status: got.status as string, result: got.result, statusMessage: got.statusMessage, lastUpdatedAt: got.lastUpdatedAt }
      }

      // Answer half of the elicitations, whichever process runs their task and whichever gets the answer.
      const answer = async (task: Tracked, content: Json): Promise<void> => {
        await until(`task ${task.id} asking`, async () => (await read(task)).status === 'input_required' ? true : undefined, { everyMs: 100 }).catch(() => {})
        if (task.era === 'modern') {
          try {
            const got = (await modern.request('tasks/get', { taskId: task.id })).body.result as Json
            const responses: Json = {}
            for (const key of Object.keys((got.inputRequests ?? {}) as Json)) responses[key] = { action: 'accept', content }
            await modern.request('tasks/update', { taskId: task.id, inputResponses: responses })
          } catch {
          // Sent to the process that gets killed; the final status is checked below.
          }
        } else {
          const controller = new AbortController()
          try {
            const stream = await task.session!.stream({ taskResult: task.id }, controller.signal)
            for await (const message of stream) {
              if (message.method !== 'elicitation/create') continue
              await (await task.session!.post({ jsonrpc: '2.0', id: message.id, result: { action: 'accept', content } })).text()
              break
            }
          } catch {
          // The stream's process may be the one that gets killed; the final status is checked below.
          } finally {
            controller.abort()
          }
        }
      }
      // Every fifth task asks the user (answered for half of them, in both eras); 40 tasks of two clients (legacy
      // session 0 and the modern client) run for a minute, so however slowly a loaded machine gets to the kill, the
      // victim (the process with the most unfinished tasks) has at least half of them; the rest run 0.5–6 s.
      const plan = Array.from({ length: 300 }, (_, i) => {
        const asks = i % 10 === 3 || i % 10 === 6
        const tool = asks ? 'demo__ask_user' : i % 3 === 0 ? 'redo__slow' : 'demo__slow'
        const long = tool === 'demo__slow' && (i % 10 === 0 || i % 10 === 5)
        const duration = long ? LONG_MS : 500 + ((i * 197) % 5500)
        const args = asks ? { message: `Task ${i}?`, timeoutMs: 15_000 } : { duration, steps: 3 }
        return { i, era: i % 2 === 0 ? 'legacy' as const : 'modern' as const, tool, asks, long, args }
      })
      expect(plan.filter((p) => p.long)).toHaveLength(40)
      // Half of the questions are answered (both eras), each from as soon as its task is created: a loaded machine
      // may take longer to create all 300 than a question waits.
      const answering: Array<Promise<void>> = []
      const answerIfPlanned = (p: { i: number, asks: boolean }, task: Tracked): void => {
        if (p.asks && Math.floor(p.i / 10) % 2 === 0) answering.push(answer(task, { name: 'Chaos' }))
      }
      for (let start = 0; start < plan.length; start += 30) {
        await Promise.all(plan.slice(start, start + 30).map(async (p) => {
          if (p.era === 'legacy') {
            const session = sessions[p.i % sessions.length]!
            const created = await session.request('tools/call', { name: p.tool, arguments: p.args, task: {} })
            const task = (created.result as Json | undefined)?.task as Json | undefined
            if (!task) throw new Error(`legacy task not created: ${JSON.stringify(created)}`)
            const tracking: Tracked = { id: task.taskId as string, era: 'legacy', tool: p.tool, asks: p.asks, native: false, long: p.long, session }
            tracked.push(tracking)
            answerIfPlanned(p, tracking)
          } else {
            const created = await modern.request('tools/call', { name: p.tool, arguments: p.args })
            if (created.body.result === undefined) throw new Error(`modern task not created: ${JSON.stringify(created.body)}`)
            const tracking: Tracked = { id: (created.body.result as Json).taskId as string, era: 'modern', tool: p.tool, asks: p.asks, native: false, long: p.long }
            tracked.push(tracking)
            answerIfPlanned(p, tracking)
          }
        }))
      }
      expect(tracked).toHaveLength(300)

      // Mid-run: some tasks have completed, most are still running.
      await until('the first completions', async () => {
        const sample = await Promise.all(tracked.slice(0, 40).map(read))
        return sample.filter((s) => s.status === 'completed').length >= 5 ? true : undefined
      }, { everyMs: 100 })
      /**
     * Starts `count` tasks of `tool` that each ask their client a question, answered only after the kill (so the
     * victim's are still running when it dies): of the two clients that run the long tasks, legacy session 0 (even
     * n) and the modern client (odd n).
     */
      const startAsking = async (count: number, tool: string, args: (n: number) => Json, kind: Pick<Tracked, 'native' | 'replayed' | 'extension'>): Promise<void> => {
        await Promise.all(Array.from({ length: count }, async (_, n) => {
          if (n % 2 === 0) {
            const id = await legacyTask(sessions[0]!, tool, args(n))
            tracked.push({ id, era: 'legacy', tool, asks: true, long: false, session: sessions[0]!, ...kind })
          } else {
            const created = await modern.request('tools/call', { name: tool, arguments: args(n) })
            if (created.body.result === undefined) throw new Error(`modern task not created: ${JSON.stringify(created.body)}`)
            tracked.push({ id: (created.body.result as Json).taskId as string, era: 'modern', tool, asks: true, long: false, ...kind })
          }
        }))
      }
      // The upstream's own tasks start now, so that their questions (which the upstream waits for 60 s) are
      // answered in time after the kill; each has asked before the kill. Then plain calls of an upstream that
      // replays its call streams, and tasks the 2026-07-28 upstream runs as its own.
      await startAsking(20, NATIVE, (n) => ({ topic: `chaos ${300 + n}`, ambiguous: true }), { native: true })
      await startAsking(10, REPLAYED, (n) => ({ topic: `chaos stream ${n}`, ms: 200 }), { native: false, replayed: true })
      await startAsking(10, EXTENSION, (n) => ({ message: `chaos question ${n}` }), { native: false, extension: true })
      expect(tracked).toHaveLength(340)
      const resumable = (t: Tracked): boolean => t.native || t.replayed === true || t.extension === true
      await Promise.all(tracked.filter(resumable).map(async (task) => {
        let last: Awaited<ReturnType<typeof read>> | undefined
        await until(`${task.era} task ${task.id} of ${task.tool} asking`, async () => {
          last = await read(task)
          if (TERMINAL.has(last.status)) throw new Error(`${task.era} task ${task.id} of ${task.tool} ended before it asked: ${JSON.stringify(last)}`)
          return last.status === 'input_required' ? true : undefined
        }, { everyMs: 100, describeLast: () => `; last seen ${JSON.stringify(last)}` })
      }))
      // Each call's stream is recorded as replayable before the kill (a call killed before that is lost).
      await until('every replayable call recorded', async () => {
        const replayed = tracked.filter((t) => t.replayed === true)
        const stored = await Promise.all(replayed.map(async (t) => await store.tasks.get(t.id, Date.now())))
        return stored.every((task) => task?.resume?.kind === 'stream') ? true : undefined
      })
      // Read in parallel batches: one by one, a loaded machine took so long that every task had ended before the kill.
      for (let start = 0; start < tracked.length; start += 25) {
        await Promise.all(tracked.slice(start, start + 25).map(async (task) => {
          const state = await read(task)
          task.before = { status: state.status, result: state.result }
        }))
      }
      // A client's tasks run on its home process: the victim is the process running the most long tasks (the two
      // clients that have them live on at most two processes, so it runs at least 20), and others besides.
      const ids = cluster.processes.map((process) => (JSON.parse(process.lines.find((line) => line.includes('"gateway listening"'))!) as Json).processId as string)
      const owners = await Promise.all(tracked.map(async (t) => (await store.tasks.get(t.id, Date.now()))?.owner))
      const longRunning = ids.map((id) => tracked.filter((t, n) => t.long && owners[n] === id).length)
      const victimIndex = longRunning.indexOf(Math.max(...longRunning))
      const victimId = ids[victimIndex]!
      expect(await store.leases.alive(victimId, Date.now())).toBe(true)
      const killedAt = Date.now()
      await cluster.kill(victimIndex)
      // What the victim left behind, read from the store before any survivor can have taken it over.
      const stored = await Promise.all(tracked.map(async (t) => await store.tasks.get(t.id, Date.now())))
      const orphans = tracked.filter((_, n) => stored[n]?.owner === victimId && !TERMINAL.has(stored[n]?.status ?? ''))
      // The questions of the upstream's own tasks, asked before the kill, are answered now, through any process.
      const answeringNatives = [
        ...tracked.filter((t) => t.native).map(async (task) => { await answer(task, { interpretation: 'after the kill' }) }),
        ...tracked.filter((t) => t.replayed === true).map(async (task) => { await answer(task, { answer: 'after the kill' }) }),
        ...tracked.filter((t) => t.extension === true).map(async (task) => { await answer(task, { name: 'after the kill' }) }),
      ]
      expect(orphans.filter((t) => t.long).length).toBeGreaterThanOrEqual(20)

      // The long tasks the victim did not run would outlast the test: their clients cancel them.
      await Promise.all(tracked.filter((t) => t.long && !orphans.includes(t)).map(async (task) => {
        const status = task.era === 'legacy'
          ? legacyStatus(await task.session!.request('tasks/cancel', { taskId: task.id })).status
          : ((await modern.request('tasks/cancel', { taskId: task.id })).body.result as Json).status
        expect(status, `task ${task.id}`).toBe('cancelled')
      }))

      await Promise.all([...answering, ...answeringNatives])
      const final = new Map<string, Awaited<ReturnType<typeof read>>>()
      await until('every task terminal', async () => {
        for (const task of tracked) {
          if (final.has(task.id)) continue
          const state = await read(task)
          if (TERMINAL.has(state.status)) final.set(task.id, state)
        }
        return final.size === tracked.length ? true : undefined
      }, { timeoutMs: 60_000, everyMs: 100 })

      for (const task of tracked) {
        const state = final.get(task.id)!
        if (task.before!.status === 'completed') {
          expect(state.status, `task ${task.id}`).toBe('completed')
          expect(state.result, `task ${task.id}`).toEqual(task.before!.result)
        }
      }
      for (const task of tracked.filter((t) => t.native)) {
      // Resumed when their process died, or never interrupted: completed either way, with the upstream's report.
        expect(final.get(task.id)!.status, `task ${task.id}`).toBe('completed')
        expect(JSON.stringify(final.get(task.id)!.result)).toContain('(after the kill)')
      }
      expect(orphans.filter((t) => t.native).length).toBeGreaterThan(0)
      for (const task of tracked.filter((t) => t.replayed === true)) {
      // Replayed to a survivor when their process died, or never interrupted: completed with the call's result.
        expect(final.get(task.id)!.status, `task ${task.id}`).toBe('completed')
        expect(JSON.stringify(final.get(task.id)!.result)).toMatch(/report on chaos stream \d: after the kill/)
      }
      expect(orphans.filter((t) => t.replayed === true).length).toBeGreaterThan(0)
      for (const task of tracked.filter((t) => t.extension === true)) {
      // Followed again by a survivor when their process died (tasks/get), or never interrupted.
        expect(final.get(task.id)!.status, `task ${task.id}`).toBe('completed')
        expect(JSON.stringify(final.get(task.id)!.result)).toContain('Hello, after the kill!')
      }
      expect(orphans.filter((t) => t.extension === true).length).toBeGreaterThan(0)
      for (const task of orphans) {
        const state = final.get(task.id)!
        if (resumable(task)) continue
        if (task.tool === 'redo__slow') {
        // Idempotent: run again by a survivor, to completion.
          expect(state.status, `task ${task.id}`).toBe('completed')
          expect(JSON.stringify(state.result)).toContain('slow finished')
        } else {
          expect(state, `task ${task.id}`).toMatchObject({ status: 'failed', statusMessage: LOST })
          expect(Date.parse(state.lastUpdatedAt as string) - killedAt, `task ${task.id} failed late`).toBeLessThanOrEqual(FAILOVER_MS + SLACK_MS)
        }
      }

      // Elicitations were answered through whichever process the balancer picked, for tasks of both eras.
      const greeted = tracked.filter((t) => JSON.stringify(final.get(t.id)!.result ?? '').includes('Hello, Chaos!'))
      expect(new Set(greeted.map((t) => t.era))).toEqual(new Set(['legacy', 'modern']))

      const survivors = cluster.processes.filter((_, index) => index !== victimIndex)
      for (const survivor of survivors) {
        expect(survivor.child.exitCode).toBeNull()
        const errors = survivor.lines.filter((line) => /"level":(50|60)/.test(line) || /unhandled|uncaught/i.test(line))
        expect(errors).toEqual([])
      }
      expect(survivors.some((s) => s.lines.some((line) => line.includes('took over the tasks of a lost gateway process')))).toBe(true)
      // The takeovers are counted by the survivors that made them: every orphan once, by what was done with it.
      const failovers = { resumed: 0, rerun: 0, failed: 0 }
      for (const survivor of survivors) {
        const text = await (await fetch(survivor.url.replace(/\/mcp$/, '/metrics'))).text()
        for (const action of ['resumed', 'rerun', 'failed'] as const) {
          const sample = new RegExp(`^gateway_task_failovers_total\\{action="${action}"\\} (\\d+)$`, 'm').exec(text)
          failovers[action] += Number(sample?.[1] ?? 0)
        }
      }
      const rerun = orphans.filter((t) => t.tool === 'redo__slow').length
      const resumed = orphans.filter(resumable).length
      expect(failovers).toEqual({ resumed, rerun, failed: orphans.length - rerun - resumed })
    }, 150_000)
  })
})
