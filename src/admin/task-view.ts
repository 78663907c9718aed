import { GatewayError } from '../errors.ts'
import { logFingerprint, shownPrincipal } from '../observability/logger.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import type { InputRecord, TaskCursor, TaskEvent, TaskOutcome, TaskQuery, TaskRecord } from '../store/types.ts'
import { TASK_STATUSES, type TaskStatus } from '../wire/task-state.ts'

/** Tasks per page of `GET /admin/tasks` unless `limit` says otherwise, and the most one page may hold. */
export const DEFAULT_LIMIT = 50
export const MAX_LIMIT = 500

/** One task as the admin API lists it: who, what, where it runs and how far it got; never its arguments. */
export interface AdminTaskSummary {
  id: string
  /** As in the logs: `anonymous:sha256:<fingerprint of the session id>` for a session without auth (see shownPrincipal). */
  principal: string
  status: TaskStatus
  statusMessage: string | null
  upstream: string
  tool: string
  era: TaskRecord['era']
  /** ISO 8601 times. */
  createdAt: string
  lastUpdatedAt: string
  ttlMs: number | null
  /** The gateway process that runs (or last ran) the upstream call. */
  owner: string
  /** Bytes of the stored outcome (result or error) as JSON; null while there is none. */
  resultBytes: number | null
}

export interface AdminInput {
  key: string
  method: string
  params: JsonObject
  state: InputRecord['state']
  createdAt: string
  /** The client's answer as the upstream got it (`{ result }` or `{ error }`); null while pending or expired. */
  answer: TaskOutcome | null
}

export interface AdminTaskDetail extends AdminTaskSummary {
  /** The fingerprint of the legacy session that created the task, as in the logs; null for the 2026-07-28 era. */
  sessionId: string | null
  /** How the task ended: the upstream's result (with its isError) or a JSON-RPC error's code and message. */
  outcome: { kind: 'result', isError: boolean } | { kind: 'error', code: number, message: string } | null
  /** The input requests the upstream sent during the task, oldest first: pending, answered (with the answer) or expired. */
  inputs: AdminInput[]
  /**
   * What happened to the task, oldest first (the newest 100 entries): created (by which process), each
   * status move (its statusMessage, the process that made it, the result's size in bytes when it stored
   * one), each input request and how it was settled, takeovers by another process.
   */
  timeline: AdminTimelineEntry[]
}

/** A timeline entry with its time as ISO 8601 (each kind of entry keeps its own fields). */
export type AdminTimelineEntry = TaskEvent extends infer Entry ? Entry extends TaskEvent ? Omit<Entry, 'at'> & { at: string } : never : never

export interface TaskListRequest {
  query: TaskQuery
  before: TaskCursor | undefined
  limit: number
}

export function summarize (task: TaskRecord): AdminTaskSummary {
  return {
    id: task.id,
    principal: shownPrincipal(task.principal),
    status: task.status,
    statusMessage: task.statusMessage,
    upstream: task.upstream,
    tool: task.tool,
    era: task.era,
    createdAt: new Date(task.createdAt).toISOString(),
    lastUpdatedAt: new Date(task.lastUpdatedAt).toISOString(),
    ttlMs: task.ttlMs,
    owner: task.owner,
    resultBytes: task.outcome === null ? null : Buffer.byteLength(JSON.stringify(task.outcome), 'utf8'),
  }
}

export function detail (task: TaskRecord, inputs: readonly InputRecord[], timeline: readonly TaskEvent[]): AdminTaskDetail {
  const outcome = task.outcome
  return {
    ...summarize(task),
    sessionId: task.sessionId === null ? null : logFingerprint(task.sessionId),
    outcome: outcome === null
      ? null
      : 'result' in outcome
        ? { kind: 'result', isError: outcome.result['isError'] === true }
        : { kind: 'error', code: outcome.error.code, message: outcome.error.message },
    inputs: inputs.map((input) => ({
      key: input.key,
      method: input.method,
      params: input.params,
      state: input.state,
      createdAt: new Date(input.createdAt).toISOString(),
      answer: input.answer,
    })),
    timeline: timeline.map((entry) => ({ ...entry, at: new Date(entry.at).toISOString() }) as AdminTimelineEntry),
  }
}

/** The opaque `nextCursor` after `task`: its position in the list (createdAt, id). */
export function encodeCursor (task: TaskRecord): string {
  return Buffer.from(JSON.stringify([task.createdAt, task.id]), 'utf8').toString('base64url')
}

function decodeCursor (cursor: string): TaskCursor {
  let position: unknown
  try {
    position = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
  } catch (err) {
    throw badCursor(err)
  }
  if (Array.isArray(position) && position.length === 2 && Number.isSafeInteger(position[0]) && typeof position[1] === 'string') {
    return { createdAt: position[0] as number, id: position[1] }
  }
  throw badCursor()
}

function badCursor (cause?: unknown): GatewayError {
  return new GatewayError('GW_ERR_ADMIN_BAD_REQUEST', ['cursor is not a nextCursor of an earlier page; start again without it'], { cause })
}

function single (raw: Record<string, unknown>, name: string): string | undefined {
  const value = raw[name]
  if (value === undefined) return undefined
  if (typeof value !== 'string' || value === '') throw new GatewayError('GW_ERR_ADMIN_BAD_REQUEST', [`${name} must be given once, not empty`])
  return value
}

const KNOWN = new Set(['status', 'upstream', 'tool', 'principal', 'limit', 'cursor'])

/** Reads `status`, `upstream`, `tool`, `principal`, `limit` and `cursor`; an unknown or malformed one is a 400 naming it. */
export function parseTaskList (raw: Record<string, unknown>): TaskListRequest {
  const unknown = Object.keys(raw).filter((name) => !KNOWN.has(name))
  if (unknown.length > 0) throw new GatewayError('GW_ERR_ADMIN_BAD_REQUEST', [`unknown query parameter(s) ${unknown.join(', ')}; use ${[...KNOWN].join(', ')}`])
  const status = single(raw, 'status')
  if (status !== undefined && !TASK_STATUSES.includes(status as TaskStatus)) {
    throw new GatewayError('GW_ERR_ADMIN_BAD_REQUEST', [`status '${status}' is not one of ${TASK_STATUSES.join(', ')}`])
  }
  const limitText = single(raw, 'limit')
  const limit = limitText === undefined ? DEFAULT_LIMIT : Number(limitText)
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) throw new GatewayError('GW_ERR_ADMIN_BAD_REQUEST', [`limit must be an integer from 1 to ${MAX_LIMIT}, got '${limitText}'`])
  const query: TaskQuery = {}
  if (status !== undefined) query.status = status as TaskStatus
  for (const name of ['upstream', 'tool', 'principal'] as const) {
    const value = single(raw, name)
    if (value !== undefined) query[name] = value
  }
  if (query.principal?.startsWith('anonymous:sha256:') === true) {
    throw new GatewayError('GW_ERR_ADMIN_BAD_REQUEST', ['principal: a caller without auth is one session, shown by its fingerprint, which cannot be searched for; find its tasks by status, upstream or tool, or open one by id'])
  }
  const cursor = single(raw, 'cursor')
  return { query, before: cursor === undefined ? undefined : decodeCursor(cursor), limit }
}
