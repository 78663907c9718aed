import type { Redis } from 'ioredis'
import { GatewayError } from '../../errors.ts'
import { isTerminal } from '../../wire/task-state.ts'
import { claimedEvent, createdEvent, inputEvent, settledEvent, statusEvent, TIMELINE_LIMIT } from '../task-timeline.ts'
import type { InputRecord, TaskCreateOptions, TaskCursor, TaskEvent, TaskOutcome, TaskPatch, TaskQuery, TaskRecord, TaskResume, TaskStore } from '../types.ts'
import type { TaskStatus } from '../../wire/task-state.ts'
import { ADD_INPUT, CLAIM, CREATE_TASK, run, SETTLE_INPUT, SWEEP, TRANSITION } from './redis-scripts.ts'
import { jsonBytes } from '../stored-bytes.ts'
import { listRun } from './redis-list-script.ts'
import { withRevisions } from '../stored-revision.ts'

/**
 * Keys (all under the configured prefix):
 *   task:<id>          hash: body (immutable JSON), req (the request, JSON; '{}' once the task ended), status,
 *                      msg (JSON), upd, out (JSON), exp, principal, owner, res (how the upstream work is
 *                      reached again, JSON; '' for none, and once the task ended), acct (the account its
 *                      limits count under), rb and ob (the bytes of its request and of its outcome)
 *   tasks:<principal>  sorted set of the principal's task ids by createdAt (ties by id: listing order)
 *   active:<account>   sorted set of the account's unfinished task ids by expiry (+inf: never)
 *   bytes:<account>    the bytes the account's tasks and sessions store (limits.storedBytesPerPrincipal)
 *   taskbytes          hash: the bytes each task stores; taskacct, hash: each task's account (both kept until
 *                      the sweep, so that the bytes of a task whose hash the backstop expired still come back)
 *   active             sorted set of every unfinished task id by createdAt (recovery)
 *   created            sorted set of every task id by createdAt (the operator's query; tasks stored before it
 *                      existed are not in it and are found only by a principal or an unfinished status)
 *   expiry             sorted set of task ids by expiry (sweeping)
 *   owned:<owner>      set of the unfinished task ids a gateway process runs (failover)
 *   input:<key>        hash: body (immutable JSON), state, answer (JSON)
 *   inputs:<taskId>    list of the task's input keys in arrival order
 *   events:<taskId>    list of the task's timeline entries (JSON), oldest first, the newest TIMELINE_LIMIT
 * Expiry is decided by the store's callers' clock (`now`) and enforced by `sweep`; Redis key expiry is only
 * a backstop a day after a task's TTL, so nothing grows without bound if sweeping stops.
 */

const BACKSTOP_MS = 24 * 60 * 60 * 1000
const NO_TTL_BACKSTOP_MS = 366 * 24 * 60 * 60 * 1000
/** Tasks deleted per sweep script run, so that Redis is never blocked for long. */
const SWEEP_BATCH = 200
/** Task ids read per round trip by the operator's query. */
const QUERY_PAGE = 200

type Body = Omit<TaskRecord, 'status' | 'statusMessage' | 'lastUpdatedAt' | 'outcome' | 'owner' | 'request' | 'traceContext' | 'resume'> & { traceContext?: string | null }

function expiresAt (task: Pick<TaskRecord, 'createdAt' | 'ttlMs'>): number | null {
  return task.ttlMs === null ? null : task.createdAt + task.ttlMs
}

function toTask (hash: Record<string, string>): TaskRecord | null {
  if (hash.body === undefined) return null
  const body = JSON.parse(hash.body) as Body & { request?: TaskRecord['request'] }
  // Object.assign, not rest and spread: this runs on every read of a task, and a spread that adds keys costs
  // about a microsecond each time. The fields below replace the body's own where it has them.
  // A process of the previous version may have written the previous names of the eras (stored-revision.ts).
  return withRevisions(Object.assign(body, {
    // Tasks stored before trace contexts were recorded have none.
    traceContext: body.traceContext ?? null,
    // Tasks stored before `req` existed keep their request in the body.
    request: hash.req === undefined ? body.request ?? {} : JSON.parse(hash.req) as TaskRecord['request'],
    status: hash.status as TaskStatus,
    statusMessage: hash.msg ? JSON.parse(hash.msg) as string | null : null,
    lastUpdatedAt: Number(hash.upd),
    outcome: hash.out ? JSON.parse(hash.out) as TaskOutcome : null,
    owner: hash.owner ?? '',
    resume: hash.res ? JSON.parse(hash.res) as TaskResume : null,
  }) as TaskRecord)
}

function pairs (flat: unknown): Record<string, string> {
  const out: Record<string, string> = {}
  const list = flat as string[]
  for (let i = 0; i + 1 < list.length; i += 2) out[list[i]!] = list[i + 1]!
  return out
}

function live (task: TaskRecord, now: number): boolean {
  const exp = expiresAt(task)
  return exp === null || exp > now
}

export class RedisTaskStore implements TaskStore {
  readonly #redis: Redis
  readonly #p: string
  #listVisits = 0

  constructor (redis: Redis, prefix: string) {
    this.#redis = redis
    this.#p = prefix
  }

  async create (task: TaskRecord, options: TaskCreateOptions = {}): Promise<void> {
    const { status, statusMessage, lastUpdatedAt, outcome, owner, request, resume, ...body } = task
    const exp = expiresAt(task)
    const account = options.account ?? task.principal
    // Measured as stored-bytes.ts's taskBytes measures, from the JSON written (the request's is written once).
    const req = JSON.stringify(request)
    const out = outcome ? JSON.stringify(outcome) : ''
    const requestBytes = Buffer.byteLength(req)
    const outcomeBytes = Buffer.byteLength(out)
    const bytes = { request: requestBytes, total: requestBytes + jsonBytes(task.clientCapabilities) + outcomeBytes }
    const accounting = { acct: account, rb: String(bytes.request), ob: String(outcomeBytes) }
    const fields = {
      body: JSON.stringify(body), req, status, msg: JSON.stringify(statusMessage), upd: String(lastUpdatedAt), out, exp: exp === null ? '' : String(exp), principal: task.principal, owner, res: resume === null ? '' : JSON.stringify(resume), ...accounting,
    }
    const keys = [
      `task:${task.id}`, `tasks:${task.principal}`, `active:${account}`, 'active', `owned:${owner}`, 'expiry', 'created', `events:${task.id}`, `bytes:${account}`,
      'taskbytes', 'taskacct',
    ]
      .map((key) => this.#p + key)
    const refused = await run(this.#redis, CREATE_TASK, keys, [
      options.maxActive ?? '', task.createdAt, task.id, exp ?? '', isTerminal(status) ? '0' : '1',
      exp === null ? NO_TTL_BACKSTOP_MS : task.ttlMs! + BACKSTOP_MS, JSON.stringify(createdEvent(task)),
      bytes.total, options.maxStoredBytes ?? '', account,
      ...Object.entries(fields).flat(),
    ])
    if (Array.isArray(refused)) throw new GatewayError('GW_ERR_STORED_BYTES_LIMIT', [Number(refused[1]), bytes.total, options.maxStoredBytes])
    const active = Number(refused)
    if (active > 0) throw new GatewayError('GW_ERR_TASK_LIMIT', [active, options.maxActive])
  }

  async get (id: string, now: number): Promise<TaskRecord | null> {
    const task = toTask(await this.#redis.hgetall(`${this.#p}task:${id}`))
    return task && live(task, now) ? task : null
  }

  async list (principal: string, after: TaskCursor | undefined, limit: number, now: number): Promise<TaskRecord[]> {
    const out: TaskRecord[] = []
    let from = after
    while (out.length < limit) {
      const page = await listRun(this.#redis, this.#p, `${this.#p}tasks:${principal}`, from, limit - out.length, now)
      this.#listVisits += page.looked
      for (const hash of page.hashes) {
        const task = toTask(hash)
        if (task && live(task, now)) out.push(task)
      }
      if (page.next === undefined) break
      from = page.next
    }
    return out
  }

  /** Index entries the list pages of this store have looked at so far (what a page costs, for tests and the bench). */
  get listVisits (): number {
    return this.#listVisits
  }

  async query (query: TaskQuery, before: TaskCursor | undefined, limit: number, now: number): Promise<TaskRecord[]> {
    const out: TaskRecord[] = []
    // The smallest index that holds every match: a principal's own tasks, or the unfinished ones, or all.
    const unfinished = query.status !== undefined && !isTerminal(query.status)
    const index = this.#p + (query.principal !== undefined ? `tasks:${query.principal}` : unfinished ? 'active' : 'created')
    const matches = (task: TaskRecord): boolean => live(task, now) && (query.status === undefined || task.status === query.status) &&
      (query.upstream === undefined || task.upstream === query.upstream) && (query.tool === undefined || task.tool === query.tool) &&
      (query.principal === undefined || task.principal === query.principal)
    // Newest first by rank, each round from where the last one stopped (O(log n + a round), never an offset walk):
    // after the tasks newer than the cursor's createdAt, then after the last id read.
    let rank = before ? await this.#redis.zcount(index, `(${before.createdAt}`, '+inf') : 0
    while (out.length < limit) {
      const page = await this.#redis.zrevrange(index, rank, rank + QUERY_PAGE - 1, 'WITHSCORES')
      const pipeline = this.#redis.pipeline()
      for (let i = 0; i + 1 < page.length; i += 2) {
        const id = page[i]!
        if (!before || Number(page[i + 1]) < before.createdAt || id < before.id) pipeline.hgetall(`${this.#p}task:${id}`)
      }
      for (const [, hash] of await pipeline.exec() ?? []) {
        const task = toTask(hash as Record<string, string>)
        if (task && matches(task) && out.length < limit) out.push(task)
      }
      if (page.length < 2 * QUERY_PAGE) break
      // A sweep between rounds moves ranks: go on after the last id read, where it is now.
      const last = await this.#redis.zrevrank(index, page[page.length - 2]!)
      rank = last === null ? rank + QUERY_PAGE : last + 1
    }
    return out
  }

  async transition (id: string, from: readonly TaskStatus[], to: TaskStatus, patch: TaskPatch, now: number): Promise<TaskRecord | null> {
    const outcome = patch.outcome === undefined ? undefined : JSON.stringify(patch.outcome)
    const result = await run(this.#redis, TRANSITION, [`${this.#p}task:${id}`, `${this.#p}events:${id}`], [
      this.#p, id, now, to,
      patch.statusMessage === undefined ? '0' : '1', JSON.stringify(patch.statusMessage ?? null),
      outcome === undefined ? '0' : '1', outcome ?? '',
      JSON.stringify(statusEvent(to, patch, now, outcome)), TIMELINE_LIMIT,
      patch.resume === undefined ? '0' : '1', patch.resume == null ? '' : JSON.stringify(patch.resume),
      outcome === undefined ? 0 : Buffer.byteLength(outcome), patch.maxStoredBytes ?? '',
      patch.asOwner ?? '',
      ...from,
    ])
    if (Array.isArray(result) && result[0] === 'over') {
      throw new GatewayError('GW_ERR_STORED_BYTES_LIMIT', [Number(result[1]), Number(result[2]), patch.maxStoredBytes])
    }
    return result ? toTask(pairs(result)) : null
  }

  async countActive (account: string, now: number, atMost = Number.MAX_SAFE_INTEGER): Promise<number> {
    return Math.min(atMost, await this.#redis.zcount(`${this.#p}active:${account}`, `(${now}`, '+inf'))
  }

  async storedBytes (account: string): Promise<number> {
    return Number(await this.#redis.get(`${this.#p}bytes:${account}`) ?? 0)
  }

  async unfinished (): Promise<TaskRecord[]> {
    const ids = await this.#redis.zrange(`${this.#p}active`, '0', '-1')
    const pipeline = this.#redis.pipeline()
    for (const id of ids) pipeline.hgetall(`${this.#p}task:${id}`)
    const results = await pipeline.exec() ?? []
    return results
      .map(([, hash]) => toTask(hash as Record<string, string>))
      .filter((t): t is TaskRecord => t !== null && !isTerminal(t.status))
  }

  async ownerOf (id: string, now: number): Promise<string | null> {
    const [owner, status, exp] = await this.#redis.hmget(`${this.#p}task:${id}`, 'owner', 'status', 'exp')
    if (owner == null || status == null || isTerminal(status as TaskStatus)) return null
    return exp == null || exp === '' || Number(exp) > now ? owner : null
  }

  async ownedBy (owner: string, now: number): Promise<TaskRecord[]> {
    const ids = await this.#redis.smembers(`${this.#p}owned:${owner}`)
    const pipeline = this.#redis.pipeline()
    for (const id of ids) pipeline.hgetall(`${this.#p}task:${id}`)
    const results = await pipeline.exec() ?? []
    const owned: TaskRecord[] = []
    const stale: string[] = []
    results.forEach(([, hash], i) => {
      const task = toTask(hash as Record<string, string>)
      if (task && task.owner === owner && !isTerminal(task.status) && live(task, now)) owned.push(task)
      else stale.push(ids[i]!)
    })
    if (stale.length > 0) await this.#redis.srem(`${this.#p}owned:${owner}`, ...stale)
    return owned.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1))
  }

  async claim (id: string, from: string, to: string, now: number): Promise<TaskRecord | null> {
    const result = await run(this.#redis, CLAIM, [`${this.#p}task:${id}`, `${this.#p}owned:${from}`, `${this.#p}owned:${to}`, `${this.#p}events:${id}`], [
      id, from, to, now, JSON.stringify(claimedEvent(from, to, now)), TIMELINE_LIMIT,
    ])
    return result ? toTask(pairs(result)) : null
  }

  async sweep (now: number): Promise<number> {
    let swept = 0
    for (;;) {
      const batch = Number(await run(this.#redis, SWEEP, [], [this.#p, now, SWEEP_BATCH]))
      swept += batch
      if (batch < SWEEP_BATCH) return swept
    }
  }

  async addInput (input: InputRecord, maxPending: number, maxStoredBytes?: number): Promise<void> {
    const { state: _state, answer: _answer, ...body } = input
    const bytes = jsonBytes(input.params)
    const ttl = await this.#redis.pttl(`${this.#p}task:${input.taskId}`)
    const keys = [`task:${input.taskId}`, `inputs:${input.taskId}`, `input:${input.key}`, `events:${input.taskId}`].map((key) => this.#p + key)
    const outcome = await run(this.#redis, ADD_INPUT, keys, [
      maxPending, JSON.stringify(body), input.key, ttl > 0 ? ttl : NO_TTL_BACKSTOP_MS, `${this.#p}input:`,
      JSON.stringify(inputEvent(input)), TIMELINE_LIMIT,
      this.#p, bytes, maxStoredBytes ?? '', input.taskId,
    ])
    if (Array.isArray(outcome)) throw new GatewayError('GW_ERR_STORED_BYTES_LIMIT', [Number(outcome[1]), bytes, maxStoredBytes])
    if (outcome === -1) throw new GatewayError('GW_ERR_TASK_NOT_FOUND', [input.taskId])
    if (outcome === -2) throw new GatewayError('GW_ERR_TASK_INPUT_LIMIT', [input.taskId, maxPending])
  }

  async getInput (key: string): Promise<InputRecord | null> {
    const hash = await this.#redis.hgetall(`${this.#p}input:${key}`)
    if (hash.body === undefined) return null
    return { ...JSON.parse(hash.body) as Omit<InputRecord, 'state' | 'answer'>, state: hash.state as InputRecord['state'], answer: hash.answer ? JSON.parse(hash.answer) as TaskOutcome : null }
  }

  async pendingInputs (taskId: string): Promise<InputRecord[]> {
    return (await this.inputsOf(taskId)).filter((input) => input.state === 'pending')
  }

  async inputsOf (taskId: string): Promise<InputRecord[]> {
    const keys = await this.#redis.lrange(`${this.#p}inputs:${taskId}`, 0, -1)
    const inputs = await Promise.all(keys.map((key) => this.getInput(key)))
    // Oldest first; inputs created in the same millisecond keep their arrival order (sort is stable).
    return inputs.filter((input): input is InputRecord => input !== null).sort((a, b) => a.createdAt - b.createdAt)
  }

  async settleInput (key: string, state: 'answered' | 'expired', answer: TaskOutcome | null, now = Date.now()): Promise<boolean> {
    return await run(this.#redis, SETTLE_INPUT, [`${this.#p}input:${key}`], [
      state, answer === null ? '' : JSON.stringify(answer), this.#p, JSON.stringify(settledEvent(key, state, now)), TIMELINE_LIMIT,
    ]) === 1
  }

  async timeline (taskId: string): Promise<TaskEvent[]> {
    return (await this.#redis.lrange(`${this.#p}events:${taskId}`, 0, -1)).map((entry) => JSON.parse(entry) as TaskEvent)
  }
}
