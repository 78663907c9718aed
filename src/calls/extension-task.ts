import { setTimeout as delay } from 'node:timers/promises'
import { ProtocolError, SdkError, SdkErrorCode } from '@modelcontextprotocol/client'
import { RpcError, isHandover } from '../errors.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import { TERMINAL_STATUSES } from '../wire/task-state.ts'
import { CLIENT_CAPABILITIES_KEY, TASKS_EXTENSION } from '../wire/versions.ts'
import { isInputMethod } from '../upstream/call-attribution.ts'
import type { InflightCall } from '../upstream/inflight-call.ts'
import type { SessionRequestOptions, UpstreamSession } from '../upstream/upstream-session.ts'
import { withInputRounds, withoutProgress, type CallOptions } from './input-rounds.ts'
import type { UpstreamTaskHooks } from './upstream-call.ts'
import { ignoreWithTrace, settled } from '../observability/ignored.ts'

/**
 * The upstream side of the 2026-07-28 tasks extension, whole: a tools/call that declares the extension may be
 * answered with a task of the upstream's own (`resultType: "task"`), which is kept out of the SDK's sight as it
 * arrives (catchCreatedTask) and followed with `tasks/get` until it ends (followTask). The upstream lists what it
 * asks for in `inputRequests`; the answers go back with `tasks/update`.
 */

/** The poll interval when the upstream names none, and the bounds put on the one it names. */
const DEFAULT_POLL_MS = 1000
const MIN_POLL_MS = 10
const MAX_POLL_MS = 10_000
/** How long the upstream is given to acknowledge a `tasks/cancel` (nobody waits for it). */
const CANCEL_TIMEOUT_MS = 10_000
/** How often an answer is sent with `tasks/update` when the upstream cannot be reached, and the first wait between. */
const UPDATE_ATTEMPTS = 3
const UPDATE_BACKOFF_MS = 500

export type FollowOptions = Omit<SessionRequestOptions, 'call' | 'onprogress'> & { signal: AbortSignal }

/** `params` of a 2026-07-28 request that declares the tasks extension besides the session's own capabilities (for that request only). */
export function declaringTasks (session: UpstreamSession, params: JsonObject): JsonObject {
  const own = session.capabilities as JsonObject
  const capabilities = { ...own, extensions: { ...(own.extensions as JsonObject | undefined), [TASKS_EXTENSION]: {} } }
  return { ...params, _meta: { ...(params._meta as JsonObject | undefined), [CLIENT_CAPABILITIES_KEY]: capabilities } }
}

/** Whether the upstream refused a call because the call did not declare the tasks extension (-32021): it runs the tool only as a task. */
export function needsTasks (err: unknown): boolean {
  if (!(err instanceof ProtocolError) || err.code !== -32021) return false
  const required = (err.data as { requiredCapabilities?: { extensions?: JsonObject } } | undefined)?.requiredCapabilities
  return required?.extensions?.[TASKS_EXTENSION] !== undefined
}

/** Errors that say the upstream no longer knows a task it created (it answered `-32602` about it). */
const lostTasks = new WeakSet<Error>()

/** Whether `err`, or an error it was caused by, says the upstream no longer knows the task a call followed. */
export function isLostTask (err: unknown): boolean {
  let current = err
  for (let depth = 0; depth < 4 && current instanceof Error; depth++) {
    if (lostTasks.has(current)) return true
    current = current.cause
  }
  return false
}

function lostTask (taskId: string, err: ProtocolError): Error {
  const lost = new Error(`it no longer knows its task '${taskId}' (${err.message})`, { cause: err })
  lostTasks.add(lost)
  return lost
}

/** The task a 2026-07-28 upstream answered a call with, caught as it arrived. */
interface CaughtTask {
  /** The task (its CreateTaskResult), if one came; the call's results are no longer screened from then on. */
  take (): JsonObject | undefined
}

/**
 * Screens the results of `call`'s requests for a task of the upstream's own (`resultType: "task"`), which the SDK
 * refuses to take: the task is kept for the call, and the SDK is handed an empty complete result in its place.
 * A task answering any other request (a prompts/get, a poll, a request of no call) is left to the SDK, which
 * refuses it.
 */
function catchCreatedTask (call: InflightCall): CaughtTask {
  let caught: JsonObject | undefined
  call.screenResults((result) => {
    if (result.resultType !== 'task') return result
    caught = result
    return { resultType: 'complete', content: [] }
  })
  return {
    take: () => {
      call.screenResults(undefined)
      return caught
    },
  }
}

/**
 * A tools/call of a 2026-07-28 upstream. When the upstream offers the tasks extension, a task's call that another
 * process may resume declares it, so that the upstream may run the call as a task of its own; any other call (a
 * held one too) declares it only after the upstream refused the call for the lack of it (-32021: the tool runs
 * only as a task).
 * When the upstream answers with a task (even one it should not have sent), the call follows it to its end.
 */
export async function modernToolCall (
  session: UpstreamSession,
  call: InflightCall,
  params: JsonObject,
  options: CallOptions,
  task: UpstreamTaskHooks | undefined,
): Promise<JsonObject> {
  const declare = task?.resumable === true && task.held !== true && session.offersTasks
  const caught = catchCreatedTask(call)
  let result: JsonObject
  try {
    try {
      result = await withInputRounds(session, call, 'tools/call', declare ? declaringTasks(session, params) : params, options)
    } catch (err) {
      if (declare || !needsTasks(err)) throw err
      result = await withInputRounds(session, call, 'tools/call', declaringTasks(session, params), options)
    }
  } catch (err) {
    // The upstream created its task as the call was given up (cancelled, timed out): nobody else would end it.
    const orphan = caught.take()?.taskId
    if (typeof orphan === 'string' && !isHandover(options.signal.reason)) cancelTask(session, orphan)
    throw err
  }
  const created = caught.take()
  if (created === undefined) return result
  if (typeof created.taskId !== 'string') throw new Error('it answered with a task without a taskId')
  const upstreamTaskId = created.taskId
  await task?.created?.(upstreamTaskId, task.resumable ? session.address() : undefined)
  return await followTask(session, call, upstreamTaskId, created, withoutProgress(options), task !== undefined && task.held !== true)
}

/** Asks the upstream to cancel its task; nobody waits for the answer. */
export function cancelTask (session: UpstreamSession, taskId: string): void {
  session.request('tasks/cancel', declaringTasks(session, { taskId }), { timeout: CANCEL_TIMEOUT_MS })
    .catch(ignoreWithTrace(session.log, 'the upstream did not acknowledge tasks/cancel; its task ends on its own ttl', { upstreamTaskId: taskId }))
}

function pollInterval (task: JsonObject): number {
  const named = task.pollIntervalMs
  return typeof named === 'number' && Number.isFinite(named) ? Math.min(MAX_POLL_MS, Math.max(MIN_POLL_MS, named)) : DEFAULT_POLL_MS
}

/**
 * What the upstream's ended task gives the call: its result (as the upstream's plain result would be), or its
 * error. Errors other than the task's own JSON-RPC error name what went wrong; the call engine names the upstream.
 */
function outcomeOf (taskId: string, task: JsonObject): JsonObject {
  if (task.status === 'completed') {
    if (task.result === null || typeof task.result !== 'object') throw new Error(`its task '${taskId}' completed without a result`)
    const { resultType: _type, ...result } = task.result as JsonObject
    return result
  }
  if (task.status === 'failed') {
    const error = (task.error ?? {}) as { code?: unknown, message?: unknown, data?: unknown }
    if (typeof error.code === 'number') throw new RpcError(error.code, String(error.message ?? ''), error.data)
    throw new Error(`its task '${taskId}' failed without a JSON-RPC error`)
  }
  throw new Error(`it cancelled its task '${taskId}'`)
}

/**
 * Follows the upstream's task `taskId` for `call` until it ends, and returns its result (or throws its error):
 * polls `tasks/get` at the upstream's `pollIntervalMs`, relays each input request the task lists to the call's
 * client once, under the upstream's own key (so that a process resuming the task finds the answers already
 * given), and sends each answer with `tasks/update` (again, after a failure to send it). `seed` is the task as
 * created, when this process created it. With `mirror`, a new statusMessage is told to the call (a gateway task
 * shows it). A cancel goes upstream as `tasks/cancel`; a handover to another process does not. The call's
 * timeout bounds the whole wait. Input requests still waiting for the client when the task ends are given up.
 */
export async function followTask (
  session: UpstreamSession,
  call: InflightCall,
  taskId: string,
  seed: JsonObject | undefined,
  options: FollowOptions,
  mirror: boolean,
): Promise<JsonObject> {
  call.follows(taskId)
  const { signal } = options
  const request = async (method: string, params: JsonObject): Promise<JsonObject> => {
    try {
      return await session.request(method, declaringTasks(session, { taskId, ...params }), { ...options, call })
    } catch (err) {
      throw err instanceof ProtocolError && err.code === -32602 ? lostTask(taskId, err) : err
    }
  }
  // Handed over: another process follows the task now.
  const onAbort = (): void => { if (!isHandover(signal.reason)) cancelTask(session, taskId) }
  signal.addEventListener('abort', onAbort, { once: true })
  if (signal.aborted) onAbort()
  // Ends the relays (the task ended, or an input failed) and wakes the poll loop early.
  const stop = new AbortController()
  const wake = AbortSignal.any([signal, stop.signal])
  let failure: unknown
  const update = async (key: string, answer: JsonObject): Promise<void> => {
    for (let attempt = 1; ; attempt++) {
      try {
        await request('tasks/update', { inputResponses: { [key]: answer } })
        return
      } catch (err) {
        // An upstream that refused the answer would refuse it again; one that could not be reached may take it now.
        if (attempt >= UPDATE_ATTEMPTS || wake.aborted || err instanceof ProtocolError || isLostTask(err)) throw err
        await delay(attempt * UPDATE_BACKOFF_MS, undefined, { signal: wake })
      }
    }
  }
  const relay = async (key: string, input: JsonObject): Promise<void> => {
    const method = String(input.method)
    if (!isInputMethod(method)) throw new Error(`its task asked for '${method}', which is not an input request`)
    await update(key, await call.ask(method, (input.params ?? {}) as JsonObject, wake, key))
  }
  const asked = new Set<string>()
  const deadline = Date.now() + options.timeout
  let message: unknown
  let ended = false
  try {
    let task = seed ?? await request('tasks/get', {})
    for (;;) {
      ended = (TERMINAL_STATUSES as readonly unknown[]).includes(task.status)
      if (ended) return outcomeOf(taskId, task)
      for (const [key, input] of Object.entries((task.inputRequests ?? {}) as Record<string, JsonObject>)) {
        if (asked.has(key)) continue
        asked.add(key)
        relay(key, input).catch((err: unknown) => {
          if (wake.aborted) return
          failure = err
          stop.abort(err)
        })
      }
      if (mirror && typeof task.statusMessage === 'string' && task.statusMessage !== message) {
        message = task.statusMessage
        call.taskStatus({ taskId, status: String(task.status), statusMessage: task.statusMessage })
      }
      if (Date.now() >= deadline) throw new SdkError(SdkErrorCode.RequestTimeout, `the upstream's task '${taskId}' did not end in time`)
      // Cut short by a wake-up or an abort (the wait rejects): what follows looks at which.
      await settled(delay(Math.min(pollInterval(task), deadline - Date.now()), undefined, { signal: wake }))
      signal.throwIfAborted()
      if (failure !== undefined) throw failure
      task = await request('tasks/get', {})
    }
  } catch (err) {
    // The client could not answer, or the wait ran out: the upstream's task is of no use to anyone now.
    if (!ended && !signal.aborted) cancelTask(session, taskId)
    throw err
  } finally {
    signal.removeEventListener('abort', onAbort)
    stop.abort(new Error('the upstream task ended'))
  }
}
