import { GatewayError } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import { BUS, publishOn, subscribeTo } from '../store/bus-channels.ts'
import type { LeaseStore, SignalBus, TaskRecord, TaskStore } from '../store/types.ts'
import type { TaskRunner } from './task-runner.ts'
import { ignoreWithTrace } from '../observability/ignored.ts'
import { handoverOwner, type TakeoverTally, type TaskService } from './task-service.ts'

export interface ProcessLeaseDeps {
  /** This gateway process. */
  processId: string
  leases: LeaseStore
  bus: SignalBus
  tasks: TaskService
  /** Where the owners of the tasks this process runs are read, after its lease lapsed. */
  store: Pick<TaskStore, 'ownerOf'>
  /** Runs this process's tasks: stops those another process took over while this one was paused. */
  runner: Pick<TaskRunner, 'running' | 'standDown'>
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
 *
 * A renewal that comes after the lease ran out (the process was paused: SIGSTOP, a long GC pause, a frozen VM;
 * or cut off from the store) first stands down: the runs of tasks another process took over meanwhile stop
 * without writing (the store refuses their writes anyway: TaskPatch.asOwner). With a store only this process
 * uses (SQLite), the same check runs when the lease timer fires late: another process may have taken the file.
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
  /** When the lease this process last renewed runs out (epoch ms). */
  #leaseUntil = 0

  constructor (deps: ProcessLeaseDeps) {
    this.#deps = deps
  }

  /** Takes the lease; with a store no other process uses, takes over what a previous run left unfinished. */
  async start (): Promise<void> {
    const deps = this.#deps
    this.#leaseUntil = Date.now() + deps.leaseMs
    await deps.leases.renew(deps.processId, this.#leaseUntil)
    this.#healthySince = Date.now()
    this.#renewer = setInterval(() => { void this.#renew() }, Math.floor(deps.leaseMs / 3))
    this.#renewer.unref()
    if (!deps.shared) {
      await deps.tasks.recover().catch((err: unknown) => {
        // A store that takes no writes (a disk too full) still serves what it holds; the tasks wait for the next start.
        if (!(err instanceof GatewayError && err.code === 'GW_ERR_STORE_UNAVAILABLE')) throw err
        deps.log.error({ err }, 'the tasks a previous run left unfinished cannot be taken over while the store refuses writes; the next start takes them over')
      })
      return
    }
    this.#unsubscribe = subscribeTo(deps.bus, BUS.takeover, undefined, () => { void this.scan() })
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
    const now = Date.now()
    const lapsedAt = this.#leaseUntil
    let released = false
    try {
      // A lapsed lease that is no longer listed as lapsed was released by the process that took this one's tasks over.
      if (now > lapsedAt && this.#deps.shared) released = !(await leases.lapsed(now)).includes(processId)
      await leases.renew(processId, now + leaseMs)
      this.#leaseUntil = now + leaseMs
      this.#healthySince ??= Date.now()
    } catch (err) {
      if (this.#healthySince !== undefined) log.warn({ err }, 'could not renew this process\'s task lease')
      this.#healthySince = undefined
      return
    }
    if (now > lapsedAt) await this.#standDown(now - lapsedAt, released)
  }

  /**
   * Stops the runs of the tasks another process took over while this process's lease had lapsed (`lapsedMs` ago);
   * `released`: another process took this one over (its runs may have ended already, on refused writes or signals).
   */
  async #standDown (lapsedMs: number, released: boolean): Promise<void> {
    const { store, runner, processId, log, shared } = this.#deps
    const running = runner.running
    try {
      const owners = new Map<string, string | null>()
      for (const task of running) owners.set(task.id, await store.ownerOf(task.id, Date.now()))
      const stopped = runner.standDown(owners)
      const takenBy = [...new Set([...owners.values()].filter((owner) => owner !== null && owner !== processId))]
      const about = { lapsedMs, stopped, running: running.length, takenBy }
      // Without a shared store nothing says whether another process took the file: a stall past the lease is reported as a loss.
      if (released || stopped > 0 || !shared) {
        log.error(about, 'this gateway process lost its lease (paused, or cut off from the store, past tasks.ownerLease): standing down from the tasks other processes took over')
      } else {
        log.warn(about, 'this gateway process renewed its lease after it had lapsed (paused, or cut off from the store), before another process took its tasks over')
      }
    } catch (err) {
      log.error({ err, lapsedMs }, 'this gateway process lost its lease, and could not read which of its tasks were taken over; their writes are refused')
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
    await this.#deps.leases.release(this.#deps.processId).catch(ignoreWithTrace(this.#deps.log, 'could not give the task lease up in the store; it lapses after tasks.ownerLease'))
  }
}
