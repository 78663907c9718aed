import Database from 'better-sqlite3'
import { GatewayError } from '../../errors.ts'
import type { JsonObject } from '../../wire/jsonrpc.ts'
import type { TaskStatus } from '../../wire/task-state.ts'
import type { TaskOutcome, TaskRecord, TaskResume } from '../types.ts'

/** A row of the `tasks` table: JSON columns hold JSON text. */
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
  /** Whom the task's limits count under (TaskCreateOptions.account) and the bytes it stores: never part of the record. */
  account: string
  bytes: number
}

export function json (value: unknown): string | null {
  return value === null ? null : JSON.stringify(value)
}

export function toTask (row: TaskRow): TaskRecord {
  return {
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
  }
}

export function toRow (task: TaskRecord): TaskRow {
  return {
    id: task.id,
    principal: task.principal,
    session_id: task.sessionId,
    era: task.era,
    status: task.status,
    status_message: task.statusMessage,
    created_at: task.createdAt,
    last_updated_at: task.lastUpdatedAt,
    ttl_ms: task.ttlMs,
    expires_at: task.ttlMs === null ? null : task.createdAt + task.ttlMs,
    poll_interval_ms: task.pollIntervalMs,
    upstream: task.upstream,
    tool: task.tool,
    request: JSON.stringify(task.request),
    progress_token: json(task.progressToken),
    client_capabilities: JSON.stringify(task.clientCapabilities),
    outcome: json(task.outcome),
    owner: task.owner,
    trace_context: task.traceContext,
    resume: json(task.resume),
    account: task.principal,
    bytes: 0,
  }
}

/** The size of the text a task record is read from. */
export function rowBytes (row: TaskRow): number {
  return row.request.length + row.client_capabilities.length + (row.outcome?.length ?? 0) + (row.status_message?.length ?? 0) +
    (row.resume?.length ?? 0)
}

/** A backend failure as callers get it: GW_ERR_STORE_UNAVAILABLE (its message stays in `cause`); the gateway's own errors as they are. */
export function backendError (err: unknown): GatewayError {
  if (err instanceof GatewayError) return err
  const what = err instanceof Database.SqliteError ? err.code : 'unexpected failure'
  return new GatewayError('GW_ERR_STORE_UNAVAILABLE', [what], { cause: err })
}

/** Runs synchronous SQLite work; a failure is thrown as backendError says. */
export function backend<T> (work: () => T): T {
  try {
    return work()
  } catch (err) {
    throw backendError(err)
  }
}
