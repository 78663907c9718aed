import { GatewayError } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import { BUS, publishOn, subscribeTo } from '../store/bus-channels.ts'
import type { LeaseStore, SignalBus, TaskRecord } from '../store/types.ts'
import { handoverOwner, type TakeoverTally, type TaskService } from './task-service.ts'

export interface ProcessLeaseDeps {
  /** This gateway process. */
  processId: string
  leases: LeaseStore
  bus: SignalBus
  tasks: TaskService
  /** Whether other gateway processes may share the store (only then can one of them be lost). */
  shared: boolean
  /** How long a lease lasts without renewal. */
  leaseMs: number
  log: Logger
  /** Told what was done with the unfinished tasks of a lost process after taking them over. */
  onTakeover?: (taken: TakeoverTally) => void
}

/**
 * This process's lease on the tasks it runs. It is renewed every third of the lease time. Every fifth
 * of the lease time the process looks for processes whose lease lapsed and takes over their unfinished
 * tasks, so those are terminal (or running again) within leaseMs + leaseMs/5 of the last renewal.
 *
 * After Redis was unreachable, every process's lease may have lapsed at once: a process takes over
 * nothing until it has held Redis for half a lease, by which time every live process has renewed.
 */
export class ProcessLease {
  readonly #deps: ProcessLeaseDeps
  #renewer: NodeJS.Timeout | undefined
  #scanner: NodeJS.Timeout | undefined
  /** Since when renewals have succeeded without a failure in between; undefined while they fail. */
  #healthySince: number | undefined
  #scanning = false
  #stopped = false
  #unsubscribe: (() => void) | undefined

  constructor (deps: ProcessLeaseDeps) {
    this.#deps = deps
  }

  /** Takes the lease; with a store no other process uses, takes over what a previous run left unfinished. */
  async start (): Promise<void> {
    const deps = this.#deps
    await deps.leases.renew(deps.processId, Date.now() + deps.leaseMs)
    this.#healthySince = Date.now()
    if (!deps.shared) {
      await deps.tasks.recover().catch((err: unknown) => {
        // A store that takes no writes (a disk too full) still serves what it holds; the tasks wait for the next start.
        if (!(err instanceof GatewayError && err.code === 'GW_ERR_STORE_UNAVAILABLE')) throw err
        deps.log.error({ err }, 'the tasks a previous run left unfinished cannot be taken over while the store refuses writes; the next start takes them over')
      })
      return
    }
    this.#unsubscribe = subscribeTo(deps.bus, BUS.takeover, undefined, () => { void this.scan() })
    this.#renewer = setInterval(() => { void this.#renew() }, Math.floor(deps.leaseMs / 3))
    this.#renewer.unref()
    this.#scanner = setInterval(() => { void this.scan() }, Math.floor(deps.leaseMs / 5))
    this.#scanner.unref()
  }

  /** Takes over the tasks of every lost process (also run on a timer). */
  async scan (): Promise<void> {
    const { processId, leases, tasks, leaseMs, log } = this.#deps
    const now = Date.now()
    if (this.#scanning || this.#stopped || this.#healthySince === undefined || now - this.#healthySince < leaseMs / 2) return
    this.#scanning = true
    try {
      for (const owner of await leases.lapsed(now)) {
        if (owner === processId || owner === handoverOwner(processId)) continue
        // Taken over first, told after: an optional call would skip evaluating its argument when nobody listens.
        const taken = await tasks.adoptOrphans(owner)
        this.#deps.onTakeover?.(taken)
        await leases.release(owner)
      }
    } catch (err) {
      log.warn({ err }, 'could not take over the tasks of a lost gateway process; trying again')
    } finally {
      this.#scanning = false
    }
  }

  async #renew (): Promise<void> {
    const { processId, leases, leaseMs, log } = this.#deps
    try {
      await leases.renew(processId, Date.now() + leaseMs)
      this.#healthySince ??= Date.now()
    } catch (err) {
      if (this.#healthySince !== undefined) log.warn({ err }, 'could not renew this process\'s task lease')
      this.#healthySince = undefined
    }
  }

  /**
   * Leaves tasks whose calls this process stopped as it shuts down to the others (see TaskService.handOver): with
   * a shared store they go to an owner whose lease has lapsed, and the other processes are told to take them over
   * now. Returns how many were handed over.
   */
  async handOver (tasks: readonly TaskRecord[]): Promise<number> {
    const { processId, leases, bus, shared } = this.#deps
    if (tasks.length === 0) return 0
    if (!shared) return await this.#deps.tasks.handOver(tasks, undefined)
    const to = handoverOwner(processId)
    const handed = await this.#deps.tasks.handOver(tasks, to)
    await leases.renew(to, Date.now())
    // The others take the tasks over now rather than at their next scan.
    await publishOn(bus, BUS.takeover, undefined, { from: processId })
    return handed
  }

  /** Stops renewing and gives the lease up (every task of this process is terminal or handed over by then). */
  async stop (): Promise<void> {
    this.#stopped = true
    this.#unsubscribe?.()
    clearInterval(this.#renewer)
    clearInterval(this.#scanner)
    await this.#deps.leases.release(this.#deps.processId).catch(() => {})
  }
}
