/**
 * One gateway process's task engine (task service, runner, inputs) over a store the test gives it, with the
 * upstream side replaced by a call engine the test drives by hand: the unit tests of the heart run in
 * milliseconds, with no gateway, upstream or socket. Only what is not under test is faked.
 */
import { pino } from 'pino'
import type { CallEngine, CallOrigin, CallTarget } from '../../src/calls/call-engine.ts'
import { parseConfig } from '../../src/config/load.ts'
import type { Config } from '../../src/config/schema.ts'
import type { InputRecord, SignalBus, TaskRecord, TaskStore } from '../../src/store/types.ts'
import type { TaskEvents } from '../../src/tasks/task-events.ts'
import { TaskInputs } from '../../src/tasks/task-inputs.ts'
import { TaskRunner } from '../../src/tasks/task-runner.ts'
import { TaskService, type CreateTaskRequest } from '../../src/tasks/task-service.ts'
import type { JsonObject } from '../../src/wire/jsonrpc.ts'
import type { Upstream } from '../../src/upstream/upstream.ts'

export const silent = pino({ level: 'silent' })

/** A configuration with one Streamable HTTP upstream `demo` (nothing listens there: nothing connects to it). */
export function heartConfig (upstream: JsonObject = {}): Config {
  return parseConfig({ upstreams: [{ name: 'demo', transport: 'streamable-http', url: 'http://127.0.0.1:9/mcp', ...upstream }] })
}

/** An upstream as the task engine sees it: its name and configuration (the call engine, faked, does the rest). */
export function configuredUpstream (config: Config): Upstream {
  const upstream = config.upstreams[0]!
  return { name: upstream.name, config: upstream } as unknown as Upstream
}

/** One upstream call the engine was asked to make, which the test settles. */
export interface PendingCall {
  target: CallTarget
  params: JsonObject
  origin: CallOrigin
  resolve (result: JsonObject): void
  reject (err: unknown): void
  /** Settles once the caller has the call's outcome (resolved, rejected or aborted). */
  settled: Promise<void>
}

/** A call engine whose calls wait until the test settles them; an aborted call fails with the abort's reason, as the real one does. */
export class HandCalls {
  readonly made: PendingCall[] = []
  readonly #waiters: Array<(call: PendingCall) => void> = []

  /** The next call made (or the oldest one not taken yet). */
  async next (): Promise<PendingCall> {
    const ready = this.made[this.#taken]
    if (ready !== undefined) {
      this.#taken++
      return ready
    }
    return await new Promise((resolve) => this.#waiters.push((call) => {
      this.#taken++
      resolve(call)
    }))
  }

  #taken = 0

  readonly engine = {
    run: async (target: CallTarget, params: JsonObject, origin: CallOrigin): Promise<JsonObject> => {
      let settle!: { resolve: (result: JsonObject) => void, reject: (err: unknown) => void }
      const outcome = new Promise<JsonObject>((resolve, reject) => { settle = { resolve, reject } })
      const { resolve, reject } = settle
      const onAbort = (): void => reject(origin.signal.reason)
      if (origin.signal.aborted) onAbort()
      origin.signal.addEventListener('abort', onAbort, { once: true })
      const call: PendingCall = { target, params, origin, resolve, reject, settled: outcome.then(() => {}, () => {}) }
      this.made.push(call)
      this.#waiters.shift()?.(call)
      return await outcome
    },
  } as unknown as CallEngine
}

/** Task events as the protocol side receives them, in order, with a wait for the first that matches. */
export class SeenEvents implements TaskEvents {
  readonly statuses: TaskRecord[] = []
  readonly inputs: InputRecord[] = []
  readonly #waits: Array<{ match: (task: TaskRecord) => boolean, resolve: (task: TaskRecord) => void }> = []

  status (task: TaskRecord): void {
    this.statuses.push(task)
    for (const wait of [...this.#waits]) {
      if (!wait.match(task)) continue
      this.#waits.splice(this.#waits.indexOf(wait), 1)
      wait.resolve(task)
    }
  }

  input (_task: TaskRecord, input: InputRecord): void { this.inputs.push(input) }
  inputSettled (): void {}
  progress (): void {}
  notification (): void {}

  /** The first status event (already seen, or to come) of which `match` holds. */
  async status$ (match: (task: TaskRecord) => boolean): Promise<TaskRecord> {
    const seen = this.statuses.find(match)
    if (seen !== undefined) return seen
    return await new Promise((resolve) => this.#waits.push({ match, resolve }))
  }
}

export interface EngineOptions {
  store: TaskStore
  bus: SignalBus
  processId: string
  config?: Config
  /** Aborted to shut this process down. */
  shutdown?: AbortController
  idempotent?: boolean
}

/** One process's task engine, wired as the gateway wires it (see gateway/core-wiring.ts), around a hand-driven call engine. */
export interface Engine {
  service: TaskService
  runner: TaskRunner
  inputs: TaskInputs
  events: SeenEvents
  calls: HandCalls
  upstream: Upstream
  shutdown: AbortController
}

export function engine (options: EngineOptions): Engine {
  const config = options.config ?? heartConfig()
  const upstream = configuredUpstream(config)
  const events = new SeenEvents()
  const calls = new HandCalls()
  const shutdown = options.shutdown ?? new AbortController()
  const inputs = new TaskInputs({
    store: options.store,
    events,
    config: config.tasks,
    bus: options.bus,
    processId: options.processId,
    log: silent,
  })
  const runner = new TaskRunner({
    store: options.store,
    upstreams: { upstream: (name) => name === upstream.name ? upstream : undefined },
    calls: calls.engine,
    inputs,
    events,
    log: silent,
    shutdown: shutdown.signal,
    bus: options.bus,
    nativeTaskSupport: () => undefined,
    maxResultBytes: config.tasks.maxResultBytes,
  })
  const service = new TaskService({
    store: options.store,
    runner,
    inputs,
    events,
    config: config.tasks,
    log: silent,
    bus: options.bus,
    owner: options.processId,
    isIdempotent: () => options.idempotent === true,
    canResume: () => true,
  })
  return { service, runner, inputs, events, calls, upstream, shutdown }
}

/** A tools/call of `demo`'s `slow` tool as a client asks it as a task. */
export function taskRequest (upstream: Upstream, principal = 'alice'): CreateTaskRequest {
  return {
    principal,
    sessionId: 'session-1',
    era: '2025-11-25',
    route: { upstream, target: 'slow', entry: undefined, taskSupport: 'optional', nativeTaskSupport: undefined },
    params: { name: 'demo__slow', arguments: { seconds: 60 } },
    requestedTtl: undefined,
    progressToken: undefined,
    clientCapabilities: { elicitation: {} },
  }
}

export const DONE: JsonObject = { content: [{ type: 'text', text: 'done' }] }
