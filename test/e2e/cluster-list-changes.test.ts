import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { logFingerprint } from '../../src/observability/logger.ts'
import { DEMO_MAIN } from '../helpers/built.ts'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { startCluster, type Cluster } from '../helpers/cluster.ts'
import { loggedLine, type GatewayProcess } from '../helpers/process.ts'
import { RawSession } from '../helpers/raw-session.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const TOOLS_CHANGED = 'notifications/tools/list_changed'

/**
 * A session whose GET stream one gateway process holds and whose requests go to another: the process holding
 * the stream tells it of a tool list change once, holds back further ones, and learns over the store's bus
 * that the session listed its tools on the other process, so the next change reaches it.
 */
describe('list changes of a session whose stream and requests are on different processes', () => {
  let demo: StartedUpstream
  let cluster: Cluster
  let holder: GatewayProcess
  let session: RawSession
  let elsewhere: RawSession
  const abort = new AbortController()
  const received: Json[] = []

  beforeAll(async () => {
    demo = await startUpstream(DEMO_MAIN, ['--http', '0'])
    cluster = await startCluster(`
logging: { level: debug }
upstreams:
  - name: demo
    transport: streamable-http
    url: ${JSON.stringify(demo.url)}
`, { count: 2 })
    holder = cluster.processes[0]!
    session = await RawSession.open(holder.url, {})
    elsewhere = session.on(cluster.processes[1]!.url)
    const messages = await session.stream('get', abort.signal)
    void (async () => { for await (const message of messages) received.push(message) })().catch(() => {})
    await loggedLine(holder, (line) => line.includes('opened a standalone stream') && line.includes(logFingerprint(session.sessionId)))
  })

  afterAll(async () => {
    abort.abort()
    await cluster?.close()
    await demo?.close()
  })

  /** The holder's debug lines about tool list changes for the session with message `msg` (and `outcome`). */
  const counted = (msg: string, outcome?: string): number => holder.lines.map((line) => JSON.parse(line) as Json)
    .filter((l) => l.msg === msg && l.method === TOOLS_CHANGED && l.sessionId === logFingerprint(session.sessionId))
    .filter((l) => outcome === undefined || l.outcome === outcome).length
  const notified = (): number => received.filter((m) => m.method === TOOLS_CHANGED).length

  /**
   * Toggles the demo's extra tool through the other process and waits until the holder has heard of every copy
   * (`copies`: the session's own upstream session, and the gateway session of each process) with no window
   * open and what it sent has arrived; then the session has heard `expected` notifications in all.
   */
  async function toggle (copies: number, expected: number): Promise<void> {
    const want = counted('list change for a session') + copies
    const result = await elsewhere.request('tools/call', { name: 'demo__toggle_extra_tool', arguments: {} })
    expect(JSON.stringify(result)).toMatch(/extra tool (added|removed)/)
    await until('every copy reaching the holder', () => counted('list change for a session') >= want ? true : undefined, {
      describeLast: () => `: ${counted('list change for a session')} of ${want}`,
    })
    await until('the window closing', () => counted('sent a list change') === counted('list change for a session', 'window') ? true : undefined)
    await until('what was sent arriving', () => notified() >= counted('sent a list change') ? true : undefined)
    expect(counted('list change for a session')).toBe(want)
    expect(counted('sent a list change')).toBe(expected)
    expect(notified()).toBe(expected)
  }

  it('tells the session once, holds back the rest until it lists on the other process, then tells it again', async () => {
    await toggle(3, 1)
    const listed = await elsewhere.request('tools/list')
    expect(JSON.stringify(listed)).toContain('demo__extra')
    await toggle(3, 2)
    // Not listed since: the third change is held back, and the list read then is current.
    await toggle(3, 2)
    expect(JSON.stringify(await elsewhere.request('tools/list'))).toContain('demo__extra')
  })
})
