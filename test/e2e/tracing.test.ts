import { randomBytes, randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { fixture } from '../helpers/built.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { startCluster } from '../helpers/cluster.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { demoStdioYaml } from '../helpers/process.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { OtlpReceiver, type RecordedSpan } from '../helpers/otlp-receiver.ts'
import { next, RawSession } from '../helpers/raw-session.ts'
import { purge, REDIS_URL } from '../helpers/redis.ts'
import { runTask } from '../helpers/tasks.ts'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'

type Json = Record<string, unknown>

const PROBE_SCRIPT = 'test/fixtures/trace-probe-upstream.ts'
const probeStdio = { name: 'probe', transport: 'stdio', command: process.execPath, args: [fixture('trace-probe-upstream')] }

/** What the probe upstream reports: the `_meta.traceparent` and `traceparent` header its call arrived with. */
function probed (result: unknown): { meta: string | null, header: string | null, name?: string } {
  return JSON.parse(textOf(result)) as { meta: string | null, header: string | null, name?: string }
}

function traceparent (span: RecordedSpan): string {
  return `00-${span.traceId}-${span.spanId}-01`
}

function find (spans: RecordedSpan[], test: (span: RecordedSpan) => boolean): RecordedSpan | undefined {
  return spans.find(test)
}

/** Waits for the span of the upstream request that `meta` names and for its parent span. */
async function upstreamAndParent (
  receiver: OtlpReceiver,
  meta: string | null,
): Promise<{ spans: RecordedSpan[], upstream: RecordedSpan, parent: RecordedSpan }> {
  const spans = await receiver.waitFor(`the span ${String(meta)} and its parent`, (all) => {
    const upstream = find(all, (s) => traceparent(s) === meta)
    return upstream !== undefined && find(all, (s) => s.spanId === upstream.parentSpanId) !== undefined
  })
  const upstream = one(spans, 'the upstream request', (s) => traceparent(s) === meta)
  return { spans, upstream, parent: one(spans, 'its parent', (s) => s.spanId === upstream.parentSpanId) }
}

function one (spans: RecordedSpan[], what: string, test: (span: RecordedSpan) => boolean): RecordedSpan {
  const found = spans.filter(test)
  if (found.length !== 1) throw new Error(`${found.length} spans for ${what}`)
  return found[0]!
}

/** The tracing section of a gateway exporting to `receiver` with a short batch delay. */
function tracingTo (receiver: OtlpReceiver): Json {
  // eslint-disable-next-line no-template-curly-in-string
  return { enabled: true, endpoint: receiver.url, batchDelay: '20ms', headers: { 'x-collector-key': '${COLLECTOR_KEY}' } }
}

describe('OpenTelemetry traces', () => {
  const receiver = new OtlpReceiver()
  let http: StartedUpstream
  let sse: StartedUpstream
  let gw: RunningGateway
  let client: Client

  beforeAll(async () => {
    await receiver.listen()
    ;[http, sse] = await Promise.all([startUpstream(PROBE_SCRIPT, ['--http', '0']), startUpstream(PROBE_SCRIPT, ['--sse', '0'], { path: '/sse' })])
    gw = await startGateway({
      tracing: tracingTo(receiver),
      upstreams: [probeStdio, { name: 'web', transport: 'streamable-http', url: http.url }, { name: 'old', transport: 'sse', url: sse.url }],
    }, { COLLECTOR_KEY: 'k-123' })
    client = await connectV1(gw.url, { onElicit: () => ({ action: 'accept', content: { name: 'Ada' } }) })
  })
  afterAll(async () => {
    await client?.close()
    await gw?.close()
    await http?.close()
    await sse?.close()
    await receiver.close()
  })

  it('gives a sync tools/call a server span whose child client span reaches a stdio upstream in _meta', async () => {
    const seen = probed(await client.callTool({ name: 'probe__probe', arguments: {} }))
    expect(seen.meta).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/)
    const { upstream, parent: server } = await upstreamAndParent(receiver, seen.meta)
    expect(upstream).toMatchObject({ kind: 'client', name: 'tools/call probe', traceId: server.traceId })
    expect(upstream.attributes).toMatchObject({ 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'probe', 'gateway.upstream': 'probe', 'gateway.upstream.transport': 'stdio' })
    expect(server).toMatchObject({ kind: 'server', name: 'tools/call probe__probe', parentSpanId: '', service: 'mcp-task-gateway', instance: gw.gateway.processId })
    expect(server.attributes).toMatchObject({ 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'probe__probe', 'gateway.upstream': 'probe', 'gateway.era': '2025-11-25', 'gateway.outcome': 'ok', 'http.response.status_code': 200 })
    // Exports carry the configured header, its secret taken from the environment.
    expect(receiver.headers.at(-1)?.['x-collector-key']).toBe('k-123')
    expect(receiver.requests.get('application/json')).toBeGreaterThan(0)
  })

  it('passes the client span to HTTP upstreams in the traceparent header and in _meta', async () => {
    for (const [upstream, transport] of [['web', 'streamable-http'], ['old', 'sse']] as const) {
      const seen = probed(await client.callTool({ name: `${upstream}__probe`, arguments: {} }))
      expect(seen.header).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/)
      expect(seen.header).toBe(seen.meta)
      const spans = await upstreamAndParent(receiver, seen.header)
      expect(spans.upstream.attributes).toMatchObject({ 'gateway.upstream': upstream, 'gateway.upstream.transport': transport, 'server.address': '127.0.0.1' })
      expect(spans.parent).toMatchObject({ kind: 'server', name: `tools/call ${upstream}__probe` })
    }
  })

  it('continues the trace a client names in its traceparent header, or in params._meta', async () => {
    const modern = new ModernRaw(gw.url)
    for (const via of ['header', 'meta'] as const) {
      const traceId = randomBytes(16).toString('hex')
      const parent = randomBytes(8).toString('hex')
      const context = `00-${traceId}-${parent}-01`
      const reply = via === 'header'
        ? await modern.request('tools/call', { name: 'web__probe', arguments: {} }, { traceparent: context })
        : await modern.request('tools/call', { name: 'web__probe', arguments: {}, _meta: { traceparent: context } })
      const seen = probed(reply.body.result)
      // The upstream continues the gateway's span of the client's trace, not the client's own span.
      expect(seen.meta).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`))
      expect(seen.meta).not.toBe(context)
      const { parent: server } = await upstreamAndParent(receiver, seen.meta)
      expect(server).toMatchObject({ kind: 'server', traceId, parentSpanId: parent })
      expect(server.attributes).toMatchObject({ 'gateway.era': '2026-07-28' })
    }
  })

  it('marks a failed request with its JSON-RPC code and the gateway\'s error code', async () => {
    const traceId = randomBytes(16).toString('hex')
    const reply = await new ModernRaw(gw.url).request('tools/call', { name: 'probe__missing', arguments: {} }, { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` })
    const code = (reply.body.error as Json | undefined)?.code
    expect(code).toEqual(expect.any(Number))
    const spans = await receiver.waitFor('the failed request', (all) => find(all, (s) => s.traceId === traceId) !== undefined)
    const server = one(spans, 'the failed request', (s) => s.traceId === traceId)
    expect(server).toMatchObject({ kind: 'server', name: 'tools/call', statusCode: 2 })
    expect(server.attributes).toMatchObject({ 'rpc.response.status_code': String(code), 'gateway.outcome': 'error' })
    expect(server.attributes['error.type']).toMatch(/^GW_ERR_/)
  })

  it('records a task in one trace: its creation, its run, the upstream request, the input round and the polls', async () => {
    const outcome = await runTask(client, 'probe__ask', {})
    expect(outcome.error).toBeUndefined()
    const seen = probed(outcome.result)
    expect(seen.name).toBe('Ada')
    const taskId = outcome.taskId!
    const spans = await receiver.waitFor('the task\'s spans', (all) =>
      find(all, (s) => s.name === 'task run' && s.attributes['gateway.task.id'] === taskId) !== undefined &&
      find(all, (s) => s.name === 'task input elicitation/create' && s.attributes['gateway.outcome'] === 'answered') !== undefined &&
      find(all, (s) => s.name === 'tasks/result' && s.attributes['gateway.task.id'] === taskId) !== undefined)
    const created = one(spans, 'the creation', (s) => s.kind === 'server' && s.name === 'tools/call probe__ask' && s.attributes['gateway.task.id'] === taskId)
    const run = one(spans, 'the run', (s) => s.name === 'task run' && s.attributes['gateway.task.id'] === taskId)
    expect(run).toMatchObject({ kind: 'internal', traceId: created.traceId, parentSpanId: created.spanId })
    expect(run.attributes).toMatchObject({ 'gateway.task.status': 'completed', 'gateway.upstream': 'probe', 'gen_ai.tool.name': 'ask' })
    const upstream = one(spans, 'the upstream request', (s) => traceparent(s) === seen.meta)
    expect(upstream).toMatchObject({ kind: 'client', parentSpanId: run.spanId })
    const round = one(spans, 'the input round', (s) => s.name === 'task input elicitation/create' && s.traceId === created.traceId)
    expect(round).toMatchObject({ parentSpanId: run.spanId })
    // The client sent no trace context with its polls: they join the task's trace under its creation.
    const polls = spans.filter((s) => s.kind === 'server' && s.name.startsWith('tasks/') && s.attributes['gateway.task.id'] === taskId)
    expect(polls.length).toBeGreaterThan(0)
    for (const poll of polls) expect(poll).toMatchObject({ traceId: created.traceId, parentSpanId: created.spanId })
    // Nothing secret rides along: no session ids, no tool arguments, no principals.
    for (const span of spans) {
      expect(Object.keys(span.attributes).filter((key) => /session|argument|principal|authorization/i.test(key))).toEqual([])
    }
  })

  it('gives a task made from a running 2026-07-28 call a run span in the trace of the request that started it', async () => {
    const traceId = randomBytes(16).toString('hex')
    const modern = ModernRaw.withTasks(gw.url)
    // Longer than the decision window (tasks.decide.after, 500ms): the running call becomes a task.
    const reply = await modern.request('tools/call', { name: 'probe__wait', arguments: { ms: 1500 } }, { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` })
    expect(reply.body.result).toMatchObject({ resultType: 'task' })
    const taskId = String((reply.body.result as Json).taskId)
    const task = await modern.waitFor(taskId, ['completed'])
    const seen = probed(task.result)
    const spans = await receiver.waitFor('the run', (all) => find(all, (s) => s.name === 'task run' && s.attributes['gateway.task.id'] === taskId) !== undefined)
    const created = one(spans, 'the request', (s) => s.kind === 'server' && s.traceId === traceId && s.name === 'tools/call probe__wait')
    expect(created.attributes['gateway.task.id']).toBe(taskId)
    expect(one(spans, 'the run', (s) => s.name === 'task run' && s.attributes['gateway.task.id'] === taskId)).toMatchObject({ traceId, parentSpanId: created.spanId, attributes: expect.objectContaining({ 'gateway.task.status': 'completed' }) })
    expect(one(spans, 'the upstream request', (s) => traceparent(s) === seen.meta)).toMatchObject({ kind: 'client', parentSpanId: created.spanId })
  })

  it('links a request about a task to the task\'s trace when the client names a trace of its own', async () => {
    const outcome = await runTask(client, 'probe__probe', {})
    const taskId = outcome.taskId!
    const traceId = randomBytes(16).toString('hex')
    const poller = new RawSession(gw.url, { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` })
    poller.sessionId = (client.transport as { sessionId?: string } | undefined)?.sessionId ?? ''
    expect((await poller.request('tasks/get', { taskId })).result).toMatchObject({ status: 'completed' })
    const spans = await receiver.waitFor('the linked poll', (all) => find(all, (s) => s.traceId === traceId && s.name === 'tasks/get') !== undefined)
    const created = one(spans, 'the creation', (s) => s.kind === 'server' && s.attributes['gateway.task.id'] === taskId && s.name === 'tools/call probe__probe')
    const poll = one(spans, 'the poll', (s) => s.traceId === traceId && s.name === 'tasks/get')
    expect(poll.links).toEqual([{ traceId: created.traceId, spanId: created.spanId }])
  })
})

describe('OpenTelemetry traces of a task across two gateway processes on Redis', () => {
  const receiver = new OtlpReceiver()
  const prefix = `mcpgw-tracing:${randomUUID()}:`
  let a: RunningGateway
  let b: RunningGateway

  beforeAll(async () => {
    await receiver.listen()
    const config = {
      store: { kind: 'redis', url: REDIS_URL, prefix },
      server: { stateSecret: randomBytes(32).toString('hex') },
      tracing: tracingTo(receiver),
      upstreams: [probeStdio],
    }
    ;[a, b] = await Promise.all([startGateway(config, { COLLECTOR_KEY: 'k' }), startGateway(config, { COLLECTOR_KEY: 'k' })])
  })
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()])
    await receiver.close()
    await purge(prefix)
  })

  it('shows the spans of both processes in the task\'s trace: created through one, run on the other, answered and polled through the first', async () => {
    const session = await RawSession.open(a.url, { elicitation: { form: {} } })
    // The session's first upstream use makes A its home: what B receives for it runs on A.
    expect((await session.request('tools/list')).result).toBeDefined()
    const viaB = session.on(b.url)
    const created = await viaB.request('tools/call', { name: 'probe__ask', arguments: {}, task: {} })
    const taskId = ((created.result as Json).task as Json).taskId as string
    const waiting = new AbortController()
    const stream = await viaB.stream({ taskResult: taskId }, waiting.signal)
    const ask = await next(stream, (m) => m.method === 'elicitation/create')
    expect((await viaB.post({ jsonrpc: '2.0', id: ask.id, result: { action: 'accept', content: { name: 'Bea' } } })).status).toBe(202)
    expect(probed((await next(stream, (m) => 'result' in m)).result).name).toBe('Bea')
    waiting.abort()

    const spans = await receiver.waitFor('the task\'s spans', (all) =>
      find(all, (s) => s.name === 'task run' && s.attributes['gateway.task.status'] === 'completed') !== undefined &&
      find(all, (s) => s.name === 'tasks/result' && s.attributes['gateway.task.id'] === taskId) !== undefined &&
      find(all, (s) => s.attributes['gateway.forwarded'] === true && s.attributes['gateway.task.id'] === taskId) !== undefined)
    // B received the request and forwarded it to the client's home, A, which created the task.
    const forwarded = one(spans, 'the creation on A', (s) => s.attributes['gateway.task.id'] === taskId && s.instance === a.gateway.processId && s.attributes['gateway.forwarded'] === true)
    expect(forwarded).toMatchObject({ kind: 'server', name: 'tools/call probe__ask' })
    const onB = one(spans, 'the creating request on B', (s) => s.spanId === forwarded.parentSpanId)
    expect(onB).toMatchObject({ kind: 'server', instance: b.gateway.processId, traceId: forwarded.traceId, parentSpanId: '' })
    expect(onB.attributes).toMatchObject({ 'mcp.method.name': 'tools/call', 'gateway.era': '2025-11-25' })
    const run = one(spans, 'the run on A', (s) => s.name === 'task run' && s.attributes['gateway.task.id'] === taskId)
    expect(run).toMatchObject({ instance: a.gateway.processId, traceId: onB.traceId, parentSpanId: forwarded.spanId })
    expect(one(spans, 'the input round on A', (s) => s.name === 'task input elicitation/create' && s.traceId === onB.traceId)).toMatchObject({ instance: a.gateway.processId, parentSpanId: run.spanId })
    const result = one(spans, 'the result request on B', (s) => s.name === 'tasks/result' && s.attributes['gateway.task.id'] === taskId)
    expect(result).toMatchObject({ instance: b.gateway.processId, traceId: onB.traceId, parentSpanId: forwarded.spanId })
  })
})

describe('OpenTelemetry traces of a task taken over after its process was killed', () => {
  it('records the run on the process that takes the task over in the trace the lost process began', async () => {
    const receiver = new OtlpReceiver()
    await receiver.listen()
    const cluster = await startCluster(`
tasks: { ownerLease: 1s }
tracing: { enabled: true, endpoint: ${JSON.stringify(receiver.url)}, batchDelay: 20ms }
upstreams:
${demoStdioYaml()}
    toolSettings: { slow: { idempotent: true } }
`, { count: 2 })
    try {
      const session = await RawSession.open(cluster.processes[0]!.url)
      const created = await session.request('tools/call', { name: 'demo__slow', arguments: { duration: 3000, steps: 1 }, task: {} })
      const taskId = ((created.result as Json).task as Json).taskId as string
      // The creation has reached the collector before its process dies; the run there never ends.
      const isCreation = (s: RecordedSpan): boolean => s.kind === 'server' && s.attributes['gateway.task.id'] === taskId
      const creation = one(await receiver.waitFor('the creation', (all) => find(all, isCreation) !== undefined), 'the creation', isCreation)
      await cluster.kill(0)
      const spans = await receiver.waitFor('the run on the survivor', (all) => find(all, (s) => s.name === 'task run' && s.attributes['gateway.task.id'] === taskId && s.attributes['gateway.task.status'] === 'completed') !== undefined, 30_000)
      const run = one(spans, 'the run', (s) => s.name === 'task run' && s.attributes['gateway.task.id'] === taskId)
      expect(run).toMatchObject({ traceId: creation.traceId, parentSpanId: creation.spanId })
      expect(run.instance).not.toBe(creation.instance)
      expect(one(spans, 'the upstream request of the rerun', (s) => s.kind === 'client' && s.parentSpanId === run.spanId)).toMatchObject({ name: 'tools/call slow', instance: run.instance })
    } finally {
      await cluster.close()
      await receiver.close()
    }
  })
})

describe('tracing off', () => {
  it('makes no spans, exports nothing and passes no trace context upstream', async () => {
    const receiver = new OtlpReceiver()
    await receiver.listen()
    const gw = await startGateway({ tracing: { enabled: false, endpoint: receiver.url, batchDelay: '20ms' }, tasks: { pollInterval: '50ms' }, upstreams: [probeStdio] }) // the SDK client polls its task this often, not every second
    const client = await connectV1(gw.url, { onElicit: () => ({ action: 'accept', content: { name: 'Cy' } }) })
    try {
      expect(probed(await client.callTool({ name: 'probe__probe', arguments: {} })).meta).toBeNull()
      const outcome = await runTask(client, 'probe__ask', {})
      expect(probed(outcome.result)).toMatchObject({ meta: null, name: 'Cy' })
      expect(await gw.gateway.store.tasks.get(outcome.taskId!, Date.now())).toMatchObject({ traceContext: null })
    } finally {
      await client.close()
      // Closing a gateway flushes its spans: had it made any, the receiver would hold them now.
      await gw.close()
    }
    expect(receiver.requests.size).toBe(0)
    await receiver.close()
  })
})
