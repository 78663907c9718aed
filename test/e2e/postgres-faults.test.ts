import pg from 'pg'
import { fetch as undiciFetch } from 'undici'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { PrivatePostgres } from '../helpers/private-postgres.ts'
import { demoStdioYaml, loggedLine, startGatewayProcess, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { legacyTask, next, RawSession } from '../helpers/raw-session.ts'
import { STATE_SECRET } from '../helpers/redis.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const STORE_DOWN = { code: -32603, message: 'the store is unavailable: PostgreSQL is unreachable', data: { code: 'GW_ERR_STORE_UNAVAILABLE' } }
const TERMINAL = ['completed', 'failed', 'cancelled']

async function readyz (gateway: GatewayProcess): Promise<number> {
  const res = await undiciFetch(new URL('/readyz', gateway.url))
  await res.text()
  return res.status
}

/** Lines that say a promise rejection went unhandled, an exception uncaught, or the process failed. */
function crashes (gateway: GatewayProcess): string[] {
  return gateway.lines.filter((l) => /unhandled|uncaught|"level":60/i.test(l))
}

interface Refusal { status: number, retryAfter: string | null, error: Json }

/**
 * The store's precise error: a request whose session could not be read gets a 503 with Retry-After; one whose
 * session was read before the server went, and whose handler then met it, gets the same JSON-RPC error in a 200
 * (as a 2026-07-28 request does).
 */
function expectPrecise (refusals: readonly Refusal[]): void {
  for (const refusal of refusals) {
    expect(refusal.error).toEqual(STORE_DOWN)
    expect(refusal.status === 503 ? refusal.retryAfter : refusal.status).toBe(refusal.status === 503 ? '1' : 200)
  }
}

/** A promise and what settles it (Promise.withResolvers, which Node 20 lacks). */
function signal (): { promise: Promise<void>, resolve: () => void } {
  let settle = (): void => {}
  const promise = new Promise<void>((resolve) => { settle = resolve })
  return { promise, resolve: settle }
}

/**
 * Clients that keep creating tasks and reading them back through both processes until stopped: what they were
 * told (a task id for every creation that succeeded) and every answer that was not a success, which must be the
 * store's precise error while it is unreachable (see expectPrecise), never anything else and never a hang. A
 * client that was refused waits until the test says the server is back (`resume()`), rather than retrying at once
 * in a tight loop.
 */
class Load {
  /** Every task a client was told it created, with the client (a session reads only its own tasks). */
  readonly acknowledged: Array<{ session: RawSession, taskId: string }> = []
  readonly refusals: Refusal[] = []
  readonly surprises: string[] = []
  #running = true
  readonly #clients: Array<Promise<void>>
  #back = signal()

  constructor (sessions: RawSession[]) {
    this.#clients = sessions.map(async (session) => {
      const mine: string[] = []
      for (let i = 0; this.#running; i++) {
        const create = i % 2 === 0
        const taskId = mine[(i * 7) % Math.max(1, mine.length)]
        const body = create || taskId === undefined
          ? { jsonrpc: '2.0', id: i, method: 'tools/call', params: { name: 'demo__slow', arguments: { duration: 50 + (i % 5) * 50, steps: 1 }, task: { ttl: 600_000 } } }
          : { jsonrpc: '2.0', id: i, method: 'tasks/get', params: { taskId } }
        let res: Awaited<ReturnType<RawSession['post']>>
        let answer: Json
        try {
          res = await session.post(body)
          answer = await res.json() as Json
        } catch (err) {
          this.surprises.push(`${body.method}: ${(err as Error).message}`)
          continue
        }
        if (res.status === 200 && answer.result !== undefined) {
          const created = ((answer.result as Json).task as Json | undefined)?.taskId
          if (typeof created === 'string') {
            mine.push(created)
            this.acknowledged.push({ session, taskId: created })
          }
        } else if (((answer.error as Json | undefined)?.data as Json | undefined)?.code === 'GW_ERR_STORE_UNAVAILABLE') {
          this.refusals.push({ status: res.status, retryAfter: res.headers.get('retry-after'), error: answer.error as Json })
          await this.#back.promise
        } else {
          this.surprises.push(`HTTP ${res.status} ${JSON.stringify(answer)}`)
        }
      }
    })
  }

  /** The server is back: refused clients go on. */
  resume (): void {
    this.#back.resolve()
    this.#back = signal()
  }

  /** What the clients have seen so far, for a failure's message. */
  describe (): string {
    return `; ${this.acknowledged.length} acknowledged, ${this.refusals.length} refused, surprises: ${JSON.stringify(this.surprises.slice(0, 5))}`
  }

  async stop (): Promise<void> {
    this.#running = false
    this.#back.resolve()
    await Promise.all(this.#clients)
  }
}

/**
 * Two gateway processes on a PostgreSQL server of the test's own, which the test stops, kills or restarts under
 * load: meanwhile every request that needs the store gets its precise error (a 503 with Retry-After where no
 * handler ran), and no process crashes; once the server is back the processes reconnect by themselves, every task
 * the clients were told about is there, and outcomes that arrived during the outage are stored after it. And a
 * pool with no free connection refuses at once, saying so, rather than making requests wait without bound.
 */
describe('PostgreSQL restarted or killed under load', () => {
  let server: PrivatePostgres
  let file: string
  const processes: GatewayProcess[] = []
  /** The load of the test running, stopped before its processes are (a failed test leaves it running). */
  const loads: Load[] = []

  beforeAll(async () => {
    server = await PrivatePostgres.start()
    // A lease far longer than any outage here: the processes stay each other's peers throughout. The load runs on
    // `demo` (its calls queue for the upstream's slots); the tasks the test follows one by one on `solo`.
    file = writeConfig(`
store: { kind: postgres, url: ${JSON.stringify(server.url)}, schema: mcpgw_faults }
server: { stateSecret: ${JSON.stringify(STATE_SECRET)} }
logging: { level: info }
tasks: { pollInterval: 50ms, ownerLease: 60s, decide: always }
upstreams:
${demoStdioYaml()}
${demoStdioYaml('solo')}
    tools: { allow: [ask_user] }
    prompts: { deny: ['*'] }
    resources: { deny: ['*'] }
`)
  })

  afterEach(async () => {
    await Promise.all(loads.splice(0).map(async (load) => { await load.stop() }))
    await stopAll(processes)
    // A test that failed during an outage must not leave the next ones without their server.
    await server.ensureRunning()
  })

  afterAll(async () => {
    await stopAll(processes)
    await server?.close()
  })

  async function pair (): Promise<[GatewayProcess, GatewayProcess]> {
    const started = await Promise.all([startGatewayProcess(file), startGatewayProcess(file)])
    processes.push(...started)
    return started
  }

  it.each([
    { fault: 'pg_ctl stop -m fast', down: async () => { await server.stop() } },
    { fault: 'kill -9 of the postmaster', down: async () => { await server.kill9() } },
  ])('$fault, then start: 503 with Retry-After meanwhile, nothing acknowledged lost, outcomes stored after', async ({ down }) => {
    const [a, b] = await pair()
    const sessions = await Promise.all([a, b, a, b].map(async (p) => await RawSession.open(p.url)))
    const legacy = await RawSession.open(a.url, { elicitation: { form: {} } })
    const modern = ModernRaw.withTasks(a.url)
    const done = await legacyTask(legacy, 'demo__slow', { duration: 10, steps: 1 })
    await legacy.waitFor(done, ['completed'])
    const doneResult = (await legacy.request('tasks/result', { taskId: done })).result
    const waiting = await legacyTask(legacy, 'solo__ask_user', { message: 'Still there?' })
    await legacy.waitFor(waiting, ['input_required'])
    const load = new Load(sessions)
    loads.push(load)
    await until('the clients to have tasks acknowledged', () => load.acknowledged.length >= 20 || undefined)
    // Its upstream call runs (it asks the user), and ends (giving up on the answer) while the server is down.
    const during = await legacyTask(legacy, 'solo__ask_user', { message: 'Anyone?', timeoutMs: 3000 })
    await legacy.waitFor(during, ['input_required'])

    const from = a.lines.length
    await down()
    // While it is down: legacy requests get a 503 with Retry-After (their session lives in the store) ...
    // On a connection of its own: a kept-alive connection the load also uses was seen reset as the outage began (an
    // open defect: a client reusing a connection then sees ECONNRESET instead of the 503).
    const get = await legacy.post({ jsonrpc: '2.0', id: 41, method: 'tasks/get', params: { taskId: done } }, { fresh: true })
    expect(get.status).toBe(503)
    expect(get.headers.get('retry-after')).toBe('1')
    expect(await get.json()).toEqual({ jsonrpc: '2.0', id: 41, error: STORE_DOWN })
    // ... modern ones a JSON-RPC error, /readyz says so, and the outcome that arrived waits for the store.
    expect((await modern.request('tools/call', { name: 'demo__slow', arguments: { duration: 10, steps: 1 } })).body.error).toEqual(STORE_DOWN)
    for (const gateway of [a, b]) expect(await readyz(gateway)).toBe(503)
    await loggedLine(a, (line) => line.includes('could not store the outcome of a task') && line.includes(during), { from })
    await until('the load to meet the outage', () => load.refusals.length >= 4 || undefined)

    await server.start()
    load.resume()
    for (const gateway of [a, b]) await until('/readyz to be 200 again', async () => await readyz(gateway) === 200 || undefined)
    // Each process told its operator that PostgreSQL was gone and that it is back, per outage rather than per failed
    // statement, of which the load makes dozens (a statement that still succeeds on a connection the stopping server
    // has not ended yet ends an outage early: with a few pooled connections it can be told up to three times), and
    // the same of its LISTEN connection.
    for (const gateway of [a, b]) {
      await loggedLine(gateway, 'PostgreSQL bus connection restored')
      const lost = gateway.lines.filter((l) => l.includes('PostgreSQL connection lost'))
      const restored = gateway.lines.filter((l) => l.includes('PostgreSQL connection restored'))
      expect(lost.length).toBeGreaterThanOrEqual(1)
      expect(lost.length).toBeLessThanOrEqual(3)
      expect(restored).toHaveLength(lost.length)
    }
    const acknowledged = load.acknowledged.length
    await until('the load to have tasks acknowledged after the outage', () => load.acknowledged.length >= acknowledged + 20 || undefined, { describeLast: () => load.describe() })
    await load.stop()

    expect(load.surprises).toEqual([])
    expectPrecise(load.refusals)
    // Nothing the clients were told about is lost: every acknowledged task is there and completes.
    for (const { session, taskId } of load.acknowledged) {
      expect((await session.waitFor(taskId, TERMINAL)).status, taskId).toBe('completed')
    }
    expect((await legacy.request('tasks/result', { taskId: done })).result).toEqual(doneResult)
    // The outcome that arrived during the outage is stored, readable through either process.
    expect(await legacy.on(b.url).waitFor(during, TERMINAL)).toMatchObject({ status: 'failed', statusMessage: expect.stringContaining('elicitation/create failed') })
    await loggedLine(a, (line) => line.includes('stored the outcome of a task that ended while it was unavailable') && line.includes(during))
    // The task waiting for input still waits; its answer, posted to B, reaches the call A runs (over the signal
    // channel, whose connection was lost and taken again).
    const viaB = legacy.on(b.url)
    const controller = new AbortController()
    const results = await viaB.stream({ taskResult: waiting }, controller.signal)
    const request = await next(results, (m) => m.method === 'elicitation/create')
    expect((await viaB.post({ jsonrpc: '2.0', id: request.id, result: { action: 'accept', content: { name: 'Ada' } } })).status).toBe(202)
    expect(JSON.stringify((await next(results, (m) => 'result' in m)).result)).toContain('Hello, Ada!')
    controller.abort()
    for (const gateway of [a, b]) {
      expect(gateway.child.exitCode).toBeNull()
      expect(crashes(gateway)).toEqual([])
    }
  })

  it('pg_ctl restart -m fast under load: every answer a success or the store\'s precise error, nothing acknowledged lost', async () => {
    const [a, b] = await pair()
    const sessions = await Promise.all([a, b, a, b].map(async (p) => await RawSession.open(p.url)))
    const load = new Load(sessions)
    loads.push(load)
    await until('the clients to have tasks acknowledged', () => load.acknowledged.length >= 20 || undefined)
    await server.restart()
    load.resume()
    const acknowledged = load.acknowledged.length
    await until('the load to have tasks acknowledged after the restart', () => load.acknowledged.length >= acknowledged + 20 || undefined, { describeLast: () => load.describe() })
    await load.stop()
    expect(load.surprises).toEqual([])
    expectPrecise(load.refusals)
    for (const { session, taskId } of load.acknowledged) {
      expect((await session.waitFor(taskId, TERMINAL)).status, taskId).toBe('completed')
    }
    for (const gateway of [a, b]) expect(crashes(gateway)).toEqual([])
  })

  it('a pool whose one connection is held refuses the next request within acquireTimeout, saying so, and serves once it is free', async () => {
    const exhausted = writeConfig(`
store: { kind: postgres, url: ${JSON.stringify(server.url)}, schema: mcpgw_pool, poolSize: 1, acquireTimeout: 1s }
server: { stateSecret: ${JSON.stringify(STATE_SECRET)} }
tasks: { pollInterval: 50ms, decide: always }
upstreams:
${demoStdioYaml()}
`)
    const gateway = await startGatewayProcess(exhausted)
    processes.push(gateway)
    const session = await RawSession.open(gateway.url)
    const taskId = await legacyTask(session, 'demo__slow', { duration: 10, steps: 1 })
    const done = await session.waitFor(taskId, ['completed'])
    // The test holds a lock on the tasks table: the gateway's next read of a task waits for it, on the pool's one
    // connection, inside the database.
    const holder = new pg.Client({ connectionString: server.url })
    await holder.connect()
    try {
      await holder.query('BEGIN')
      await holder.query('LOCK TABLE mcpgw_pool.tasks IN ACCESS EXCLUSIVE MODE')
      const first = session.request('tasks/get', { taskId })
      await until('the gateway to wait for the lock on its one connection', async () => {
        const waiting = await holder.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'mcp-task-gateway' AND wait_event_type = 'Lock'")
        return (waiting.rows[0] as { n: number }).n > 0 || undefined
      })
      // Another request finds no free connection: refused after acquireTimeout, while the lock is still held.
      const refused = await session.post({ jsonrpc: '2.0', id: 7, method: 'tasks/get', params: { taskId } })
      const error = {
        code: -32603,
        message: 'the store is unavailable: the pool of 1 PostgreSQL connections is exhausted: none came free within 1 s (store.poolSize, store.acquireTimeout)',
        data: { code: 'GW_ERR_STORE_UNAVAILABLE' },
      }
      expect(refused.status).toBe(503)
      expect(refused.headers.get('retry-after')).toBe('1')
      expect(await refused.json()).toEqual({ jsonrpc: '2.0', id: 7, error })
      await holder.query('COMMIT')
      expect((await first).result).toEqual(done)
    } finally {
      await holder.end()
    }
    expect((await session.request('tasks/get', { taskId })).result).toEqual(done)
    expect(crashes(gateway)).toEqual([])
  })
})
