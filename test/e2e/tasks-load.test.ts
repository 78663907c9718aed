import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MemoryBus } from '../../src/store/memory/memory-bus.ts'
import { DEMO_MAIN } from '../helpers/built.ts'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { RawSession } from '../helpers/raw-session.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>
const TASKS = 1000

function resourceCounts (): Map<string, number> {
  const counts = new Map<string, number>()
  for (const kind of process.getActiveResourcesInfo()) counts.set(kind, (counts.get(kind) ?? 0) + 1)
  return counts
}

/** Many tasks at once against a slow upstream tool: all finish with their own result, nothing leaks. */
describe(`${TASKS} concurrent tasks`, () => {
  let demo: StartedUpstream
  let gw: RunningGateway
  const warnings: string[] = []
  const onWarning = (warning: Error): void => { warnings.push(`${warning.name}: ${warning.message}`) }

  beforeAll(async () => {
    demo = await startUpstream(DEMO_MAIN, ['--http', '0'])
    gw = await startGateway({
      upstreams: [{ name: 'demo', transport: 'streamable-http', url: demo.url, maxConcurrentCalls: 50, maxQueuedCalls: 2000 }],
      tasks: { maxActivePerPrincipal: 2000 },
      server: { pageSize: 500 },
    })
    process.on('warning', onWarning)
  })

  afterAll(async () => {
    process.off('warning', onWarning)
    await gw?.close()
    await demo?.close()
  })

  it('complete with correct results and leave no listeners, connections or timers behind', { timeout: 120_000 }, async () => {
    const session = await RawSession.open(gw.url)
    const baseline = resourceCounts()
    // The channels every process listens on from its start (peer requests, cancels, stream announcements).
    const channels = (gw.gateway.store.bus as MemoryBus).channelCount
    const ids: string[] = new Array<string>(TASKS)
    for (let start = 0; start < TASKS; start += 100) {
      await Promise.all(Array.from({ length: 100 }, async (_, offset) => {
        const i = start + offset
        const response = await session.request('tools/call', { name: 'demo__slow', arguments: { duration: 100, steps: 1 + (i % 5) }, task: {} })
        ids[i] = ((response.result as Json).task as Json).taskId as string
      }))
    }
    expect(new Set(ids).size).toBe(TASKS)

    let unfinished = TASKS
    await until('every task to finish', async () => {
      unfinished = 0
      let cursor: string | undefined
      do {
        const page = (await session.request('tasks/list', cursor === undefined ? {} : { cursor })).result as { tasks: Json[], nextCursor?: string }
        unfinished += page.tasks.filter((t) => t.status === 'working' || t.status === 'input_required').length
        cursor = page.nextCursor
      } while (cursor !== undefined)
      return unfinished === 0 || undefined
    }, { timeoutMs: 60_000, everyMs: 100, describeLast: () => `: ${unfinished} unfinished` })

    for (let start = 0; start < TASKS; start += 100) {
      await Promise.all(ids.slice(start, start + 100).map(async (taskId, offset) => {
        const response = await session.request('tasks/result', { taskId })
        const result = response.result as { content: Array<{ text: string }> } | undefined
        expect(result?.content[0]?.text, JSON.stringify(response)).toBe(`slow finished: ${1 + ((start + offset) % 5)} steps in 100 ms`)
      }))
    }

    const upstream = gw.gateway.upstreams[0]!
    expect(upstream.load).toMatchObject({ active: 0, waiting: 0 })
    // One session: the one client's (the gateway's own is not counted).
    expect(upstream.load.sessions).toBe(1)
    expect((gw.gateway.store.bus as MemoryBus).channelCount).toBe(channels)
    // Timers and keep-alive sockets are released as the last exchanges wind down, which on a busy machine takes a
    // moment: the counts must come down to these bounds (a leak per task would leave a thousand, for good).
    // Sockets are bounded by concurrency, not by the number of tasks: bursts of 100 client requests (both ends
    // in this process, with some slack for sockets still draining) and the upstream's calls (50 at most at once)
    // and the two sessions' streams.
    const timers = (baseline.get('Timeout') ?? 0) + 5
    const sockets = (baseline.get('TCPSocketWrap') ?? 0) + 2 * 150 + 2 * (50 + 2)
    let after = resourceCounts()
    await until('timers and sockets released', () => {
      after = resourceCounts()
      return (after.get('Timeout') ?? 0) <= timers && (after.get('TCPSocketWrap') ?? 0) <= sockets ? true : undefined
    }, { timeoutMs: 10_000, describeLast: () => `: ${after.get('Timeout') ?? 0} timers (at most ${timers}), ${after.get('TCPSocketWrap') ?? 0} sockets (at most ${sockets})` })
    expect(warnings.filter((w) => w.includes('MaxListeners'))).toEqual([])
  })
})
