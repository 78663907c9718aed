import { isHandover } from '../errors.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import type { InflightCall } from '../upstream/inflight-call.ts'
import type { SessionAddress, UpstreamSession } from '../upstream/upstream-session.ts'
import type { TaskResume } from '../store/types.ts'
import { followTask, modernToolCall } from './extension-task.ts'
import { withInputRounds, withoutProgress, type CallOptions } from './input-rounds.ts'
import { ignoreWithTrace } from '../observability/ignored.ts'

const RELATED_TASK = 'io.modelcontextprotocol/related-task'
/** Retention asked of an upstream for its own task when we run a native task tool. */
const UPSTREAM_TASK_TTL_MS = 24 * 60 * 60 * 1000

function withoutRelatedTask (result: JsonObject): JsonObject {
  const meta = result._meta as JsonObject | undefined
  if (!meta || !(RELATED_TASK in meta)) return result
  const { [RELATED_TASK]: _dropped, ...rest } = meta
  return Object.keys(rest).length > 0 ? { ...result, _meta: rest } : Object.fromEntries(Object.entries(result).filter(([k]) => k !== '_meta'))
}

/**
 * The options of a task's plain call with a hook that tells the task, once, where the call's response stream
 * can be replayed from: only a 2025-11-25 upstream session with an id can replay a stream to another process.
 */
function withStreamHook (session: UpstreamSession, options: CallOptions, task: UpstreamTaskHooks | undefined): CallOptions {
  const streamed = task?.streamed
  if (streamed === undefined || !task!.resumable) return options
  const address = session.address()
  if (address === undefined || address.sessionId === null || address.era !== '2025-11-25') return options
  let told = false
  return Object.assign({}, options, {
    onResumptionToken: (token: string) => {
      if (told) return
      told = true
      streamed(token, address)
    },
  })
}

/** How a task's call is tied to the upstream work another process could reach again (see TaskRunner). */
export interface UpstreamTaskHooks {
  /**
   * The upstream work an earlier run started (another gateway process): the upstream task whose result is waited
   * for, or the call stream that is replayed. No tool is called.
   */
  existing?: TaskResume
  /** Whether the upstream work may be reached from another process (only then are `created` and `streamed` told). */
  resumable: boolean
  /**
   * A 2026-07-28 client's call that is not a task (yet): its client is not told the upstream task's status
   * messages, which would name a task it does not know; and a 2026-07-28 upstream is not offered the tasks
   * extension up front, since an upstream may make every call that declares it a task, polled at its interval: a
   * quick call would no longer be answered within the decision window.
   */
  held?: boolean
  /** Told where the new upstream task is; awaited before its result is waited for. */
  created? (upstreamTaskId: string, address: SessionAddress | undefined): Promise<void>
  /** A plain call's response stream can be replayed from `resumptionToken` (told once, for its first event). */
  streamed? (resumptionToken: string, address: SessionAddress): void
  /** With `existing`: the session it was rejoined on, before its result is waited for (answers still owed go on it). */
  rejoined? (session: UpstreamSession): void
}

/**
 * Waits on the upstream's blocking `tasks/result` for its task, whose stream also carries the upstream's input
 * requests (they name the upstream task, so they reach this call). A cancel is passed on as `tasks/cancel`;
 * a handover to another process is not.
 */
async function upstreamTaskResult (session: UpstreamSession, call: InflightCall, upstreamTaskId: string, options: Omit<CallOptions, 'onprogress'>): Promise<JsonObject> {
  call.follows(upstreamTaskId)
  const cancelUpstream = (): void => {
    // Handed over: another process waits for the upstream task now, on the same upstream session.
    if (isHandover(options.signal.reason)) return
    session.request('tasks/cancel', { taskId: upstreamTaskId }, { timeout: 10_000 })
      .catch(ignoreWithTrace(session.log, 'the upstream did not acknowledge tasks/cancel; its task ends on its own ttl', { upstreamTaskId }))
  }
  options.signal.addEventListener('abort', cancelUpstream, { once: true })
  try {
    return withoutRelatedTask(await session.request('tasks/result', { taskId: upstreamTaskId }, { ...options, call }))
  } finally {
    options.signal.removeEventListener('abort', cancelUpstream)
  }
}

/**
 * One upstream tools/call or prompts/get of `call` on its client's session, returning the upstream's
 * result untouched.
 *
 * A tool called `native` is called as an upstream task: create it (or, with `task.existing`, take the one an
 * earlier run created), then wait for its result (upstreamTaskResult). A 2026-07-28 upstream decides itself
 * whether a call becomes its task (modernToolCall). The caller never sees the upstream's task.
 */
export async function callUpstream (
  session: UpstreamSession,
  call: InflightCall,
  method: 'tools/call' | 'prompts/get',
  params: JsonObject,
  native: boolean,
  options: CallOptions,
  task?: UpstreamTaskHooks,
): Promise<JsonObject> {
  // A task's call handed over to another process leaves its upstream session open and its upstream work running.
  const onHandover = task === undefined
    ? undefined
    : (): void => {
        if (!isHandover(options.signal.reason)) return
        call.handOver()
        session.keepUpstream()
      }
  if (onHandover !== undefined) options.signal.addEventListener('abort', onHandover, { once: true })
  try {
    const existing = task?.existing
    if (existing?.kind === 'native' && existing.era === '2026-07-28') return await followTask(session, call, existing.upstreamTaskId, undefined, withoutProgress(options), true)
    if (existing !== undefined) {
      task!.rejoined?.(session)
      if (existing.kind === 'stream') return await session.request(method, params, Object.assign({}, options, { call, resumptionToken: existing.resumptionToken }))
      return await upstreamTaskResult(session, call, existing.upstreamTaskId, withoutProgress(options))
    }
    if (method === 'tools/call' && session.client.getProtocolEra?.() === 'modern') return await modernToolCall(session, call, params, options, task)
    if (method !== 'tools/call' || !native) return await withInputRounds(session, call, method, params, withStreamHook(session, options, task))
    const plain = withoutProgress(options)
    const created = await session.request('tools/call', { ...params, task: { ttl: UPSTREAM_TASK_TTL_MS } }, { ...plain, call })
    const upstreamTaskId = (created.task as JsonObject | undefined)?.taskId
    if (typeof upstreamTaskId !== 'string') return created
    await task?.created?.(upstreamTaskId, task.resumable ? session.address() : undefined)
    return await upstreamTaskResult(session, call, upstreamTaskId, plain)
  } finally {
    if (onHandover !== undefined) options.signal.removeEventListener('abort', onHandover)
  }
}
