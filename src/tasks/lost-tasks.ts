import { GatewayError } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import { BUS, publishOn } from '../store/bus-channels.ts'
import type { DataLossWatch, StoreLoss } from '../store/data-loss.ts'
import type { SignalBus, TaskRecord } from '../store/types.ts'
import { toWireError } from '../wire/error-replies.ts'
import type { TaskEvents } from './task-events.ts'
import { ignoreWithTrace } from '../observability/ignored.ts'
import { announceStatus } from './task-moves.ts'

/** Task ids remembered (known, then lost): bounded, the least recently seen go first. */
const MAX_REMEMBERED = 10_000

export interface LostTasksDeps {
  /** The store's watch for losses; undefined where the store cannot be emptied under the gateway. */
  watch: DataLossWatch | undefined
  /** The tasks whose upstream calls run in this process now. */
  running: () => TaskRecord[]
  events: TaskEvents
  bus: SignalBus
  log: Logger
}

/**
 * The tasks a store lost, as far as this process can tell. It remembers the ids (and principals) of the tasks
 * it created or was asked about, the most recent 10,000; when the store is found emptied (DataLossWatch), they
 * become lost: the loss is logged as an error with how many, the running ones end `failed` for their watchers
 * (GET streams, dashboards), every `tasks/result` waiting on one is woken, and `tasks/get` of a lost id answers
 * GW_ERR_TASK_LOST_BY_STORE instead of "not found". A remembered id that is missing makes the store check
 * itself at once (a loss is then found before the next lease renewal).
 */
export class LostTasks {
  readonly #deps: LostTasksDeps
  /** Id → principal, in order of last use. */
  readonly #known = new Map<string, string>()
  /** Id → principal and the reason it was lost. */
  readonly #lost = new Map<string, { principal: string, reason: string }>()

  constructor (deps: LostTasksDeps) {
    this.#deps = deps
    deps.watch?.onLoss((loss) => { this.#storeLost(loss) })
  }

  /** Remembers a task this process created, ran or showed (the store holds it now). */
  remember (task: TaskRecord): void {
    if (this.#deps.watch === undefined) return
    this.#known.delete(task.id)
    this.#known.set(task.id, task.principal)
    this.#lost.delete(task.id)
    trim(this.#known)
  }

  /**
   * The error for a task the store no longer holds: GW_ERR_TASK_LOST_BY_STORE when this process knew it (and
   * the store lost it), undefined otherwise (unknown, expired, or not the principal's: the caller says "not found").
   */
  async lostError (taskId: string, principal: string): Promise<GatewayError | undefined> {
    if (this.#known.get(taskId) === principal) {
      await this.#deps.watch?.check()
      // Still only known: it expired (or was never stored): nothing to remember it for.
      this.#known.delete(taskId)
    }
    const lost = this.#lost.get(taskId)
    if (lost === undefined || lost.principal !== principal) return undefined
    return new GatewayError('GW_ERR_TASK_LOST_BY_STORE', [taskId, lost.reason])
  }

  #storeLost (loss: StoreLoss): void {
    const { running, events, bus, log } = this.#deps
    const reason = `${loss.reason} (found at ${new Date(loss.at).toISOString()})`
    const runningHere = running()
    for (const task of runningHere) this.#known.set(task.id, task.principal)
    const lostIds = [...this.#known.keys()]
    for (const [id, principal] of this.#known) this.#lost.set(id, { principal, reason })
    this.#known.clear()
    trim(this.#lost)
    log.error({
      reason: loss.reason,
      lostTasks: lostIds.length,
      runningHere: runningHere.length,
      taskIds: lostIds.slice(0, 20),
    }, 'The store lost its data: the tasks and sessions it held are gone; lostTasks counts the ones this process knew. Outcomes of the tasks still running here are logged when they arrive. The gateway goes on serving with the emptied store')
    const error = new GatewayError('GW_ERR_TASK_LOST_BY_STORE', ['', reason])
    for (const task of runningHere) {
      const message = new GatewayError('GW_ERR_TASK_LOST_BY_STORE', [task.id, reason]).message
      // Shown to its watchers as failed: the store no longer holds it, and no outcome will be stored for it.
      announceStatus({ events, bus, log }, { ...task, status: 'failed', statusMessage: message, outcome: { error: { ...toWireError(error), message } }, lastUpdatedAt: loss.at })
    }
    // A tasks/result waiting on a task run elsewhere reads it again, and ends with the error above.
    const ran = new Set(runningHere.map((task) => task.id))
    const unsent = ignoreWithTrace(log, 'a wake-up for a task the store lost was not sent; its waiters find it gone when they next read it')
    for (const id of lostIds) if (!ran.has(id)) publishOn(bus, BUS.task, id, { type: 'status', status: 'failed' }).catch(unsent)
  }
}

function trim (map: Map<string, unknown>): void {
  while (map.size > MAX_REMEMBERED) map.delete(map.keys().next().value!)
}
