import type { JsonObject } from '../../wire/jsonrpc.ts'
import { RUNNING_STATUSES, type TaskStatus } from '../../wire/task-state.ts'
import type { InputRecord, InputState, TaskOutcome, TaskRecord, TaskResume } from '../types.ts'
import { withRevisions } from '../stored-revision.ts'

/** A row of the `tasks` table: JSON columns hold the JSON text written; bigint columns read as numbers. */
export interface TaskRow {
  id: string
  principal: string
  session_id: string | null
  era: TaskRecord['era']
  status: TaskStatus
  status_message: string | null
  created_at: number
  last_updated_at: number
  ttl_ms: number | null
  expires_at: number | null
  poll_interval_ms: number
  upstream: string
  tool: string
  request: string
  progress_token: string | null
  client_capabilities: string
  outcome: string | null
  owner: string
  trace_context: string | null
  resume: string | null
  account: string
  bytes: number
}

/** The columns a task is inserted with, in this order ($1…$22). */
export const TASK_COLUMNS = [
  'id', 'principal', 'session_id', 'era', 'status', 'status_message', 'created_at', 'last_updated_at', 'ttl_ms', 'expires_at',
  'poll_interval_ms', 'upstream', 'tool', 'request', 'progress_token', 'client_capabilities', 'outcome', 'owner', 'trace_context',
  'resume', 'account', 'bytes',
] as const satisfies ReadonlyArray<keyof TaskRow>

/** The columns a task is read from (everything but its accounting). */
export const TASK_FIELDS = TASK_COLUMNS.slice(0, -2).join(', ')

/** The columns holding JSON text. */
const JSON_COLUMNS: ReadonlySet<string> = new Set(['request', 'progress_token', 'client_capabilities', 'outcome', 'resume'])

/**
 * A task read as one text column `t`: the JSON text of an array of TASK_FIELDS, the JSON columns in it as JSON
 * (the text written, kept as it is). The driver describes one column instead of twenty and hands its text over as
 * it is; the reader parses it with one JSON.parse (textToTask), where a row of columns costs a parser per column
 * and a parse per JSON column (the hot path of `tasks/get`).
 */
export const TASK_TEXT = `json_build_array(${TASK_FIELDS.split(', ').map((c) => JSON_COLUMNS.has(c) ? `${c}::json` : c).join(', ')})::text AS t`

/** The array of TASK_TEXT, in TASK_FIELDS order. */
type TaskTuple = [
  string, string, string | null, TaskRecord['era'], TaskStatus, string | null, number, number, number | null, number | null, number,
  string, string, JsonObject, string | number | null, JsonObject, TaskOutcome | null, string, string | null, TaskResume | null,
]

/** The task of a TASK_TEXT value, or null when it has passed its TTL at `now` (epoch ms), as live() says in SQL. */
export function textToTask (text: string, now: number): TaskRecord | null {
  const [id, principal, sessionId, era, status, statusMessage, createdAt, lastUpdatedAt, ttlMs, expiresAt, pollIntervalMs, upstream, tool,
    request, progressToken, clientCapabilities, outcome, owner, traceContext, resume] = JSON.parse(text) as TaskTuple
  if (expiresAt !== null && expiresAt <= now) return null
  // A process of the previous version may have written the previous names of the eras (stored-revision.ts).
  return withRevisions({
    id,
    principal,
    sessionId,
    era,
    status,
    statusMessage,
    createdAt,
    lastUpdatedAt,
    ttlMs,
    pollIntervalMs,
    upstream,
    tool,
    request,
    progressToken,
    clientCapabilities,
    outcome,
    owner,
    traceContext,
    resume,
  })
}

/** A set of statuses as SQL text, written once from task-state.ts (constants, so the planner uses the indexes). */
function sqlList (statuses: readonly string[]): string {
  return statuses.map((status) => `'${status.replaceAll("'", "''")}'`).join(', ')
}

/** The running (not terminal) statuses, as task-state.ts's table says, as an SQL list. */
export const RUNNING = sqlList(RUNNING_STATUSES)
/** The task is running. */
export const ACTIVE = `status IN (${RUNNING})`
/** The task has not passed its TTL at the parameter `$n` (epoch ms). */
export function live (n: number): string {
  return `(expires_at IS NULL OR expires_at > $${n})`
}

function json (value: unknown): string | null {
  return value === null ? null : JSON.stringify(value)
}

export function toTask (row: TaskRow): TaskRecord {
  return withRevisions({
    id: row.id,
    principal: row.principal,
    sessionId: row.session_id,
    era: row.era,
    status: row.status,
    statusMessage: row.status_message,
    createdAt: row.created_at,
    lastUpdatedAt: row.last_updated_at,
    ttlMs: row.ttl_ms,
    pollIntervalMs: row.poll_interval_ms,
    upstream: row.upstream,
    tool: row.tool,
    request: JSON.parse(row.request) as JsonObject,
    progressToken: row.progress_token === null ? null : JSON.parse(row.progress_token) as string | number,
    clientCapabilities: JSON.parse(row.client_capabilities) as JsonObject,
    outcome: row.outcome === null ? null : JSON.parse(row.outcome) as TaskOutcome,
    owner: row.owner,
    traceContext: row.trace_context,
    resume: row.resume === null ? null : JSON.parse(row.resume) as TaskResume,
  })
}

/** The insert values of a new task (TASK_COLUMNS order), with the bytes it stores as stored-bytes.ts measures them. */
export function taskValues (task: TaskRecord, account: string): { values: unknown[], bytes: number } {
  const request = JSON.stringify(task.request)
  const capabilities = JSON.stringify(task.clientCapabilities)
  const outcome = json(task.outcome)
  const bytes = Buffer.byteLength(request) + Buffer.byteLength(capabilities) + (outcome === null ? 0 : Buffer.byteLength(outcome))
  const values = [
    task.id, task.principal, task.sessionId, task.era, task.status, task.statusMessage, task.createdAt, task.lastUpdatedAt,
    task.ttlMs, task.ttlMs === null ? null : task.createdAt + task.ttlMs, task.pollIntervalMs, task.upstream, task.tool, request,
    json(task.progressToken), capabilities, outcome, task.owner, task.traceContext, json(task.resume), account, bytes,
  ]
  return { values, bytes }
}

/** A row of the `task_inputs` table. */
export interface InputRow {
  key: string
  task_id: string
  principal: string
  method: string
  params: string
  state: InputState
  created_at: number
  answer: string | null
  /** JSON: the upstream's request id keeps its type (a number or a string). */
  upstream_request_id: string | null
}

export function toInput (row: InputRow): InputRecord {
  const input: InputRecord = {
    key: row.key,
    taskId: row.task_id,
    principal: row.principal,
    method: row.method,
    params: JSON.parse(row.params) as JsonObject,
    state: row.state,
    createdAt: row.created_at,
    answer: row.answer === null ? null : JSON.parse(row.answer) as TaskOutcome,
  }
  if (row.upstream_request_id !== null) input.upstreamRequestId = JSON.parse(row.upstream_request_id) as string | number
  return input
}

export { json }
