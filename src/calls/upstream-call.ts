import type { RequestOptions } from '@modelcontextprotocol/client'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import type { UpstreamConnection } from '../upstream/upstream-connection.ts'

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
 * One upstream tools/call on an exclusive connection, returning the upstream's result untouched.
 *
 * A tool the upstream itself only runs as a task (`taskSupport: required`) is called as an upstream
 * task: create it, then wait on the upstream's blocking `tasks/result`, whose stream also carries the
 * upstream's input requests (they reach the connection's handlers like any other). A cancel is passed
 * on as `tasks/cancel`. The caller never sees the upstream's task.
 */
export async function callUpstreamTool (connection: UpstreamConnection, params: JsonObject, nativeTask: boolean, options: RequestOptions & { signal: AbortSignal }): Promise<JsonObject> {
  if (!nativeTask) return await connection.request('tools/call', params, options)
  const { onprogress: _progress, ...plain } = options
  const created = await connection.request('tools/call', { ...params, task: { ttl: UPSTREAM_TASK_TTL_MS } }, plain)
  const upstreamTaskId = (created.task as JsonObject | undefined)?.taskId
  if (typeof upstreamTaskId !== 'string') return created
  const cancelUpstream = (): void => {
    void connection.request('tasks/cancel', { taskId: upstreamTaskId }, { timeout: 10_000 }).catch(() => {})
  }
  options.signal.addEventListener('abort', cancelUpstream, { once: true })
  try {
    return withoutRelatedTask(await connection.request('tasks/result', { taskId: upstreamTaskId }, plain))
  } finally {
    options.signal.removeEventListener('abort', cancelUpstream)
  }
}
