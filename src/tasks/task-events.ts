import type { JsonObject } from '../wire/jsonrpc.ts'
import type { InputRecord, TaskRecord } from '../store/types.ts'

/**
 * What the task engine tells the protocol side, which renders it in the dialect of the task's era and
 * sends it to the right stream. The engine never sees a wire shape.
 */
export interface TaskEvents {
  /** The task was stored (the protocol side answers its creator itself; others may watch). */
  created? (task: TaskRecord): void
  /** The task's status or statusMessage changed (it is already stored). */
  status (task: TaskRecord): void
  /** The upstream asked the client something; the input is stored as pending. */
  input (task: TaskRecord, input: InputRecord): void
  /** An input stopped being pending (answered or expired). */
  inputSettled (task: TaskRecord, key: string): void
  /** The upstream reported progress on the task's call. */
  progress (task: TaskRecord, progress: JsonObject): void
  /** Any other notification the upstream sent during the task's call (e.g. log messages). */
  notification (task: TaskRecord, method: string, params: JsonObject): void
}
