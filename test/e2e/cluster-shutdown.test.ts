import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startCluster, type Cluster } from '../helpers/cluster.ts'
import { RawSession } from '../helpers/raw-session.ts'
import { demoStdioYaml } from '../helpers/process.ts'

type Json = Record<string, unknown>

/**
 * Graceful shutdown of one of several processes: it stops taking work, lets running calls finish within the
 * grace period, fails the rest with a clear statusMessage, and gives its lease up; the other process serves
 * everything afterwards.
 */
describe('graceful shutdown of one process of a cluster', () => {
  let cluster: Cluster

  beforeAll(async () => {
    cluster = await startCluster(`
logging: { level: info }
tasks: { pollInterval: 50ms, ownerLease: 2s }
upstreams:
${demoStdioYaml()}
`, { count: 2, server: { shutdownGrace: '2s' } })
  }, 60_000)

  afterAll(async () => {
    await cluster?.close()
  })

  it('finishes short tasks, fails long ones with a clear statusMessage, and the other process reports both', async () => {
    const [leaving, staying] = cluster.processes as [typeof cluster.processes[0], typeof cluster.processes[0]]
    const session = await RawSession.open(leaving.url)
    const start = async (duration: number): Promise<string> => {
      const created = await session.request('tools/call', { name: 'demo__slow', arguments: { duration, steps: 2 }, task: {} })
      return ((created.result as Json).task as Json).taskId as string
    }
    // The grace (2s) waits out the long one: the short one has the grace many times over to finish.
    const short = await start(300)
    const long = await start(60_000)

    leaving.child.kill('SIGTERM')
    // Once draining, the leaving process refuses new work with 503 (the balancer's cue to go elsewhere).
    let refused: Response | undefined
    for (let i = 0; i < 100 && refused === undefined; i++) {
      const res = await session.post({ jsonrpc: '2.0', id: 100 + i, method: 'tools/list' }).catch(() => undefined)
      if (res?.status === 503) refused = res as unknown as Response
      else await res?.text()
    }
    expect(refused?.status).toBe(503)
    const ready = await fetch(new URL('/readyz', leaving.url))
    expect(ready.status).toBe(503)
    expect(await ready.json()).toMatchObject({ status: 'draining' })

    const [code] = await leaving.exited
    expect(code).toBe(0)
    const other = session.on(staying.url)
    expect(await other.waitFor(short, ['completed'])).toMatchObject({ status: 'completed' })
    expect(await other.waitFor(long, ['failed'])).toMatchObject({ status: 'failed', statusMessage: 'the gateway is shutting down; retry on another instance' })
    const result = await other.request('tasks/result', { taskId: short })
    expect(JSON.stringify(result.result)).toContain('slow finished')
    // The session lives on: the remaining process serves it, and new tasks run there.
    const again = await other.request('tools/call', { name: 'demo__slow', arguments: { duration: 50, steps: 1 }, task: {} })
    const taskId = ((again.result as Json).task as Json).taskId as string
    expect((await other.waitFor(taskId, ['completed'])).status).toBe('completed')
    expect(leaving.lines.some((line) => line.includes('shutdown grace over'))).toBe(true)
  }, 90_000)
})
