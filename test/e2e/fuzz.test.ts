import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { Agent, request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { generateCase, type FuzzCase, type FuzzTargets } from '../helpers/fuzz-inputs.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { demoStdioYaml, startGatewayProcess, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { legacyTask, RawSession } from '../helpers/raw-session.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const SEED = Number(process.env.FUZZ_SEED ?? 20_261_122)
const CASES = 10_000
const WARM_UP = 1_000
const IN_FLIGHT = 16
const MAX_BODY_BYTES = 128 * 1024
/** Generous for allocator and JIT noise, far below what keeping the run's payloads (over 200 MiB of bodies) would cost. */
const RSS_SLACK_MIB = 64
const KNOWN_STATUSES = new Set([200, 202, 204, 400, 401, 403, 404, 405, 406, 413, 415, 429])
const TOKENS = { alice: 'alice-fuzz-token-0123456789', bob: 'bob-fuzz-token-9876543210' }
const AUTH = { alice: { authorization: `Bearer ${TOKENS.alice}` }, bob: { authorization: `Bearer ${TOKENS.bob}` } }
const FORM = { elicitation: { form: {} } }

interface Reply { status: number, contentType: string, text: string, headers: Record<string, string | string[] | undefined> }
interface Verdict { label: string, problem?: string }
interface RunReport {
  byKind: Map<string, { labels: Map<string, number>, ms: number }>
  /** Wrong answers by kind and what came back: how many, and the first request that got it. */
  failures: Map<string, { count: number, example: string }>
  /** Requests aimed at alice's live state that the gateway accepted (202 or a result), and when it answered. */
  acceptedLive: Array<{ at: number, request: string }>
  count: number
  bytes: number
  ms: number
}

function isObject (value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

async function send (url: string, agent: Agent, c: FuzzCase): Promise<Reply> {
  const body = c.chunked && c.body !== undefined ? Readable.from([c.body.slice(0, 1024), c.body.slice(1024)]) : c.body
  const res = await request(url, {
    method: c.method,
    headers: c.headers,
    body,
    dispatcher: agent,
    headersTimeout: 15_000,
    bodyTimeout: 15_000,
  })
  const text = await res.body.text()
  return { status: res.statusCode, contentType: String(res.headers['content-type'] ?? ''), text, headers: res.headers }
}

/** The JSON-RPC message that answers the request: the JSON body, or the final message of an SSE body. */
function answerOf (reply: Reply): unknown {
  if (reply.contentType.startsWith('application/json')) return JSON.parse(reply.text)
  if (!reply.contentType.startsWith('text/event-stream')) throw new Error(`a body of type '${reply.contentType}'`)
  const messages = reply.text.split('\n\n').flatMap((event) => {
    const data = event.split('\n').filter((line) => line.startsWith('data:')).map((line) => line.slice(5).trim()).join('\n')
    return data === '' ? [] : [JSON.parse(data) as unknown]
  })
  const final = messages.filter((m) => isObject(m) && ('result' in m || 'error' in m)).at(-1)
  if (final === undefined) throw new Error('an SSE stream that ended without a response')
  return final
}

/** Whether a reply is a well-formed answer of the kind the case expects; the label counts it in the table. */
function judge (c: FuzzCase, reply: Reply): Verdict {
  const { status } = reply
  if (!KNOWN_STATUSES.has(status)) return { label: `${status}`, problem: 'an HTTP status outside the known set' }
  let outcome: number | 'result' | 'empty' = 'empty'
  if (reply.text !== '') {
    let message: unknown
    try {
      message = answerOf(reply)
    } catch (err) {
      return { label: `${status} ?`, problem: `not JSON-RPC: ${String(err)}` }
    }
    if (!isObject(message) || message.jsonrpc !== '2.0' || ('result' in message) === ('error' in message)) return { label: `${status} ?`, problem: 'not a JSON-RPC response' }
    if ('error' in message) {
      const error = message.error
      if (!isObject(error) || !Number.isInteger(error.code) || typeof error.message !== 'string' || error.message === '') return { label: `${status} ?`, problem: 'a malformed JSON-RPC error object' }
      outcome = error.code as number
    } else {
      if (!isObject(message.result)) return { label: `${status} ?`, problem: 'a result that is not an object' }
      outcome = 'result'
    }
    if (message.id !== c.expect.id) return { label: `${status} ${outcome}`, problem: `answered id ${JSON.stringify(message.id)}, not ${JSON.stringify(c.expect.id)}` }
  }
  const label = `${status} ${outcome}`
  if (!c.expect.status.includes(status) || !c.expect.outcomes.includes(outcome)) return { label, problem: `expected ${c.expect.status.join('|')} ${c.expect.outcomes.join('|')}` }
  if (status === 401 && reply.headers['www-authenticate'] === undefined) return { label, problem: '401 without WWW-Authenticate' }
  return { label }
}

/** Sends `count` generated cases of `seed`, IN_FLIGHT at a time over keep-alive connections, and judges every reply into `report`. */
async function fuzz (url: string, targets: FuzzTargets, seed: number, count: number, report: RunReport): Promise<void> {
  const agent = new Agent({ connections: IN_FLIGHT, keepAliveTimeout: 30_000 })
  const started = Date.now()
  let next = 0
  const worker = async (): Promise<void> => {
    for (let i = next++; i < count; i = next++) {
      const c = generateCase(seed, i, targets)
      const sent = Date.now()
      let reply: Reply | undefined
      let verdict: Verdict
      try {
        reply = await send(url, agent, c)
        verdict = judge(c, reply)
      } catch (err) {
        // A server may refuse an upload that is too large by closing the connection as it answers 413.
        const closed = c.expect.status.includes(413) && /EPIPE|ECONNRESET|UND_ERR_SOCKET/.test(`${(err as { code?: string }).code}`)
        verdict = closed ? { label: '413 closed while uploading' } : { label: 'transport error', problem: String(err) }
      }
      const kind = report.byKind.get(c.kind) ?? { labels: new Map<string, number>(), ms: 0 }
      kind.labels.set(verdict.label, (kind.labels.get(verdict.label) ?? 0) + 1)
      kind.ms += Date.now() - sent
      report.byKind.set(c.kind, kind)
      report.count++
      report.bytes += c.body?.length ?? 0
      const request = `seed ${seed} #${i} ${c.method} ${c.kind} ${JSON.stringify(c.headers)} ${String(c.body ?? '').slice(0, 400)}`
      if (verdict.problem !== undefined) {
        const key = `${c.kind}: ${verdict.label}: ${verdict.problem}`
        const failure = report.failures.get(key) ?? { count: 0, example: `${request}\n    → HTTP ${reply?.status ?? '-'} ${reply?.text.slice(0, 300) ?? ''}` }
        report.failures.set(key, { ...failure, count: failure.count + 1 })
      }
      if (c.touchesLive && (verdict.label.endsWith(' result') || verdict.label === '202 empty')) report.acceptedLive.push({ at: Date.now(), request: `${request} → ${verdict.label}` })
    }
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker))
  await agent.close()
  report.ms += Date.now() - started
}

/** One row per kind of request: how many, their mean latency, and what came back (status and code). */
function table (report: RunReport): string {
  return [...report.byKind].sort(([a], [b]) => a.localeCompare(b)).map(([kind, { labels, ms }]) => {
    const total = [...labels.values()].reduce((a, b) => a + b, 0)
    return `  ${kind.padEnd(36)} ${String(total).padStart(5)} ${(ms / total).toFixed(1).padStart(7)} ms  ${[...labels].map(([label, n]) => `${label} ×${n}`).join(', ')}`
  }).join('\n')
}

/** CPU seconds (user + system) the process has used. */
function cpuSeconds (pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}

function memoryMiB (pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const match = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return Number(match?.[1]) / 1024
}

/** The child's RSS once it stops moving: 6 samples 200 ms apart within 2 MiB of each other (or after 20 s). */
async function settledRss (pid: number): Promise<number> {
  const samples: number[] = []
  const deadline = Date.now() + 20_000
  for (;;) {
    samples.push(memoryMiB(pid, 'VmRSS'))
    const recent = samples.slice(-6)
    if ((recent.length === 6 && Math.max(...recent) - Math.min(...recent) <= 2) || Date.now() > deadline) return recent.at(-1)!
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

/** Polls tasks/get until the task has one of `statuses`, for up to 30 s (upstream processes start slowly on a busy machine). */
async function reach (client: ModernRaw, taskId: string, statuses: string[]): Promise<Json> {
  return await until(`task ${taskId} reaching ${statuses.join('/')}`, async () => {
    const task = await client.result('tasks/get', { taskId })
    if (statuses.includes(String(task.status))) return task
    if (['failed', 'cancelled', 'completed'].includes(String(task.status))) throw new Error(`task ${taskId} is ${JSON.stringify(task)}, not ${statuses.join('/')}`)
    return undefined
  }, { timeoutMs: 30_000, everyMs: 50 })
}

/**
 * The real CLI gateway (sqlite store, two principals, the demo upstream over stdio) under 10,000 generated malformed
 * or mutated requests, 16 in flight: every answer is a well-formed JSON-RPC error of the right status and code, the
 * process stays up and logs no error, its RSS returns to the baseline, and no task of alice changes. FUZZ_SEED replays
 * another seed; each failure names the seed and the case number that reproduce it.
 */
describe(`the gateway under ${CASES} malformed requests (seed ${SEED})`, () => {
  let gw: GatewayProcess
  let pid: number
  let alice: RawSession
  let modern: ModernRaw
  let targets: FuzzTargets
  let ids: Record<'done' | 'answered' | 'failed' | 'asking' | 'running' | 'modernDone' | 'modernAsking', string>
  let keys: { asking: string, modernAsking: string, held: string }
  let before: { tasks: Map<string, string>, list: string[] }
  const report: RunReport = { byKind: new Map(), failures: new Map(), acceptedLive: [], count: 0, bytes: 0, ms: 0 }
  let rss = { baseline: 0, after: 0, peak: 0 }

  /** Everything a client can see of alice's tasks: both renderings of each, and her task list. */
  const snapshot = async (): Promise<{ tasks: Map<string, string>, list: string[] }> => {
    const tasks = new Map<string, string>()
    for (const taskId of Object.values(ids)) {
      // The suggested poll interval grows with a running task's age (tasks.pollIntervalMax): not a change of the task.
      const state = { modern: await modern.result('tasks/get', { taskId }), legacy: (await alice.request('tasks/get', { taskId })).result }
      tasks.set(taskId, JSON.stringify(state, (key, value: unknown) => key === 'pollInterval' || key === 'pollIntervalMs' ? undefined : value))
    }
    const list = ((await alice.request('tasks/list')).result as { tasks: Json[] }).tasks.map((t) => String(t.taskId)).sort()
    return { tasks, list }
  }

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-fuzz-'))
    gw = await startGatewayProcess(writeConfig(`
server: { maxBodyBytes: ${MAX_BODY_BYTES}, shutdownGrace: 2s }
store: { kind: sqlite, path: ${JSON.stringify(join(dir, 'gateway.db'))} }
logging: { level: info }
tasks: { decide: always }
auth:
  tokens:
    - { principal: alice, sha256: ${sha256Hex(TOKENS.alice)} }
    - { principal: bob, sha256: ${sha256Hex(TOKENS.bob)} }
upstreams:
${demoStdioYaml()}
    timeouts: { connect: 60s }
`))
    pid = gw.child.pid!
    alice = await RawSession.open(gw.url, FORM, AUTH.alice)
    const bob = await RawSession.open(gw.url, {}, AUTH.bob)
    modern = ModernRaw.withTasks(gw.url, FORM, AUTH.alice)
    // Alice's legacy tasks share her upstream session (one stdio process), which does not say which call
    // asks for input: each asking task is waited on before the next one starts, so each shows its own.
    const asking = async (message: string): Promise<string> => {
      const taskId = await legacyTask(alice, 'demo__ask_user', { message, timeoutMs: 600_000 }, 600_000)
      await reach(modern, taskId, ['input_required'])
      return taskId
    }
    ids = {
      done: await legacyTask(alice, 'demo__slow', { duration: 10, steps: 1 }, 600_000),
      answered: await asking('Early name?'),
      failed: await legacyTask(alice, 'demo__throw_error', { code: -32011, message: 'quota' }, 600_000),
      asking: await asking('Legacy name?'),
      running: await legacyTask(alice, 'demo__slow', { duration: 600_000, steps: 1 }, 600_000),
      modernDone: String((await modern.result('tools/call', { name: 'demo__echo', arguments: { text: 'modern' } })).taskId),
      modernAsking: String((await modern.result('tools/call', { name: 'demo__ask_user', arguments: { message: 'Modern name?', timeoutMs: 600_000 } })).taskId),
    }
    // One input answered before the run: answers to it arrive out of order, after it was settled.
    const staleKey = Object.keys((await reach(modern, ids.answered, ['input_required'])).inputRequests as Json)[0]!
    await (await alice.post({ jsonrpc: '2.0', id: staleKey, result: { action: 'accept', content: { name: 'Early' } } })).text()
    expect((await reach(modern, ids.answered, ['completed'])).result).toMatchObject({ content: [{ text: 'Hello, Early!' }] })
    await reach(modern, ids.done, ['completed'])
    await reach(modern, ids.failed, ['failed'])
    await reach(modern, ids.modernDone, ['completed'])
    const firstKey = async (taskId: string): Promise<string> => Object.keys((await reach(modern, taskId, ['input_required'])).inputRequests as Json)[0]!
    const held = await new ModernRaw(gw.url, FORM, AUTH.alice).result('tools/call', { name: 'demo__ask_user', arguments: { message: 'Held name?', timeoutMs: 600_000 } })
    keys = {
      asking: await firstKey(ids.asking),
      modernAsking: await firstKey(ids.modernAsking),
      held: Object.keys(held.inputRequests as Json)[0]!,
    }
    expect((await modern.result('tasks/get', { taskId: ids.running })).status).toBe('working')
    targets = {
      maxBodyBytes: MAX_BODY_BYTES,
      tokens: TOKENS,
      sessions: { alice: alice.sessionId, bob: bob.sessionId },
      taskIds: Object.values(ids),
      completedIds: [ids.done, ids.answered, ids.modernDone],
      liveIds: [ids.asking, ids.running, ids.modernAsking],
      inputs: { legacy: { taskId: ids.asking, key: keys.asking }, modern: { taskId: ids.modernAsking, key: keys.modernAsking } },
      staleKeys: [staleKey, keys.held],
      requestState: String(held.requestState),
    }
    before = await snapshot()
  }, 60_000)

  afterAll(async () => {
    if (gw?.child.exitCode !== null) return
    gw.child.kill('SIGTERM')
    const timer = setTimeout(() => gw.child.kill('SIGKILL'), 10_000)
    await gw.exited
    clearTimeout(timer)
  }, 15_000)

  it('answers every request with a well-formed JSON-RPC error of the expected status and code', async () => {
    // A warm-up of other cases first (seed + 1), so the baseline includes what the JIT and the heap grow to under this load.
    const cpu = { gateway: cpuSeconds(pid), test: process.cpuUsage() }
    await fuzz(gw.url, targets, SEED + 1, WARM_UP, report)
    rss.baseline = await settledRss(pid)
    await fuzz(gw.url, targets, SEED, CASES, report)
    rss = { ...rss, after: await settledRss(pid), peak: memoryMiB(pid, 'VmHWM') }
    console.log([
      `fuzz seed ${SEED}: ${report.count} requests (${WARM_UP} warm-up with seed ${SEED + 1}), ${(report.bytes / 2 ** 20).toFixed(0)} MiB of bodies, in ${report.ms} ms, ${IN_FLIGHT} in flight`,
      `gateway RSS: ${rss.baseline.toFixed(1)} MiB after the warm-up, ${rss.after.toFixed(1)} MiB after the run, peak ${rss.peak.toFixed(1)} MiB`,
      `CPU: gateway ${(cpuSeconds(pid) - cpu.gateway).toFixed(1)} s, test process ${((process.cpuUsage(cpu.test).user + process.cpuUsage(cpu.test).system) / 1e6).toFixed(1)} s`,
      table(report),
      ...[...report.failures].map(([key, { count, example }]) => `FAIL ${key} ×${count}, first: ${example}`),
    ].join('\n'))
    expect(report.count).toBe(WARM_UP + CASES)
    expect([...report.failures].map(([key, { count }]) => `${key} ×${count}`)).toEqual([])
  }, 180_000)

  it('stays up, and logs neither an error nor an unhandled rejection', async () => {
    expect(gw.child.exitCode).toBeNull()
    expect(gw.child.signalCode).toBeNull()
    expect(await alice.request('ping')).toMatchObject({ result: {} })
    // Every line is a pino JSON line below level 50 (error); anything else (a stack trace, a Node warning) is reported.
    const bad = gw.lines.filter((line) => {
      if (/unhandled|uncaught/i.test(line)) return true
      try {
        return Number((JSON.parse(line) as Json).level) >= 50
      } catch {
        return true
      }
    })
    expect(bad).toEqual([])
  })

  it('returns to its memory baseline once the run is over', () => {
    expect(rss.baseline).toBeGreaterThan(0)
    expect(rss.after, `RSS ${rss.after.toFixed(1)} MiB after ${(report.bytes / 2 ** 20).toFixed(0)} MiB of bodies, baseline ${rss.baseline.toFixed(1)} MiB`).toBeLessThanOrEqual(rss.baseline + RSS_SLACK_MIB)
  })

  it('changes no task of alice, and creates none', async () => {
    const after = await snapshot()
    const changed = [...before.tasks].filter(([taskId, state]) => after.tasks.get(taskId) !== state).map(([taskId, state]) => {
      // The requests accepted last before the change that aimed at this task or its pending input: the suspects.
      const key = Object.values(targets.inputs).find((input) => input.taskId === taskId)?.key ?? taskId
      const changedAt = Date.parse(String((JSON.parse(after.tasks.get(taskId) ?? '{}') as { modern?: Json }).modern?.lastUpdatedAt))
      const suspects = report.acceptedLive
        .filter((a) => a.at <= changedAt + 100 && (a.request.includes(key) || a.request.includes(taskId)))
        .slice(-3)
      return `${taskId}\n  before ${state}\n  after  ${after.tasks.get(taskId) ?? ''}\n  last accepted requests aimed at it:\n  ${suspects.map((s) => s.request).join('\n  ')}`
    })
    expect(changed).toEqual([])
    expect(after.list).toEqual(before.list)
  })

  it('lets alice still answer her inputs and finish her calls; the running task was never cancelled', async () => {
    expect((await modern.result('tasks/get', { taskId: ids.running })).status).toBe('working')
    await modern.result('tasks/cancel', { taskId: ids.running })
    expect((await reach(modern, ids.running, ['cancelled'])).status).toBe('cancelled')
    expect((await alice.post({ jsonrpc: '2.0', id: keys.asking, result: { action: 'accept', content: { name: 'Alice' } } })).status).toBe(202)
    await modern.result('tasks/update', { taskId: ids.modernAsking, inputResponses: { [keys.modernAsking]: { action: 'accept', content: { name: 'Modern Alice' } } } })
    expect((await reach(modern, ids.asking, ['completed', 'failed'])).result).toMatchObject({ content: [{ text: 'Hello, Alice!' }] })
    expect((await reach(modern, ids.modernAsking, ['completed', 'failed'])).result).toMatchObject({ content: [{ text: 'Hello, Modern Alice!' }] })
    const resumed = await new ModernRaw(gw.url, FORM, AUTH.alice).request('tools/call', {
      name: 'demo__ask_user',
      arguments: { message: 'Held name?', timeoutMs: 600_000 },
      requestState: targets.requestState,
      inputResponses: { [keys.held]: { action: 'accept', content: { name: 'Held Alice' } } },
    })
    expect(resumed.body).toMatchObject({ result: { content: [{ text: 'Hello, Held Alice!' }] } })
  })

  it('stops cleanly on SIGTERM afterwards', async () => {
    gw.child.kill('SIGTERM')
    expect(await gw.exited).toEqual([0, null])
  })
})
