import { GatewayError } from '../errors.ts'
import type { TaskRecord } from './types.ts'

/**
 * What the stores count against an account's budget of stored bytes (limits.storedBytesPerPrincipal, see
 * TaskCreateOptions.maxStoredBytes): the UTF-8 bytes of the JSON of each part a client or an upstream decides
 * the size of. Every store measures with these functions, so that a budget means the same on each.
 */

/** The UTF-8 bytes of `value` as JSON. */
export function jsonBytes (value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value))
}

/** What a new task stores: its request (dropped when the task ends) and, with its client capabilities, in all. */
export function taskBytes (task: Pick<TaskRecord, 'request' | 'clientCapabilities' | 'outcome'>): { request: number, total: number } {
  const request = jsonBytes(task.request)
  return { request, total: request + jsonBytes(task.clientCapabilities) + (task.outcome === null ? 0 : jsonBytes(task.outcome)) }
}

/**
 * The refusal of a write that would take an account past its budget, or undefined when it fits. A write that
 * adds nothing (or frees bytes) always fits, so that a task can always end.
 */
export function overBudget (stored: number, adding: number, max: number | undefined): GatewayError | undefined {
  if (max === undefined || adding <= 0 || stored + adding <= max) return undefined
  return new GatewayError('GW_ERR_STORED_BYTES_LIMIT', [stored, adding, max])
}

/** The bytes a session stores for its whole life: its client capabilities and client info. */
export function sessionBytes (session: { clientCapabilities: unknown, clientInfo: unknown }): number {
  return jsonBytes(session.clientCapabilities) + jsonBytes(session.clientInfo)
}

/** The bytes of each account, in a Map (the stores that keep them in the process: memory). */
export class AccountBytes {
  readonly #bytes = new Map<string, number>()

  of (account: string): number {
    return this.#bytes.get(account) ?? 0
  }

  /** Adds `bytes` (negative: takes them off) to the account's count. */
  add (account: string, bytes: number): void {
    const total = this.of(account) + bytes
    if (total > 0) this.#bytes.set(account, total)
    else this.#bytes.delete(account)
  }
}
