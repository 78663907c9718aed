import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { fixture } from '../helpers/built.ts'
import { startCluster, type Cluster } from '../helpers/cluster.ts'
import { SHARED_KINDS } from '../helpers/shared-store.ts'
import { demoStdioYaml, loggedLine, type GatewayProcess } from '../helpers/process.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { readSse } from '../helpers/sse.ts'

type Json = Record<string, unknown>

const ELICITATION = { elicitation: { form: {} } }
/** What a gateway process logs (debug) when it serves a retry that reached another process. */
/** Every request of a client runs on its home process (the one that started its held call). */
const SERVING = 'serving a request another gateway process forwarded to the client\'s home'
const STOPPED = 'stopped serving a forwarded request'

/**
 * The demo and the 2026 conformance fixture (multi-round MRTR, input before and after long work), over stdio; its
 * task-supporting tools work 1.5 s (longer than the decision window) before they ask or end.
 */
const UPSTREAMS = `upstreams:
${demoStdioYaml()}
  - name: conf
    transport: stdio
    command: ${JSON.stringify(process.execPath)}
    args: [${fixture('conformance-2026-upstream')}, '--work-ms', '1500']
`

/** The only input request of an input_required result, as [key, request]. */
function onlyInput (result: Json): [string, Json] {
  const entries = Object.entries(result.inputRequests as Json)
  expect(entries).toHaveLength(1)
  return entries[0] as [string, Json]
}

/** A subscriptions/listen stream on one process, read message by message. */
async function listen (
  url: string,
  client: ModernRaw,
  id: number,
  notifications: Json,
): Promise<{ next: (match: (m: Json) => boolean) => Promise<Json>, close: () => void }> {
  const controller = new AbortController()
  const res = await fetch(url, {
    method: 'POST',
    signal: controller.signal,
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'subscriptions/listen' },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'subscriptions/listen', params: client.envelope({ notifications }) }),
  })
  const events = readSse(res.body!)
  return {
    // events.next() by hand: leaving a for-await loop would close the stream.
    next: async (match) => {
      for (;;) {
        const { value, done } = await events.next()
        if (done) throw new Error('the listen stream ended')
        if (value.data === '') continue
        const message = JSON.parse(value.data) as Json
        if (match(message)) return message
      }
    },
    close: () => controller.abort(),
  }
}

/**
 * Three gateway processes on one shared store (Redis, then PostgreSQL) behind a round-robin balancer without affinity: a 2026-07-28 call
 * waiting for input is held by the process that started it, and its retries and task requests work from
 * any process.
 */
describe.each(SHARED_KINDS)('2026-07-28 clients of several gateway processes on %s', (kind) => {
  let cluster: Cluster
  let p: GatewayProcess[]

  beforeAll(async () => {
    cluster = await startCluster(`logging: { level: debug }
tasks: { pollInterval: 50ms, decide: { after: 500ms, input: round } }
${UPSTREAMS}`, { store: kind })
    p = cluster.processes
  })

  afterAll(async () => {
    await cluster?.close()
  })

  it('resumes a call held by one process from retries other processes receive, round after round', async () => {
    const first = await new ModernRaw(p[0]!.url, ELICITATION).result('tools/call', { name: 'conf__test_input_required_result_multi_round', arguments: {} })
    expect(first).toMatchObject({ resultType: 'input_required' })
    const [nameKey, nameRequest] = onlyInput(first)
    expect(nameRequest).toMatchObject({ method: 'elicitation/create', params: { message: 'Step 1: What is your name?' } })

    const second = await new ModernRaw(p[1]!.url, ELICITATION).result('tools/call', { name: 'conf__test_input_required_result_multi_round', arguments: {}, inputResponses: { [nameKey]: { action: 'accept', content: { name: 'Ada' } } }, requestState: first.requestState })
    expect(second).toMatchObject({ resultType: 'input_required' })
    const [colorKey, colorRequest] = onlyInput(second)
    expect(colorRequest).toMatchObject({ params: { message: 'Step 2: What is your favorite color?' } })

    const third = await new ModernRaw(p[2]!.url, ELICITATION).result('tools/call', { name: 'conf__test_input_required_result_multi_round', arguments: {}, inputResponses: { [colorKey]: { action: 'accept', content: { color: 'teal' } } }, requestState: second.requestState })
    expect(third).toMatchObject({ resultType: 'complete', content: [{ text: 'Ada likes teal' }] })

    // The call has ended: the owner's answer to a replayed state comes back unchanged through another process.
    const replay = await new ModernRaw(p[1]!.url, ELICITATION).request('tools/call', { name: 'conf__test_input_required_result_multi_round', arguments: {}, inputResponses: {}, requestState: second.requestState })
    expect(replay.status).toBe(200)
    expect(replay.body.error).toMatchObject({ code: -32602, message: expect.stringContaining('names no call that is waiting for you') })
  })

  it('serves MRTR through the balancer and for prompts/get', async () => {
    const client = new ModernRaw(cluster.url, ELICITATION)
    const round = await client.result('tools/call', { name: 'demo__ask_user', arguments: { message: 'Balanced?' } })
    const [key] = onlyInput(round)
    const done = await client.result('tools/call', { name: 'demo__ask_user', arguments: { message: 'Balanced?' }, inputResponses: { [key]: { action: 'accept', content: { name: 'Robin' } } }, requestState: round.requestState })
    expect(done).toMatchObject({ resultType: 'complete', content: [{ text: 'Hello, Robin!' }] })

    const prompt = await new ModernRaw(p[1]!.url, ELICITATION).result('prompts/get', { name: 'conf__test_input_required_result_prompt', arguments: {} })
    const [contextKey] = onlyInput(prompt)
    const rendered = await new ModernRaw(p[2]!.url, ELICITATION).result('prompts/get', { name: 'conf__test_input_required_result_prompt', arguments: {}, inputResponses: { [contextKey]: { action: 'accept', content: { context: 'clusters' } } }, requestState: prompt.requestState })
    expect(rendered).toMatchObject({ resultType: 'complete', messages: [{ content: { text: 'Prompt with context: clusters' } }] })
  })

  it('turns a retry received by another process into a task when the call outlasts the decision window', async () => {
    const round = await ModernRaw.withTasks(p[0]!.url, ELICITATION).result('tools/call', { name: 'conf__test_tool_with_task', arguments: {} })
    expect(round).toMatchObject({ resultType: 'input_required' })
    const [key] = onlyInput(round)
    const handle = await ModernRaw.withTasks(p[1]!.url, ELICITATION).result('tools/call', { name: 'conf__test_tool_with_task', arguments: {}, inputResponses: { [key]: { action: 'accept', content: { name: 'Tess' } } }, requestState: round.requestState })
    expect(handle).toMatchObject({ resultType: 'task', status: 'working' })
    const done = await ModernRaw.withTasks(p[2]!.url).waitFor(String(handle.taskId), ['completed', 'failed', 'cancelled'])
    expect(done).toMatchObject({ status: 'completed', result: { content: [{ text: 'Hello, Tess! (finished after the input round)' }] } })
  })

  it('shows, answers and notifies the input of a task running on another process', async () => {
    const handle = await ModernRaw.withTasks(p[0]!.url, ELICITATION).result('tools/call', { name: 'conf__confirm_delete', arguments: { filename: 'report.txt' } })
    expect(handle).toMatchObject({ resultType: 'task' })
    const taskId = String(handle.taskId)
    const stream = await listen(p[1]!.url, ModernRaw.withTasks(p[1]!.url, ELICITATION), 41, { taskIds: [taskId] })
    try {
      expect((await stream.next((m) => m.method === 'notifications/subscriptions/acknowledged')).params).toMatchObject({ notifications: { taskIds: [taskId] } })
      const asking = await stream.next((m) => m.method === 'notifications/tasks' && (m.params as Json).status === 'input_required')
      const [key, request] = onlyInput(asking.params as Json)
      expect(request).toMatchObject({ method: 'elicitation/create', params: { message: 'Delete report.txt?' } })
      expect(asking.params).toMatchObject({ taskId, _meta: { 'io.modelcontextprotocol/subscriptionId': 41 } })

      const viaC = ModernRaw.withTasks(p[2]!.url, ELICITATION)
      expect(await viaC.result('tasks/get', { taskId })).toMatchObject({ status: 'input_required', inputRequests: { [key]: request } })
      expect(await viaC.result('tasks/update', { taskId, inputResponses: { [key]: { action: 'accept', content: { confirm: true } } } })).toEqual({ resultType: 'complete' })

      const ended = await stream.next((m) => m.method === 'notifications/tasks' && ['completed', 'failed', 'cancelled'].includes(String((m.params as Json).status)))
      expect(ended.params).toMatchObject({ taskId, status: 'completed', result: { content: [{ text: 'Deleted report.txt' }] } })
    } finally {
      stream.close()
    }
  })

  it('tells a listen stream opened on another process where a task already stands', async () => {
    const handle = await ModernRaw.withTasks(p[0]!.url).result('tools/call', { name: 'demo__slow', arguments: { duration: 700, steps: 1 } })
    const taskId = String(handle.taskId)
    await ModernRaw.withTasks(p[2]!.url).waitFor(taskId, ['completed'])
    const stream = await listen(p[1]!.url, ModernRaw.withTasks(p[1]!.url), 42, { taskIds: [taskId] })
    try {
      const now = await stream.next((m) => m.method === 'notifications/tasks')
      expect(now.params).toMatchObject({ taskId, status: 'completed', result: { content: [{ text: 'slow finished: 1 steps in 700 ms' }] } })
    } finally {
      stream.close()
    }
  })

  it('cancels from another process a task whose upstream call runs elsewhere, stopping that call', async () => {
    const handle = await ModernRaw.withTasks(p[0]!.url).result('tools/call', { name: 'demo__slow', arguments: { duration: 30_000, steps: 300 } })
    expect(handle).toMatchObject({ resultType: 'task', status: 'working' })
    const taskId = String(handle.taskId)
    const from = p[0]!.lines.length
    expect(await ModernRaw.withTasks(p[1]!.url).result('tasks/cancel', { taskId })).toEqual({ resultType: 'complete' })
    expect(await ModernRaw.withTasks(p[2]!.url).waitFor(taskId, ['completed', 'failed', 'cancelled'])).toMatchObject({ status: 'cancelled' })
    // The demo upstream runs under process 0 and says on stderr (logged by that process) that its call was cancelled.
    await loggedLine(p[0]!, 'slow: cancelled', { from })
  })

  it('keeps a call held when the client of a forwarded retry goes away, for its next retry', async () => {
    const round = await new ModernRaw(p[0]!.url, ELICITATION).result('tools/call', { name: 'conf__test_tool_with_task', arguments: {} })
    const [key] = onlyInput(round)
    const from = p[0]!.lines.length
    const gone = new AbortController()
    const abandoned = new ModernRaw(p[1]!.url, ELICITATION).request('tools/call', { name: 'conf__test_tool_with_task', arguments: {}, inputResponses: { [key]: { action: 'accept', content: { name: 'Dee' } } }, requestState: round.requestState }, {}, gone.signal)
    // The answer reached the owner and the upstream works on; now the client hangs up.
    await loggedLine(p[0]!, SERVING, { from })
    gone.abort()
    await expect(abandoned).rejects.toThrow()
    await loggedLine(p[0]!, STOPPED, { from })
    const done = await new ModernRaw(p[2]!.url, ELICITATION).result('tools/call', { name: 'conf__test_tool_with_task', arguments: {}, inputResponses: {}, requestState: round.requestState })
    expect(done).toMatchObject({ resultType: 'complete', content: [{ text: 'Hello, Dee! (finished after the input round)' }] })
  })
})

const LEASE_MS = 2000
/**
 * The lease lapses, then the forwarding process's next liveness check of the owner (every second) notices: the
 * retry is answered GW_ERR_PEER_LOST. What else it could get is told apart by its answer, not by a clock: a retry
 * that waited for the call's upstream timeout (minutes) would outlast the test's timeout, and one that ended any
 * other way would carry another error.
 */
const PEER_LOST = { code: -32603, data: { code: 'GW_ERR_PEER_LOST' } }

/** A retry for a call whose process died gets GW_ERR_PEER_LOST, never a hang. */
describe.each(SHARED_KINDS)('2026-07-28 retries on %s when the process holding the call is lost', (kind) => {
  let cluster: Cluster
  let p: GatewayProcess[]

  beforeAll(async () => {
    cluster = await startCluster(`logging: { level: debug }
tasks: { pollInterval: 50ms, ownerLease: ${LEASE_MS}ms }
${UPSTREAMS}`, { store: kind })
    p = cluster.processes
  })

  afterAll(async () => {
    await cluster?.close()
  })

  it('answers GW_ERR_PEER_LOST to a retry sent after the owner was killed', async () => {
    const round = await new ModernRaw(p[0]!.url, ELICITATION).result('tools/call', { name: 'demo__ask_user', arguments: {} })
    const [key] = onlyInput(round)
    await cluster.kill(0)
    const retry = await new ModernRaw(p[1]!.url, ELICITATION).request('tools/call', { name: 'demo__ask_user', arguments: {}, inputResponses: { [key]: { action: 'accept', content: { name: 'Late' } } }, requestState: round.requestState })
    expect(retry.status).toBe(200)
    expect(retry.body.error).toMatchObject({ ...PEER_LOST, message: expect.stringContaining('the gateway process holding this tools/call is gone') })
  })

  it('answers GW_ERR_PEER_LOST to a retry the owner was serving when it died', async () => {
    const round = await new ModernRaw(p[1]!.url, ELICITATION).result('tools/call', { name: 'conf__test_tool_with_task', arguments: {} })
    const [key] = onlyInput(round)
    const from = p[1]!.lines.length
    const retry = new ModernRaw(p[2]!.url, ELICITATION).request('tools/call', { name: 'conf__test_tool_with_task', arguments: {}, inputResponses: { [key]: { action: 'accept', content: { name: 'Gone' } } }, requestState: round.requestState })
    await loggedLine(p[1]!, SERVING, { from })
    await cluster.kill(1)
    const reply = await retry
    expect(reply.body.error).toMatchObject({ ...PEER_LOST, message: expect.stringContaining('is gone') })
  })
})
