import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { fixture } from '../helpers/built.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const ELICITATION = { elicitation: { form: {} } }

/**
 * A tool that runs only as a task (`required`, by the operator's toolSettings or by the upstream's own
 * declaration) is never answered directly to a 2026-07-28 client that declares the tasks extension, however
 * fast it ends; input it asks for before the task exists comes back as an `input_required` round first, and
 * the round that ends it becomes the task (SEP-2663's MRTR-then-task composition). The upstreams are plain
 * legacy servers: the conformance fixture (its tools ask and end at once) and a server with native task tools.
 */
describe('tools that run only as tasks, for 2026-07-28 clients', () => {
  let native: StartedUpstream
  let gw: RunningGateway

  beforeAll(async () => {
    native = await startUpstream('test/fixtures/native-task-upstream.ts', ['--port', '0'])
    gw = await startGateway({
      // Far longer than any of these calls takes, even on a loaded machine: each ends within the window.
      tasks: { decide: { after: '60s' }, pollInterval: '50ms' },
      upstreams: [
        {
          name: 'conf',
          transport: 'stdio',
          command: process.execPath,
          args: [fixture('conformance-2026-upstream')],
          toolSettings: {
            failing_job: { taskSupport: 'required' },
            protocol_error_job: { taskSupport: 'required' },
            test_tool_with_task: { taskSupport: 'required' },
          },
        },
        // The gateway's policy stays the default `optional`; the upstream itself declares native_slow `required`.
        { name: 'native', transport: 'streamable-http', url: native.url },
      ],
    })
  })

  afterAll(async () => {
    await gw?.close()
    await native?.close()
  })

  it('turns a required tool that ends at once into a task, with its isError result', async () => {
    const client = ModernRaw.withTasks(gw.url)
    const handle = await client.result('tools/call', { name: 'conf__failing_job', arguments: {} })
    expect(handle).toMatchObject({ resultType: 'task' })
    expect(handle.content).toBeUndefined()
    expect(await client.waitFor(String(handle.taskId), ['completed', 'failed', 'cancelled'])).toMatchObject({
      status: 'completed',
      result: { isError: true, content: [{ text: 'failing_job: simulated tool failure' }] },
    })
  })

  it('turns a required tool that fails at once with a JSON-RPC error into a failed task', async () => {
    const client = ModernRaw.withTasks(gw.url)
    const handle = await client.result('tools/call', { name: 'conf__protocol_error_job', arguments: {} })
    expect(handle).toMatchObject({ resultType: 'task' })
    const failed = await client.waitFor(String(handle.taskId), ['completed', 'failed', 'cancelled'])
    expect(failed).toMatchObject({ status: 'failed', error: { code: -32603, message: expect.stringContaining('simulated internal error') } })
    expect(failed.result).toBeUndefined()
  })

  it('asks for input by an input_required round before the task, and makes the answered round the task', async () => {
    const client = ModernRaw.withTasks(gw.url, ELICITATION)
    const round = await client.result('tools/call', { name: 'conf__test_tool_with_task', arguments: {} })
    expect(round).toMatchObject({ resultType: 'input_required' })
    expect(round.taskId).toBeUndefined()
    const [key, request] = Object.entries(round.inputRequests as Json)[0] as [string, Json]
    expect(request).toMatchObject({ method: 'elicitation/create', params: { message: 'What is your name?' } })

    const handle = await client.result('tools/call', {
      name: 'conf__test_tool_with_task',
      arguments: {},
      inputResponses: { [key]: { action: 'accept', content: { name: 'Alice' } } },
      requestState: round.requestState,
    })
    expect(handle).toMatchObject({ resultType: 'task' })
    expect(handle).not.toHaveProperty('requestState')
    expect(handle).not.toHaveProperty('inputRequests')
    expect(await client.waitFor(String(handle.taskId), ['completed', 'failed', 'cancelled'])).toMatchObject({
      status: 'completed',
      result: { content: [{ text: 'Hello, Alice! (finished after the input round)' }] },
    })
  })

  it('turns a quick call of a tool the upstream declares required into a task, though the gateway lists it optional', async () => {
    const client = ModernRaw.withTasks(gw.url)
    const listed = await client.result('tools/list')
    expect((listed.tools as Json[]).find((tool) => tool.name === 'native__native_slow')).toMatchObject({ execution: { taskSupport: 'optional' } })
    const handle = await client.result('tools/call', { name: 'native__native_slow', arguments: { ms: 10, steps: 1 } })
    expect(handle).toMatchObject({ resultType: 'task' })
    expect(await client.waitFor(String(handle.taskId), ['completed', 'failed', 'cancelled'])).toMatchObject({ status: 'completed' })
  })

  it('still answers an optional tool that ends within the window directly', async () => {
    const client = ModernRaw.withTasks(gw.url)
    const result = await client.result('tools/call', { name: 'conf__slow_compute', arguments: { seconds: 0 } })
    expect(result).toMatchObject({ resultType: 'complete', content: [{ text: 'slow_compute finished after 0s' }] })
  })
})

/**
 * `tasks.decide: { after, input: task }` (the default): a call of an `optional` tool that asks for input within
 * the window becomes a task at once, and what it asked is the task's (tasks/get shows it, tasks/update answers it).
 * The conformance fixture's confirm_delete and multi_input ask at once, as the suite's own server's do.
 */
describe('optional tools that ask for input within the decision window, for 2026-07-28 clients', () => {
  let gw: RunningGateway

  beforeAll(async () => {
    gw = await startGateway({
      // The default decide window; these calls ask for input long before it ends.
      tasks: { pollInterval: '50ms' },
      upstreams: [{ name: 'conf', transport: 'stdio', command: process.execPath, args: [fixture('conformance-2026-upstream')] }],
    })
  })

  afterAll(async () => {
    await gw?.close()
  })

  it('makes the call a task whose tasks/get shows every question it asked, and finishes it with the answers', async () => {
    const client = ModernRaw.withTasks(gw.url, ELICITATION)
    const handle = await client.result('tools/call', { name: 'conf__multi_input', arguments: {} })
    expect(handle).toMatchObject({ resultType: 'task' })
    expect(handle).not.toHaveProperty('inputRequests')
    const taskId = String(handle.taskId)
    let last: Json = {}
    const waiting = await until('both questions shown in tasks/get', async () => {
      last = await client.result('tasks/get', { taskId })
      return Object.keys(last.inputRequests as Json | undefined ?? {}).length === 2 ? last : undefined
    }, { describeLast: () => `: ${JSON.stringify(last)}` })
    expect(waiting.status).toBe('input_required')
    const requests = Object.entries(waiting.inputRequests as Json) as Array<[string, Json]>
    expect(requests.map(([, request]) => (request.params as Json).message).sort()).toEqual(['Proceed?', 'What is your name?'])
    const answers = Object.fromEntries(requests.map(([key]) => [key, { action: 'accept', content: { name: 'Ada', confirm: true } }]))
    expect(await client.result('tasks/update', { taskId, inputResponses: answers })).toEqual({ resultType: 'complete' })
    expect(await client.waitFor(taskId, ['completed', 'failed', 'cancelled'])).toMatchObject({
      status: 'completed',
      result: { content: [{ text: 'multi_input: name=Ada, confirm=true' }] },
    })
  })

  it('still answers a client without the tasks extension by input_required rounds', async () => {
    const client = new ModernRaw(gw.url, ELICITATION)
    const round = await client.result('tools/call', { name: 'conf__confirm_delete', arguments: { filename: 'a.txt' } })
    expect(round).toMatchObject({ resultType: 'input_required' })
    const [key] = Object.keys(round.inputRequests as Json)
    const done = await client.result('tools/call', {
      name: 'conf__confirm_delete',
      arguments: { filename: 'a.txt' },
      inputResponses: { [key!]: { action: 'accept', content: { confirm: true } } },
      requestState: round.requestState,
    })
    expect(done).toMatchObject({ resultType: 'complete', content: [{ text: 'Deleted a.txt' }] })
  })
})

/**
 * A call the decision makes a task, refused as a task because its principal already has as many active tasks as
 * it may (tasks.maxActivePerPrincipal): the client is told why, and the upstream call is cancelled instead of
 * being left waiting for an answer nobody can give.
 */
describe('a call that would become a task beyond the principal\'s task limit', () => {
  let gw: RunningGateway

  beforeAll(async () => {
    gw = await startGateway({
      tasks: { pollInterval: '50ms', maxActivePerPrincipal: 1 },
      upstreams: [{
        name: 'conf',
        transport: 'stdio',
        command: process.execPath,
        args: [fixture('conformance-2026-upstream')],
        maxConcurrentCalls: 2,
      }],
    })
  })

  afterAll(async () => {
    await gw?.close()
  })

  it('is refused with GW_ERR_TASK_LIMIT and its upstream call is cancelled', async () => {
    const client = ModernRaw.withTasks(gw.url, ELICITATION)
    const first = await client.result('tools/call', { name: 'conf__confirm_delete', arguments: { filename: 'a.txt' } })
    expect(first).toMatchObject({ resultType: 'task' })
    await client.waitFor(String(first.taskId), ['input_required'])

    const refused = await client.request('tools/call', { name: 'conf__confirm_delete', arguments: { filename: 'b.txt' } })
    expect(refused.body.error).toMatchObject({ code: -32054, message: expect.stringContaining('maxActivePerPrincipal') })

    // Only the first task's call waits on its client upstream: the refused call is cancelled, not left waiting
    // (parked) for an answer nobody can give.
    let calls: Json = {}
    await until('the refused call ended upstream', async () => {
      const ready = await (await fetch(new URL('/readyz', gw.url))).json() as { upstreams: Array<{ calls: Json }> }
      calls = ready.upstreams[0]!.calls
      return calls.parked === 1 && calls.active === 0 ? true : undefined
    }, { describeLast: () => `: ${JSON.stringify(calls)}` })

    expect(await client.result('tasks/cancel', { taskId: String(first.taskId) })).toBeDefined()
  })
})
