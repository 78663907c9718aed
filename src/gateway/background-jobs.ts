import type { ClientHomes } from '../cluster/client-homes.ts'
import type { Logger } from '../observability/logger.ts'
import type { GatewayCore } from './core-wiring.ts'

/** Work the gateway does on a timer, apart from any request. */
export interface BackgroundJob {
  /** Starts its timers. They are unref'd: a job never keeps the process alive on its own. */
  start (): void | Promise<void>
  /** Stops its timers; settles once nothing it started still runs (what it touches may then be closed). */
  stop (): Promise<void>
}

export interface IntervalJobOptions {
  /** Named in the warning logged when a run fails (`<name> failed`). */
  name: string
  everyMs: number
  run (): Promise<void>
  log: Logger
}

/**
 * Runs a piece of work every `everyMs`. A run still going when the next is due makes that one skip: two
 * sweeps of the same rows at once would only race each other.
 */
export class IntervalJob implements BackgroundJob {
  readonly #options: IntervalJobOptions
  #timer: NodeJS.Timeout | undefined
  #running: Promise<void> | undefined

  constructor (options: IntervalJobOptions) {
    this.#options = options
  }

  start (): void {
    this.#timer ??= setInterval(() => { this.#tick() }, this.#options.everyMs).unref()
  }

  async stop (): Promise<void> {
    clearInterval(this.#timer)
    this.#timer = undefined
    await this.#running
  }

  #tick (): void {
    if (this.#running !== undefined) return
    const { name, run, log } = this.#options
    this.#running = run()
      .catch((err: unknown) => log.warn({ err }, `${name} failed`))
      .finally(() => { this.#running = undefined })
  }
}

/** The gateway's background jobs, stopped at different points of the shutdown (see shutdownSteps). */
export interface GatewayJobs {
  /** Ends the sessions idle past `server.sessionIdleTimeout`. */
  readonly sessionSweep: IntervalJob
  /** Deletes the tasks whose ttl is over, every `tasks.sweepInterval`. */
  readonly taskSweep: IntervalJob
  /** Renews this process's lease on its tasks and takes over those of lost processes (see ProcessLease). */
  readonly lease: BackgroundJob
  /** Renews the homes of the clients whose upstream sessions this process holds (see ClientHomes). */
  readonly homes: BackgroundJob
}

/** Sweeps often enough that a session outlives its idle timeout by a quarter at most, within 1 s to 1 min. */
export function sessionSweepInterval (idleTimeoutMs: number): number {
  return Math.min(60_000, Math.max(1000, Math.floor(idleTimeoutMs / 4)))
}

export function gatewayJobs (core: Pick<GatewayCore, 'config' | 'store' | 'tasks' | 'sessionEnd' | 'log' | 'lease' | 'homes'>): GatewayJobs {
  const { config, store, tasks, sessionEnd, log } = core
  const idleTimeout = config.server.sessionIdleTimeout
  const sessionSweep = new IntervalJob({
    name: 'session sweep',
    everyMs: sessionSweepInterval(idleTimeout),
    log,
    run: async () => {
      const ids = await store.sessions.sweep(Date.now() - idleTimeout)
      const released = sessionEnd.expired(ids)
      if (ids.length > 0) log.info({ count: ids.length }, 'expired idle sessions')
      await released
    },
  })
  const taskSweep = new IntervalJob({
    name: 'task sweep',
    everyMs: config.tasks.sweepInterval,
    log,
    run: async () => {
      const count = await tasks.sweep()
      if (count > 0) log.info({ count }, 'deleted expired tasks')
      // Grants that renew upstream tokens for resumed work (store/grant-vault.ts) expire on the same beat.
      const grants = await store.grants.sweep(Date.now())
      if (grants > 0) log.info({ count: grants }, 'deleted expired upstream grants')
    },
  })
  return { sessionSweep, taskSweep, lease: core.lease, homes: homeRenewal(core.homes) }
}

/**
 * Starts every job. The lease comes first and is awaited: on a store no other process shares, starting it
 * takes over what a previous run left unfinished, before any sweep deletes a task.
 */
export async function startJobs (jobs: GatewayJobs): Promise<void> {
  await jobs.lease.start()
  await jobs.homes.start()
  jobs.sessionSweep.start()
  jobs.taskSweep.start()
}

/** ClientHomes renews from the moment it is built (a request may claim a home first); stopping gives every home up. */
function homeRenewal (homes: ClientHomes): BackgroundJob {
  return {
    start: () => {},
    stop: async () => { await homes.close() },
  }
}
