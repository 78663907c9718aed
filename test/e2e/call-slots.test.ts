import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { CreateTaskResultSchema, ElicitRequestSchema, type ElicitResult } from '@modelcontextprotocol/sdk/types.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { textOf } from '../helpers/clients.ts'
import { demoStdio, gatewayForSuite } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const ALICE = { authorization: 'Bearer alice-token-0123456789' }
const BOB = { authorization: 'Bearer bob-token-9876543210' }
const FORM = { elicitation: { form: {} } }
/** A guard against a hang, so that a call that never gets a slot fails the test with a clear message; not a timing claim. */
const ANSWER_GUARD_MS = 30_000

interface UpstreamCalls { active: number, waiting: number, parked?: number }

async function demoCalls (base: string): Promise<UpstreamCalls> {
  const ready = await (await fetch(`${base}/readyz`)).json() as { upstreams: Array<{ name: string, calls: UpstreamCalls }> }
  return ready.upstreams.find((upstream) => upstream.name === 'demo')!.calls
}

/** A 2025-era SDK v1 client of alice whose user is asked for a name and answers only when the test says so. */
async function aliceLegacy (url: string): Promise<{ client: Client, asked: Promise<void>, answer (result: ElicitResult): void }> {
  const client = new Client({ name: 'alice-legacy', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } })
  let answer!: (result: ElicitResult) => void
  const answered = new Promise<ElicitResult>((resolve) => { answer = resolve })
  let wasAsked!: () => void
  const asked = new Promise<void>((resolve) => { wasAsked = resolve })
  client.setRequestHandler(ElicitRequestSchema, async () => {
    wasAsked()
    return await answered
  })
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: ALICE } }))
  return { client, asked, answer }
}

/**
 * A call waiting on its client holds no call slot: one principal whose calls ask and are never answered does not
 * keep everyone else from the upstream, whatever kind of call asks.
 */
describe('calls waiting on their client and the call slots', () => {
  const gw = gatewayForSuite({
    auth: { tokens: [{ principal: 'alice', sha256: sha256Hex('alice-token-0123456789') }, { principal: 'bob', sha256: sha256Hex('bob-token-9876543210') }] },
    tasks: { decide: 'always' },
    upstreams: [demoStdio({ maxConcurrentCalls: 4 })],
  })
  let legacy: Awaited<ReturnType<typeof aliceLegacy>>

  beforeAll(async () => {
    legacy = await aliceLegacy(gw.url)
  })

  afterAll(async () => {
    await legacy?.client.close()
  })

  it('serves bob while alice\'s unanswered questions (a sync call, tasks, 2026-07-28 rounds) outnumber the slots, and resumes hers once answered', async () => {
    const held = new ModernRaw(gw.url, FORM, ALICE)
    const tasks = ModernRaw.withTasks(gw.url, FORM, ALICE)

    // 1. A 2025-era synchronous call whose elicitation is relayed to alice's client, which does not answer yet.
    const syncCall = legacy.client.callTool({ name: 'demo__ask_user', arguments: { message: 'Legacy sync name?' } })
    syncCall.catch(() => {})
    await legacy.asked
    // 2. A 2025-11-25 task left input_required.
    const legacyTask = await legacy.client.request({ method: 'tools/call', params: { name: 'demo__ask_user', arguments: { message: 'Legacy task name?' }, task: { ttl: 120_000 } } }, CreateTaskResultSchema)
    await until('the 2025-11-25 task waiting for input', async () =>
      (await legacy.client.experimental.tasks.getTask(legacyTask.task.taskId)).status === 'input_required' ? true : undefined)
    // 3. A 2026-07-28 synchronous call answered with input_required, never retried (yet).
    const rounds = [await held.result('tools/call', { name: 'demo__ask_user', arguments: { message: 'Round one?' } })]
    // 4. A 2026-07-28 task left input_required.
    const modernTask = String((await tasks.result('tools/call', { name: 'demo__ask_user', arguments: { message: 'Modern task name?' } })).taskId)
    const waiting = await tasks.waitFor(modernTask, ['input_required'])

    // Four calls wait on alice, as many as the upstream has slots: bob's call runs all the same.
    const bob = new ModernRaw(gw.url, {}, BOB)
    const echo = await bob.request('tools/call', { name: 'demo__echo', arguments: { text: 'bob gets through' } }, {}, AbortSignal.timeout(ANSWER_GUARD_MS))
    expect(echo.body.result).toMatchObject({ resultType: 'complete', content: [{ text: 'bob gets through' }] })
    // And so does a fifth question of alice's; none of the five holds a slot.
    rounds.push(await held.result('tools/call', { name: 'demo__ask_user', arguments: { message: 'Round two?' } }))
    for (const round of rounds) expect(round.resultType).toBe('input_required')
    expect(await demoCalls(gw.base)).toEqual({ active: 0, waiting: 0, parked: 5 })

    // Each of alice's calls takes a slot again once answered, and finishes.
    legacy.answer({ action: 'accept', content: { name: 'Ada' } })
    expect(textOf(await syncCall)).toBe('Hello, Ada!')
    for (const [index, round] of rounds.entries()) {
      const [key] = Object.keys(round.inputRequests as Json)
      const done = await held.result('tools/call', {
        name: 'demo__ask_user',
        arguments: { message: index === 0 ? 'Round one?' : 'Round two?' },
        requestState: round.requestState,
        inputResponses: { [key!]: { action: 'accept', content: { name: `Round ${index + 1}` } } },
      })
      expect(done).toMatchObject({ resultType: 'complete', content: [{ text: `Hello, Round ${index + 1}!` }] })
    }
    const [modernKey] = Object.keys(waiting.inputRequests as Json)
    await tasks.result('tasks/update', { taskId: modernTask, inputResponses: { [modernKey!]: { action: 'accept', content: { name: 'Modern' } } } })
    expect(await tasks.waitFor(modernTask, ['completed'])).toMatchObject({ result: { content: [{ text: 'Hello, Modern!' }] } })
    // The 2025-11-25 task's question reached the same client (on its session's stream) and got the same answer.
    await until('the 2025-11-25 task completed', async () =>
      (await legacy.client.experimental.tasks.getTask(legacyTask.task.taskId)).status === 'completed' ? true : undefined)
    await until('every call of the demo ended', async () => {
      const calls = await demoCalls(gw.base)
      return calls.active + calls.waiting + (calls.parked ?? 0) === 0 ? true : undefined
    })
  }, 120_000)
})

/** A call a client waits on gives up waiting for a slot after slotWaitTimeout; a task waits on, and says why. */
describe('a call that cannot get a call slot', () => {
  const gw = gatewayForSuite({
    tasks: { decide: 'always' },
    upstreams: [demoStdio({ maxConcurrentCalls: 1, slotWaitTimeout: '1s' })],
  })

  it('fails a synchronous call with GW_ERR_UPSTREAM_SLOT_TIMEOUT naming the option, while a task keeps its place and its queued statusMessage', async () => {
    const tasks = ModernRaw.withTasks(gw.url)
    const running = String((await tasks.result('tools/call', { name: 'demo__slow', arguments: { duration: 600_000, steps: 1 } })).taskId)
    await until('the slow task holding the only slot', async () => (await demoCalls(gw.base)).active === 1 ? true : undefined)
    const queued = String((await tasks.result('tools/call', { name: 'demo__echo', arguments: { text: 'a queued task' } })).taskId)
    await until('the second task queued', async () => {
      const task = await tasks.result('tasks/get', { taskId: queued })
      return String(task.statusMessage ?? '').startsWith('queued: ') ? true : undefined
    })

    const sync = await new ModernRaw(gw.url).request('tools/call', { name: 'demo__echo', arguments: { text: 'too late' } }, {}, AbortSignal.timeout(ANSWER_GUARD_MS))
    expect(sync.body.error).toMatchObject({
      code: -32053,
      message: "upstream 'demo' had no free call slot within 1s (upstreams[].slotWaitTimeout): its 1 call slots (maxConcurrentCalls) were all taken; try again later",
    })
    // The task queued before the synchronous call waited longer than its bound, and still waits.
    expect(await tasks.result('tasks/get', { taskId: queued })).toMatchObject({
      status: 'working',
      statusMessage: "queued: upstream 'demo' already runs its maxConcurrentCalls calls",
    })

    await tasks.result('tasks/cancel', { taskId: running })
    expect(await tasks.waitFor(queued, ['completed'])).toMatchObject({ result: { content: [{ text: 'a queued task' }] } })
  }, 60_000)

  it('lets an answered task wait for its slot back, working and queued, ahead of a call that came after it', async () => {
    const tasks = ModernRaw.withTasks(gw.url, FORM)
    const asking = String((await tasks.result('tools/call', { name: 'demo__ask_user', arguments: { message: 'Name?' } })).taskId)
    const [key] = Object.keys((await tasks.waitFor(asking, ['input_required'])).inputRequests as Json)
    // The question holds no slot: a long task takes the only one.
    const running = String((await tasks.result('tools/call', { name: 'demo__slow', arguments: { duration: 600_000, steps: 1 } })).taskId)
    await until('the slow task holding the only slot', async () => (await demoCalls(gw.base)).active === 1 ? true : undefined)
    await tasks.result('tasks/update', { taskId: asking, inputResponses: { [key!]: { action: 'accept', content: { name: 'Patient' } } } })
    const queuedAgain = await until('the answered task waiting for its slot back', async () => {
      const task = await tasks.result('tasks/get', { taskId: asking })
      return String(task.statusMessage ?? '').startsWith('queued: ') ? task : undefined
    })
    expect(queuedAgain).toMatchObject({ status: 'working', statusMessage: "queued: upstream 'demo' already runs its maxConcurrentCalls calls" })
    // A long task queued after the answer: were it served first, the answered task would wait ten minutes.
    const later = String((await tasks.result('tools/call', { name: 'demo__slow', arguments: { duration: 600_000, steps: 1 } })).taskId)
    await until('the later task queued', async () => (await demoCalls(gw.base)).waiting === 2 ? true : undefined)

    await tasks.result('tasks/cancel', { taskId: running })
    expect(await tasks.waitFor(asking, ['completed'])).toMatchObject({ result: { content: [{ text: 'Hello, Patient!' }] } })
    await tasks.result('tasks/cancel', { taskId: later })
  }, 60_000)

  it('fails a 2026-07-28 call answered while every slot is taken once slotWaitTimeout passes, with the same error', async () => {
    const held = new ModernRaw(gw.url, FORM)
    const round = await held.result('tools/call', { name: 'demo__ask_user', arguments: { message: 'Name?' } })
    const [key] = Object.keys(round.inputRequests as Json)
    const tasks = ModernRaw.withTasks(gw.url)
    const running = String((await tasks.result('tools/call', { name: 'demo__slow', arguments: { duration: 600_000, steps: 1 } })).taskId)
    await until('the slow task holding the only slot', async () => (await demoCalls(gw.base)).active === 1 ? true : undefined)

    const retry = await held.request('tools/call', {
      name: 'demo__ask_user',
      arguments: { message: 'Name?' },
      requestState: round.requestState,
      inputResponses: { [key!]: { action: 'accept', content: { name: 'Late' } } },
    }, {}, AbortSignal.timeout(ANSWER_GUARD_MS))
    expect(retry.body.error).toMatchObject({ code: -32053, message: expect.stringContaining('(upstreams[].slotWaitTimeout)') })
    await tasks.result('tasks/cancel', { taskId: running })
  }, 60_000)
})

/** One principal's calls that run long, without asking anything, take at most its share of the slots. */
describe('a share of the call slots per principal (maxConcurrentCallsPerPrincipal)', () => {
  const gw = gatewayForSuite({
    auth: { tokens: [{ principal: 'alice', sha256: sha256Hex('alice-token-0123456789') }, { principal: 'bob', sha256: sha256Hex('bob-token-9876543210') }] },
    tasks: { decide: 'always' },
    upstreams: [demoStdio({ maxConcurrentCalls: 4, maxConcurrentCallsPerPrincipal: 2 })],
  })

  it('runs two of alice\'s four long tasks, tells the others why they wait, and serves bob meanwhile', async () => {
    const alice = ModernRaw.withTasks(gw.url, {}, ALICE)
    const ids: string[] = []
    for (let i = 0; i < 4; i++) ids.push(String((await alice.result('tools/call', { name: 'demo__slow', arguments: { duration: 600_000, steps: 1 } })).taskId))
    const share = "queued: this principal already runs its maxConcurrentCallsPerPrincipal calls on upstream 'demo'"
    await until('two of alice\'s tasks queued behind her share', async () => {
      const tasks = await Promise.all(ids.map(async (taskId) => await alice.result('tasks/get', { taskId })))
      return tasks.filter((task) => task.statusMessage === share).length === 2 ? true : undefined
    })
    expect(await demoCalls(gw.base)).toMatchObject({ active: 2, waiting: 2 })

    const bob = new ModernRaw(gw.url, {}, BOB)
    const echo = await bob.request('tools/call', { name: 'demo__echo', arguments: { text: 'bob has his own share' } }, {}, AbortSignal.timeout(ANSWER_GUARD_MS))
    expect(echo.body.result).toMatchObject({ resultType: 'complete', content: [{ text: 'bob has his own share' }] })

    for (const taskId of ids) await alice.result('tasks/cancel', { taskId })
    await until('every call of the demo ended', async () => {
      const calls = await demoCalls(gw.base)
      return calls.active + calls.waiting === 0 ? true : undefined
    })
  }, 60_000)
})
