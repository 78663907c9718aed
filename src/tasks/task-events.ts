import type { JsonObject } from '../wire/jsonrpc.ts'
import type { InputRecord, TaskRecord } from '../store/types.ts'

/**
 * What the task engine tells the protocol side, which renders it in the dialect of the task's era and
 * sends it to the right stream. The engine never sees a wire shape.
 */
export interface TaskEvents {
  /** The task was stored (the protocol side answers its creator itself; others may watch). */
  created? (task: TaskRecord): void
  /**
   * The task moved (its status, its statusMessage or its record changed; it is already stored). Told by moveTask
   * with every move, together with the wake-up on the bus: the protocol side renders it, it wakes nobody.
   */
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
