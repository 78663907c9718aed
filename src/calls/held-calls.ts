import type { Caller } from '../auth/access.ts'
import type { HeldExchanges } from '../auth/held-exchanges.ts'
import { GatewayError } from '../errors.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import type { InputMethod } from '../upstream/call-attribution.ts'
import { randomId } from '../wire/random-id.ts'

/** What a modern client gets back from one leg of a call: the result, or the input it must provide. */
export type HeldOutcome =
  | { kind: 'result', result: JsonObject }
  | { kind: 'input', callId: string, inputRequests: JsonObject }
  /** Still running after the decision window (or, in a taskOnly window, ended): the caller may turn it into a task (see detach). */
  | { kind: 'running', callId: string }

/**
 * The decision window of a call that may become a task: after `ms` a leg ends early as `running`. With `taskOnly`
 * (a tool that runs only as a task) a call that ends on its own within the window is reported as `running`
 * too, so that it still becomes a task; input it asks for meanwhile still comes back as `input` first. With
 * `inputMakesTask` (not with taskOnly) a call that asks for input within the window is reported as `running`,
 * and the input goes to whoever the call is handed over to (detach).
 */
export interface DecisionWindow {
  ms: number
  taskOnly: boolean
  inputMakesTask: boolean
}

/** A held call handed over to something else (a task), which now owns its outcome and its input. */
export interface DetachedCall {
  done: Promise<JsonObject>
  cancel (reason: unknown): void
}

/** How long a round waits for further input requests after the first one. */
const INPUT_BATCH_MS = 25

interface PendingInput {
  method: InputMethod
  params: JsonObject
  signal: AbortSignal
  upstreamRequestId: string | number | undefined
  resolve (result: JsonObject): void
  reject (reason: unknown): void
}

interface HeldCall {
  id: string
  principal: string
  pending: Map<string, PendingInput>
  final: { result: JsonObject } | { error: unknown } | undefined
  wake: (() => void) | undefined
  abort: AbortController
  expiry: NodeJS.Timeout | undefined
  /** Each leg may end early as `running` once its window has passed (see DecisionWindow). */
  window: DecisionWindow | undefined
  /** When the upstream request went out (a connection was leased); the first leg's window starts there. */
  sentAt: number | undefined
  done: Promise<JsonObject> | undefined
  /** Where input goes once the call was detached. */
  detached: HeldInput | undefined
  /** Ends the call's hold on the credential that started it (see HeldExchanges). */
  release: () => void
}

/**
 * Asks the client something on behalf of a held call; resolves with the client's answer. `upstreamRequestId`: the
 * upstream's own id for the request, which a task keeps so that another process can answer it.
 */
export type HeldInput = (
  method: InputMethod,
  params: JsonObject,
  signal: AbortSignal,
  upstreamRequestId?: string | number,
) => Promise<JsonObject>

/**
 * Waits until the call has news (`wake`), the client stops waiting, or the deadline passes; then removes
 * what it listened with. A listener left on the request's signal would keep the call (its outcome, the
 * error's stack and what that holds: the upstream request and its arguments) for as long as the signal
 * lives, and a signal combined from others with a listener on it lives until it aborts: maybe never.
 */
async function wakeOrAbort (call: HeldCall, signal: AbortSignal, deadline: number | undefined): Promise<void> {
  await new Promise<void>((resolve) => {
    const timer = deadline === undefined ? undefined : setTimeout(wake, deadline - Date.now())
    function wake (): void {
      clearTimeout(timer)
      signal.removeEventListener('abort', wake)
      call.wake = undefined
      resolve()
    }
    call.wake = wake
    signal.addEventListener('abort', wake, { once: true })
  })
}

/**
 * Synchronous calls of modern (2026-07-28) clients, which cannot receive server→client requests. When the
 * upstream asks for input, the call is held open upstream and the client gets `input_required` with the
 * requests; its retry (carrying the answers and the call's requestState) resumes the same upstream
 * call. A call not resumed within the hold time is cancelled upstream.
 */
export class HeldCalls {
  readonly #calls = new Map<string, HeldCall>()
  readonly #holdMs: number
  readonly #forgotten: Array<(callId: string) => void> = []
  readonly #exchanges: HeldExchanges | undefined
  /** Calls ended because their credential was revoked, for the hold time: a retry is told why. */
  readonly #revoked = new Map<string, { principal: string, err: GatewayError, timer: NodeJS.Timeout }>()

  /** With `exchanges`, a call lasts only as long as the credential that started it (revocation, OAuth `exp`). */
  constructor (holdMs: number, exchanges?: HeldExchanges) {
    this.#holdMs = holdMs
    this.#exchanges = exchanges
  }

  get size (): number {
    return this.#calls.size
  }

  /** Tells `listener` of every call no longer held (finished, handed over, expired, closed), to forget what it kept for it. */
  onForget (listener: (callId: string) => void): void {
    this.#forgotten.push(listener)
  }

  /** Starts a call for `caller`; answers when it finishes or first needs input. */
  async start (
    principal: string,
    caller: Caller,
    run: (input: HeldInput, signal: AbortSignal, fail: (error: unknown) => void, sent: () => void) => Promise<JsonObject>,
    signal: AbortSignal,
    window?: DecisionWindow,
  ): Promise<HeldOutcome> {
    const call: HeldCall = {
      id: randomId(),
      principal,
      pending: new Map(),
      final: undefined,
      wake: undefined,
      abort: new AbortController(),
      expiry: undefined,
      // A copy: an end the gateway forces (fail, revocation) turns taskOnly off for this call alone.
      window: window && { ...window },
      sentAt: undefined,
      done: undefined,
      detached: undefined,
      release: () => {},
    }
    this.#calls.set(call.id, call)
    if (this.#exchanges !== undefined) call.release = this.#exchanges.hold(caller, (err) => { this.#end(call, err) })
    const onAbort = (): void => call.abort.abort(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    const input: HeldInput = (method, params, inputSignal, upstreamRequestId) => call.detached
      ? call.detached(method, params, inputSignal, upstreamRequestId)
      : new Promise<JsonObject>((resolve, reject) => {
        const key = `${method.split('/')[0]}-${randomId(6)}`
        const onAbort = (): void => {
          if (call.pending.delete(key)) reject(inputSignal.reason)
        }
        call.pending.set(key, {
          method,
          params,
          signal: inputSignal,
          upstreamRequestId,
          resolve: (answer) => {
            inputSignal.removeEventListener('abort', onAbort)
            resolve(answer)
          },
          reject: (reason) => {
            inputSignal.removeEventListener('abort', onAbort)
            reject(reason)
          },
        })
        inputSignal.addEventListener('abort', onAbort, { once: true })
        call.wake?.()
      })
    const fail = (error: unknown): void => {
      if (call.final !== undefined) return
      // The client must get this error itself (e.g. -32021 for a capability it lacks), not a task failed with it.
      if (call.window) Object.assign(call.window, { taskOnly: false, inputMakesTask: false })
      call.final = { error }
      call.abort.abort(error)
      call.wake?.()
    }
    const sent = (): void => {
      call.sentAt ??= Date.now()
      call.wake?.()
    }
    call.done = run(input, call.abort.signal, fail, sent)
    call.done.then(
      (result) => { call.final ??= { result } },
      (error: unknown) => { call.final ??= { error } },
    ).finally(() => {
      signal.removeEventListener('abort', onAbort)
      call.wake?.()
    })
    return await this.#next(call, signal)
  }

  /** Hands a `running` call over: its outcome, the input it waits for and any further input now belong to the new owner. */
  detach (callId: string, input: HeldInput): DetachedCall {
    const call = this.#calls.get(callId)
    if (!call?.done) throw new GatewayError('GW_ERR_INTERNAL', ['no running call to hand over'])
    this.#forget(call)
    call.detached = input
    for (const pending of call.pending.values()) {
      input(pending.method, pending.params, pending.signal, pending.upstreamRequestId).then(pending.resolve, pending.reject)
    }
    call.pending.clear()
    return { done: call.done, cancel: (reason) => call.abort.abort(reason) }
  }

  /** Delivers a retry's answers (unknown keys are ignored) and answers with the next outcome. */
  async resume (callId: string, principal: string, responses: JsonObject, signal: AbortSignal): Promise<HeldOutcome> {
    const call = this.#calls.get(callId)
    const revoked = this.#revoked.get(callId)
    if (!call && revoked?.principal === principal) throw revoked.err
    if (!call || call.principal !== principal) throw new GatewayError('GW_ERR_REQUEST_STATE_INVALID', ['names no call that is waiting for you (it finished, expired or was never yours)'])
    clearTimeout(call.expiry)
    for (const [key, answer] of Object.entries(responses)) {
      const pending = call.pending.get(key)
      if (!pending || answer === null || typeof answer !== 'object') continue
      call.pending.delete(key)
      pending.resolve(answer as JsonObject)
    }
    return await this.#next(call, signal)
  }

  /** Cancels every held call (shutdown). */
  close (reason: unknown): void {
    for (const call of this.#calls.values()) {
      this.#forget(call)
      call.abort.abort(reason)
    }
    for (const { timer } of this.#revoked.values()) clearTimeout(timer)
    this.#revoked.clear()
  }

  /** A running call its caller could not hand over (the task was refused, e.g. by the task limit): cancelled upstream. */
  abandon (callId: string, reason: unknown): void {
    const call = this.#calls.get(callId)
    if (call === undefined || call.detached !== undefined) return
    this.#forget(call)
    call.abort.abort(reason)
  }

  /**
   * The credential that started the call was revoked or has expired: the call is cancelled upstream, a leg
   * waiting on it is answered with `err`, and so is a retry within the hold time.
   */
  #end (call: HeldCall, err: GatewayError): void {
    if (!this.#calls.has(call.id)) return
    this.#forget(call)
    const timer = setTimeout(() => this.#revoked.delete(call.id), this.#holdMs)
    timer.unref()
    this.#revoked.set(call.id, { principal: call.principal, err, timer })
    if (call.window) Object.assign(call.window, { taskOnly: false, inputMakesTask: false })
    call.final = { error: err }
    call.abort.abort(err)
    // Input asked for and not yet answered is not offered again: the leg answers with the error.
    call.pending.clear()
    call.wake?.()
  }

  /**
   * Waits until the call finishes, or holds input nobody has been shown yet; then reports it. When the
   * client stops waiting (`signal`), the call stays held for a later retry, for the hold time.
   */
  async #next (call: HeldCall, signal: AbortSignal): Promise<HeldOutcome> {
    const entered = Date.now()
    // Waiting for an upstream connection does not count: the window measures the upstream's work.
    const deadlineOf = (): number | undefined =>
      call.window === undefined || call.sentAt === undefined ? undefined : Math.max(entered, call.sentAt) + call.window.ms
    while (call.final === undefined && call.pending.size === 0) {
      const deadline = deadlineOf()
      if (signal.aborted) {
        this.#hold(call)
        throw signal.reason
      }
      if (deadline !== undefined && Date.now() >= deadline) return { kind: 'running', callId: call.id }
      await wakeOrAbort(call, signal, deadline)
    }
    // Upstream requests sent together (they may arrive a few milliseconds apart) go out in the same round.
    if (call.final === undefined) await new Promise((resolve) => setTimeout(resolve, INPUT_BATCH_MS))
    else await new Promise((resolve) => setImmediate(resolve))
    if (call.final !== undefined && call.pending.size === 0) {
      // Kept (not forgotten) for the caller, which hands it over with detach.
      if (call.window?.taskOnly === true) return { kind: 'running', callId: call.id }
      this.#forget(call)
      if ('error' in call.final) throw call.final.error
      return { kind: 'result', result: call.final.result }
    }
    // The input waits for the owner the call is handed over to (detach), not for a retry.
    if (call.final === undefined && call.window?.inputMakesTask === true) return { kind: 'running', callId: call.id }
    const inputRequests: JsonObject = {}
    for (const [key, pending] of call.pending) inputRequests[key] = { method: pending.method, params: pending.params }
    this.#hold(call)
    return { kind: 'input', callId: call.id, inputRequests }
  }

  /** Keeps the call for the client's next retry; a call not resumed within the hold time is cancelled. */
  #hold (call: HeldCall): void {
    clearTimeout(call.expiry)
    call.expiry = setTimeout(() => {
      this.#forget(call)
      call.abort.abort(new GatewayError('GW_ERR_REQUEST_CANCELLED', ['the client did not answer the input requests in time']))
    }, this.#holdMs)
    call.expiry.unref()
  }

  #forget (call: HeldCall): void {
    clearTimeout(call.expiry)
    call.release()
    if (!this.#calls.delete(call.id)) return
    for (const listener of this.#forgotten) listener(call.id)
  }
}
