// The admin API of the real CLI, on processes sharing one Redis: any process lists and cancels the tasks
// another one runs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { startCluster, type Cluster } from '../helpers/cluster.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { demoStdioYaml, loggedLine, type GatewayProcess } from '../helpers/process.ts'
import { readSse } from '../helpers/sse.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const ADMIN_TOKEN = 'cluster-admin-token-41d2e8'

/** The value of `field` in the first log line whose message is `message`. */
function logged (process: GatewayProcess, message: string, field: string): string {
  const line = process.lines.find((l) => l.includes(`"msg":"${message}"`))
  if (line === undefined) throw new Error(`the gateway process never logged '${message}'`)
  return String((JSON.parse(line) as Json)[field])
}

/** Waits (bounded) until a process has logged a line containing `text`, counting only lines after `from`. */

function adminBase (process: GatewayProcess): string {
  return logged(process, 'admin API listening', 'address').replace(/\/admin$/, '')
}

async function admin (process: GatewayProcess, method: 'GET' | 'POST', path: string, token: string | null = ADMIN_TOKEN): Promise<{ status: number, body: Json }> {
  const res = await fetch(`${adminBase(process)}${path}`, {
    method,
    headers: token === null ? {} : { authorization: `Bearer ${token}` },
  })
  return { status: res.status, body: await res.json() as Json }
}

/** Waits (bounded) until the demo upstream's calls in flight on a process, as its admin API shows them, satisfy `wanted`. */
async function activeCalls (process: GatewayProcess, wanted: (active: number) => boolean): Promise<void> {
  let active = -1
  await until('the demo upstream\'s calls in flight to change', async () => {
    const [demo] = (await admin(process, 'GET', '/admin/upstreams')).body.upstreams as Json[]
    active = (demo!.calls as { active: number }).active
    return wanted(active) || undefined
  }, { describeLast: () => `: ${active} calls in flight` })
}

describe('the admin API of gateway processes sharing a Redis store', () => {
  let cluster: Cluster
  let p: GatewayProcess[]

  beforeAll(async () => {
    cluster = await startCluster(`logging: { level: debug }
tasks: { decide: always, pollInterval: 50ms }
admin: { port: 0, tokenSha256: ${sha256Hex(ADMIN_TOKEN)} }
upstreams:
${demoStdioYaml()}
`, { count: 2 })
    p = cluster.processes
  })

  afterAll(async () => {
    await cluster?.close()
  })

  it('listens on its own port, apart from the MCP port, and refuses requests without the token', async () => {
    const address = logged(p[0]!, 'admin API listening', 'address')
    expect(new URL(address).hostname).toBe('127.0.0.1')
    expect(new URL(address).port).not.toBe(new URL(p[0]!.url).port)
    expect(await admin(p[0]!, 'GET', '/admin/upstreams', null)).toMatchObject({ status: 401, body: { error: { code: 'GW_ERR_ADMIN_TOKEN_MISSING' } } })
    expect(await admin(p[0]!, 'GET', '/admin/upstreams')).toMatchObject({ status: 200, body: { upstreams: [{ name: 'demo', state: 'ready' }] } })
  })

  it('lists on one process a task another runs, and cancels it there: the upstream call stops and the client sees cancelled', async () => {
    const client = ModernRaw.withTasks(p[0]!.url)
    // The client's upstream session (a demo process under process 0) is open before the task starts.
    await client.result('tools/call', { name: 'demo__echo', arguments: { text: 'warm' } })
    const handle = await client.result('tools/call', { name: 'demo__slow', arguments: { duration: 60_000, steps: 600 } })
    const taskId = String(handle.taskId)
    const owner = logged(p[0]!, 'gateway listening', 'processId')

    const listed = await admin(p[1]!, 'GET', '/admin/tasks?tool=slow&status=working')
    expect(listed.status).toBe(200)
    expect(listed.body.tasks).toEqual([expect.objectContaining({ id: taskId, owner, status: 'working', upstream: 'demo' })])

    await activeCalls(p[0]!, (n) => n === 1)
    const from = p[0]!.lines.length
    const cancelled = await admin(p[1]!, 'POST', `/admin/tasks/${taskId}/cancel`)
    expect(cancelled).toMatchObject({ status: 200, body: { id: taskId, status: 'cancelled', statusMessage: 'cancelled by the operator' } })
    // The 60 s call ends on process 0 at once, and the demo upstream says it was cancelled.
    await activeCalls(p[0]!, (n) => n === 0)
    await loggedLine(p[0]!, 'slow: cancelled', { from })
    expect(await client.result('tasks/get', { taskId })).toMatchObject({ taskId, status: 'cancelled' })
  })

  it('pushes to the event stream of one process the changes of a task another process runs, as they happen', async () => {
    const controller = new AbortController()
    const stream = await fetch(`${adminBase(p[1]!)}/admin/events`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, signal: controller.signal })
    expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/)
    const events = readSse(stream.body!)
    const hello = await events.next()
    expect(hello.value).toMatchObject({ event: 'hello' })
    expect(JSON.parse(hello.value!.data)).toMatchObject({ processId: logged(p[1]!, 'gateway listening', 'processId'), upstreams: [{ name: 'demo' }] })

    const client = ModernRaw.withTasks(p[0]!.url)
    const handle = await client.result('tools/call', { name: 'demo__slow', arguments: { duration: 10, steps: 1 } })
    const taskId = String(handle.taskId)
    const owner = logged(p[0]!, 'gateway listening', 'processId')
    const seen: string[] = []
    const progress: Json[] = []
    for await (const event of events) {
      if (event.event !== 'task') continue
      const message = JSON.parse(event.data) as { change: string, task: Json, progress?: Json }
      const { change, task } = message
      if (task.id !== taskId) continue
      expect(task).toMatchObject({ owner, upstream: 'demo', tool: 'slow' })
      seen.push(`${change}:${String(task.status)}`)
      if (message.progress !== undefined) progress.push(message.progress)
      if (task.status === 'completed') break
    }
    controller.abort()
    // The upstream's progress report on the call reaches the other process's dashboards too.
    expect(seen).toEqual(['created:working', 'progress:working', 'status:completed'])
    expect(progress).toEqual([{ progress: 1, total: 1, message: 'step 1/1', at: expect.any(String) }])
    expect((await admin(p[1]!, 'GET', `/admin/tasks/${taskId}`)).body.timeline).toEqual([
      { type: 'created', at: expect.any(String), process: owner },
      { type: 'status', at: expect.any(String), status: 'completed', statusMessage: null, process: owner, resultBytes: expect.any(Number) },
    ])
  })
})
