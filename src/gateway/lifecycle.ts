import { setImmediate as nextTurn, setTimeout as delay } from 'node:timers/promises'
import { describeCollisions } from '../catalog/catalog-view.ts'
import { GatewayError } from '../errors.ts'
import type { GatewayJobs } from './background-jobs.ts'
import type { GatewayCore } from './core-wiring.ts'
import type { GatewayFront } from './http-wiring.ts'
import { settled } from '../observability/ignored.ts'

/** How often the drain looks whether the requests and tasks in flight have finished. */
const DRAIN_POLL_MS = 25

/** One step of the shutdown, named in the debug log as it runs. */
export interface ShutdownStep {
  readonly name: string
  run (): void | Promise<void>
}

/** What the shutdown stops and closes of the core. */
export type ShutdownParts = Pick<GatewayCore,
  'live' | 'log' | 'store' | 'ownsStore' | 'shutdown' | 'inflight' | 'runner' | 'tasks' | 'lease' | 'peers' | 'hub' | 'upstreams' |
  'unsubscribes' | 'tracing'>

/**
 * Starts every upstream's first connect in the background (the gateway can listen, and answer /healthz, at
 * once) and says when they are all done: see Gateway.ready.
 */
export function startUpstreams (core: Pick<GatewayCore, 'sync' | 'upstreams' | 'catalog'>): Promise<void> {
  const { sync, upstreams, catalog } = core
  sync.started()
  for (const upstream of upstreams) void upstream.start()
  const ready = catalog.start().then((startView) => {
    if (startView.collisions.length > 0) throw new GatewayError('GW_ERR_CATALOG_COLLISION', [describeCollisions(startView.collisions)])
  })
  // Whoever awaits `ready` hears a collision; nobody awaiting it is no unhandled rejection.
  void settled(ready)
  return ready
}

/**
 * Waits, up to `server.shutdownGrace` (read now: a reload may have changed it), for the requests and tasks in
 * flight to finish; says so in the log when some are still running.
 */
async function drainInFlight (core: ShutdownParts): Promise<void> {
  const { live, inflight, runner, log } = core
  const deadline = Date.now() + live.config.server.shutdownGrace
  const busy = (): number => inflight.size + runner.size
  while (busy() > 0 && Date.now() < deadline) await delay(DRAIN_POLL_MS)
  if (busy() > 0) log.warn({ requests: inflight.size, tasks: runner.size }, 'shutdown grace over: cancelling in-flight requests and tasks')
}

/**
 * Stops the running tasks `which` picks, and those still waiting for a call slot (never sent), and leaves them to
 * the other processes, or to the next process on the store (see TaskRunner.handOver, ProcessLease.handOver).
 * Nothing is handed over in a store that ends with the process (memory): nobody could go on with it.
 */
async function handOver (core: ShutdownParts, which: Parameters<GatewayCore['runner']['handOver']>[0]): Promise<void> {
  if (!core.store.durable) return
  await core.lease.handOver(await core.runner.handOver(which))
}

/**
 * The shutdown order. Each step may still use what the steps after it close, never what the steps before it did:
 *
 * - New requests are refused first, so what the drain waits for can only shrink.
 * - The sweepers stop next: none starts ending sessions or deleting tasks while the gateway drains, and one
 *   already running finishes while the store is open.
 * - Tasks whose upstream task another process can reach, and tasks still waiting for a call slot (nothing of them
 *   was sent), are handed over at once (durable stores): they go on, or start, elsewhere or in the next process on
 *   the store, and the grace never waits for a slot this process would free. Requests and tasks in flight get the grace; then tasks of
 *   idempotent tools, and those that became resumable meanwhile, are handed over (run again or resumed
 *   elsewhere), what is left is cancelled, held 2026-07-28 calls are dropped, and the runner settles, leaving
 *   every task of this process terminal or handed over.
 * - Only then is the task lease given up: a process that takes over after that finds nothing left running here.
 * - Client homes are given up, so those clients' next requests find a live home; then the requests other
 *   processes forwarded here are aborted and those this process forwarded are rejected.
 * - Streams close one turn of the event loop later, so what the cancellations wrote reaches them first; then
 *   the listeners close (main, then admin).
 * - Upstreams still draining after a reload, then the bus subscriptions and the upstreams close; the store
 *   closes after everything that used it (a store passed in is its giver's to close).
 * - Tracing flushes last, with the spans of everything above.
 */
export function shutdownSteps (core: ShutdownParts, front: GatewayFront, jobs: GatewayJobs): ShutdownStep[] {
  const { shutdown, runner, peers, hub, upstreams, store, tracing } = core
  const { app, admin, reloader, held } = front
  return [
    { name: 'refuse new requests', run: () => front.drain() },
    { name: 'stop the sweepers', run: async () => { await Promise.all([jobs.sessionSweep.stop(), jobs.taskSweep.stop()]) } },
    { name: 'hand resumable and queued tasks over', run: () => handOver(core, (_task, resumable) => resumable) },
    { name: 'let requests and tasks in flight finish', run: () => drainInFlight(core) },
    // Again those that became resumable meanwhile (their upstream task was created during the grace).
    { name: 'hand resumable and idempotent tasks over', run: () => handOver(core, (task, resumable) => resumable || core.tasks.idempotent(task)) },
    {
      name: 'cancel what is left',
      run: async () => {
        shutdown.abort(new GatewayError('GW_ERR_SHUTTING_DOWN'))
        held.close(new GatewayError('GW_ERR_SHUTTING_DOWN'))
        await runner.settled()
      },
    },
    { name: 'give up the task lease', run: () => jobs.lease.stop() },
    { name: 'give up client homes', run: () => jobs.homes.stop() },
    { name: 'stop answering peers', run: () => peers.close() },
    { name: 'close streams', run: async () => { await nextTurn(); hub.closeAll() } },
    { name: 'close the listener', run: () => app.close() },
    { name: 'close the admin listener', run: async () => { await admin?.close() } },
    { name: 'close upstreams left by a reload', run: () => reloader.close() },
    { name: 'end bus subscriptions', run: () => { for (const unsubscribe of core.unsubscribes) unsubscribe() } },
    { name: 'close upstreams', run: async () => { await Promise.all(upstreams.map((upstream) => upstream.close())) } },
    { name: 'close the store', run: async () => { if (core.ownsStore) await store.close() } },
    { name: 'flush traces', run: async () => { await tracing?.close() } },
  ]
}

/**
 * Runs the steps in order, once: later calls get the same promise. A step that fails does not stop the ones
 * after it (a listener that will not close must not keep the store open or the traces unflushed): each failure
 * is logged with its step as it happens, and once every step has run the promise rejects with
 * GW_ERR_SHUTDOWN_INCOMPLETE naming them all, its cause an AggregateError of the failures.
 */
export function closeOnce (steps: readonly ShutdownStep[], log: GatewayCore['log']): () => Promise<void> {
  let closed: Promise<void> | undefined
  return () => {
    closed ??= (async () => {
      const failed: Array<{ step: string, err: unknown }> = []
      for (const step of steps) {
        log.debug({ step: step.name }, 'shutdown step')
        try {
          await step.run()
        } catch (err) {
          log.error({ err, step: step.name }, 'shutdown step failed; the next steps still run')
          failed.push({ step: step.name, err })
        }
      }
      if (failed.length > 0) {
        throw new GatewayError('GW_ERR_SHUTDOWN_INCOMPLETE', [failed.length, failed.map((f) => `'${f.step}'`).join(', ')], {
          cause: new AggregateError(failed.map((f) => f.err), 'shutdown steps failed'),
        })
      }
    })()
    return closed
  }
}
