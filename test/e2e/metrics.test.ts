import { createHash } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js'
import { connectV1, textOf } from '../helpers/clients.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { runTask } from '../helpers/tasks.ts'
import { until } from '../helpers/until.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { postRpc } from '../helpers/inject.ts'
import { parseConfig } from '../../src/config/load.ts'

/** One scrape of `/metrics` (through inject(): a scrape needs no socket): every sample line as `name{labels}` → value. */
async function scrape (app: FastifyInstance): Promise<Map<string, number>> {
  const res = await app.inject({ method: 'GET', url: '/metrics' })
  expect(res.statusCode).toBe(200)
  expect(res.headers['content-type']).toContain('text/plain')
  const samples = new Map<string, number>()
  for (const line of res.body.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const space = line.lastIndexOf(' ')
    samples.set(line.slice(0, space), Number(line.slice(space + 1)))
  }
  return samples
}

/** The value of a sample, 0 when it is absent (a labelled series appears on its first observation). */
function value (samples: Map<string, number>, series: string): number {
  return samples.get(series) ?? 0
}

/** Scrapes until `series` reaches at least `atLeast` (a state that moves on its own, such as reconnects). */
async function scrapeUntil (app: FastifyInstance, series: string, atLeast: number): Promise<Map<string, number>> {
  return await until(`${series} reaching ${atLeast}`, async () => {
    const samples = await scrape(app)
    return value(samples, series) >= atLeast ? samples : undefined
  })
}

describe('Prometheus metrics on the main listener', () => {
  let gw: RunningGateway
  let client: Client

  beforeAll(async () => {
    gw = await startGateway({
      metrics: { listener: 'main' },
      limits: { pollBurst: 1 },
      upstreams: [
        demoStdio(),
        // An upstream that exits at once: it stays down and is retried.
        { name: 'broken', transport: 'stdio', command: process.execPath, args: ['-e', 'process.exit(3)'], restart: { initialDelay: '20ms', maxDelay: '50ms' }, timeouts: { connect: '5s' } },
      ],
    })
    client = await connectV1(gw.url, { onElicit: () => ({ action: 'accept', content: { name: 'Ada' } }) })
  })
  afterAll(async () => {
    await client?.close()
    await gw?.close()
  })

  it('counts a synchronous call: the request, its upstream call and their latencies', async () => {
    const before = await scrape(gw.app)
    expect(textOf(await client.callTool({ name: 'demo__echo', arguments: { text: 'hi' } }))).toContain('hi')
    const after = await scrape(gw.app)
    const latency = 'gateway_request_duration_seconds_count{method="tools/call",era="2025-11-25",outcome="ok"}'
    expect(value(after, latency) - value(before, latency)).toBe(1)
    const callLatency = 'gateway_upstream_call_duration_seconds_count{upstream="demo",tool="echo",outcome="ok"}'
    expect(value(after, callLatency) - value(before, callLatency)).toBe(1)
    expect(value(after, 'gateway_upstream_sessions{upstream="demo"}')).toBeGreaterThanOrEqual(1)
    expect(value(after, 'gateway_upstream_up{upstream="demo"}')).toBe(1)
    // A stdio upstream runs one process per client upstream session, and one for the gateway's own session.
    expect(value(after, 'gateway_upstream_processes{upstream="demo"}')).toBe(value(after, 'gateway_upstream_sessions{upstream="demo"}') + 1)
    expect(value(after, 'gateway_store_up')).toBe(1)
    expect(after.has('gateway_sse_streams_open')).toBe(true)
    expect(value(after, 'gateway_store_operation_duration_seconds_count{backend="memory",operation="sessions.touch"}') +
      value(after, 'gateway_store_operation_duration_seconds_count{backend="memory",operation="sessions.get"}')).toBeGreaterThan(0)
  })

  it('labels a 2026-07-28 request with its era', async () => {
    const before = await scrape(gw.app)
    const reply = await new ModernRaw(gw.app).request('tools/call', { name: 'demo__echo', arguments: { text: 'modern' } })
    expect(JSON.stringify(reply.body.result)).toContain('modern')
    const after = await scrape(gw.app)
    const modern = 'gateway_request_duration_seconds_count{method="tools/call",era="2026-07-28",outcome="ok"}'
    expect(value(after, modern) - value(before, modern)).toBe(1)
    const call = 'gateway_upstream_call_duration_seconds_count{upstream="demo",tool="echo",outcome="ok"}'
    expect(value(after, call) - value(before, call)).toBe(1)
  })

  it('labels a body refused as no JSON-RPC message invalid, whatever method it names, and holds it to no task limit', async () => {
    const before = await scrape(gw.app)
    // No "jsonrpc": refused with -32600 every time. Were it read as the tasks/get it names, pollBurst 1 would refuse the second.
    const poll = { id: 4, method: 'tasks/get', params: { taskId: `not-a-message-${process.pid}` } }
    for (let i = 0; i < 2; i++) {
      const reply = await postRpc(gw.app, poll)
      expect(reply.status).toBe(400)
      expect(reply.body).toMatchObject({ id: 4, error: { code: -32600, message: expect.stringContaining('"jsonrpc" must be "2.0"') } })
    }
    const after = await scrape(gw.app)
    const invalid = 'gateway_request_duration_seconds_count{method="invalid",era="2025-11-25",outcome="error"}'
    expect(value(after, invalid) - value(before, invalid)).toBe(2)
    const named = 'gateway_request_duration_seconds_count{method="tasks/get",era="legacy",outcome="error"}'
    expect(value(after, named) - value(before, named)).toBe(0)
  })

  it('never turns a tool name a client made up into a label', async () => {
    await expect(client.callTool({ name: 'made_up_tool_x1', arguments: {} })).rejects.toThrow()
    const res = await gw.app.inject({ method: 'GET', url: '/metrics' })
    expect(res.body).not.toContain('made_up_tool_x1')
  })

  it('follows a task that asks for input from creation to completion', async () => {
    const before = await scrape(gw.app)
    const outcome = await runTask(client, 'demo__ask_user', {})
    expect(textOf(outcome.result)).toContain('Hello, Ada!')
    const after = await scrape(gw.app)
    expect(value(after, 'gateway_tasks_created_total{era="2025-11-25"}') - value(before, 'gateway_tasks_created_total{era="2025-11-25"}')).toBe(1)
    expect(value(after, 'gateway_tasks_finished_total{status="completed"}') - value(before, 'gateway_tasks_finished_total{status="completed"}')).toBe(1)
    expect(value(after, 'gateway_task_duration_seconds_count{status="completed"}') - value(before, 'gateway_task_duration_seconds_count{status="completed"}')).toBe(1)
    expect(value(after, 'gateway_task_input_requests_total{method="elicitation/create"}') - value(before, 'gateway_task_input_requests_total{method="elicitation/create"}')).toBe(1)
    expect(value(after, 'gateway_task_input_required_seconds_count') - value(before, 'gateway_task_input_required_seconds_count')).toBe(1)
    expect(value(after, 'gateway_tasks_active{status="working"}')).toBe(0)
    expect(value(after, 'gateway_tasks_active{status="input_required"}')).toBe(0)
  })

  it('counts a refused request by the limit that refused it', async () => {
    const outcome = await runTask(client, 'demo__echo', { text: 'x' })
    const taskId = outcome.taskId as string
    const before = await scrape(gw.app)
    // pollBurst 1 with a 1 s poll interval: of three immediate polls, at least two are refused.
    let refusals = 0
    for (let i = 0; i < 3; i++) {
      await client.experimental.tasks.getTask(taskId).catch((err: unknown) => {
        expect(String(err)).toContain('-32056')
        refusals++
      })
    }
    expect(refusals).toBeGreaterThanOrEqual(2)
    const after = await scrape(gw.app)
    expect(value(after, 'gateway_refusals_total{limit="pollBurst"}') - value(before, 'gateway_refusals_total{limit="pollBurst"}')).toBe(refusals)
    const refused = 'gateway_request_duration_seconds_count{method="tasks/get",era="2025-11-25",outcome="refused"}'
    expect(value(after, refused) - value(before, refused)).toBe(refusals)
  })

  it('shows an upstream outage: down, and reconnecting', async () => {
    const samples = await scrapeUntil(gw.app, 'gateway_upstream_reconnects_total{upstream="broken"}', 3)
    expect(value(samples, 'gateway_upstream_up{upstream="broken"}')).toBe(0)
    expect(value(samples, 'gateway_upstream_state{upstream="broken",state="down"}')).toBe(1)
    expect(value(samples, 'gateway_upstream_state{upstream="broken",state="ready"}')).toBe(0)
  })
})

describe('limits, queues and running tasks', () => {
  let gw: RunningGateway
  let client: Client

  beforeAll(async () => {
    gw = await startGateway({
      metrics: { listener: 'main' },
      tasks: { maxActivePerPrincipal: 1 },
      upstreams: [demoStdio({ maxConcurrentCalls: 1 })],
    })
    client = await connectV1(gw.url)
  })
  afterAll(async () => {
    await client?.close()
    await gw?.close()
  })

  it('shows a running task, the task limit refusing a second one, a call queued behind it, and the cancel', async () => {
    const create = async (): Promise<string> => {
      const created = await client.request({ method: 'tools/call', params: { name: 'demo__slow', arguments: { duration: 600_000, steps: 1 }, task: { ttl: 60_000 } } }, CreateTaskResultSchema)
      return created.task.taskId
    }
    const before = await scrape(gw.app)
    const taskId = await create()
    const running = await scrapeUntil(gw.app, 'gateway_upstream_calls_active{upstream="demo"}', 1)
    expect(value(running, 'gateway_tasks_active{status="working"}')).toBe(1)

    await expect(create()).rejects.toThrow(/maxActivePerPrincipal/)
    const refused = await scrape(gw.app)
    const limit = 'gateway_refusals_total{limit="maxActivePerPrincipal"}'
    expect(value(refused, limit) - value(before, limit)).toBe(1)
    const storeError = 'gateway_store_errors_total{backend="memory",operation="tasks.create",class="task_limit"}'
    expect(value(refused, storeError) - value(before, storeError)).toBe(1)

    // The task holds the upstream's only call slot: a synchronous call waits for it.
    const echo = client.callTool({ name: 'demo__echo', arguments: { text: 'after' } })
    const queued = await scrapeUntil(gw.app, 'gateway_upstream_calls_queued{upstream="demo"}', 1)
    expect(value(queued, 'gateway_upstream_queue_wait_seconds_count{upstream="demo"}')).toBe(value(before, 'gateway_upstream_queue_wait_seconds_count{upstream="demo"}'))
    await client.experimental.tasks.cancelTask(taskId)
    expect(textOf(await echo)).toContain('after')

    const after = await scrape(gw.app)
    expect(value(after, 'gateway_upstream_queue_wait_seconds_count{upstream="demo"}') - value(before, 'gateway_upstream_queue_wait_seconds_count{upstream="demo"}')).toBe(1)
    expect(value(after, 'gateway_upstream_calls_queued{upstream="demo"}')).toBe(0)
    expect(value(after, 'gateway_tasks_finished_total{status="cancelled"}') - value(before, 'gateway_tasks_finished_total{status="cancelled"}')).toBe(1)
    expect(value(after, 'gateway_tasks_active{status="working"}')).toBe(0)
  })
})

describe('where metrics are served', () => {
  it('keeps them off the main listener unless metrics.listener is main, and collects nothing where they are not served', async () => {
    // The default listener is the admin one: without an admin listener nothing is collected; disabled is off.
    for (const metrics of [{}, { enabled: false, listener: 'main' }]) {
      const gw = await startGateway({ metrics, upstreams: [demoStdio()] }, {}, { listen: false })
      try {
        expect((await gw.app.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(404)
        expect(gw.gateway.metrics).toBeUndefined()
      } finally {
        await gw.close()
      }
    }
  })

  it('serves them on the admin listener by default, behind the admin token', async () => {
    const token = 'admin-token-for-metrics'
    const gw = await startGateway({ admin: { port: 0, tokenSha256: createHash('sha256').update(token).digest('hex') }, upstreams: [demoStdio()] }, {}, { listen: false })
    try {
      const admin = gw.gateway.admin!
      expect((await gw.app.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(404)
      expect((await admin.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(401)
      const scraped = await admin.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${token}` } })
      expect(scraped.statusCode).toBe(200)
      expect(scraped.body).toContain('gateway_request_duration_seconds')
    } finally {
      await gw.close()
    }
  })
})

describe('metrics configuration', () => {
  it('refuses a metrics path that another route of the main listener already serves, naming the option', () => {
    for (const path of ['/mcp', '/healthz', '/readyz']) {
      expect(() => parseConfig({ metrics: { listener: 'main', path }, upstreams: [demoStdio()] }, {}))
        .toThrow(/metrics\.path: .*already served/)
    }
    expect(() => parseConfig({ metrics: { listener: 'admin', path: '/mcp' }, upstreams: [demoStdio()] }, {})).not.toThrow()
  })
})
