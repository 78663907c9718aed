import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import type { Logger } from '../../src/observability/logger.ts'
import { MemoryBus } from '../../src/store/memory/memory-bus.ts'
import { MemoryLeaseStore } from '../../src/store/memory/memory-store.ts'
import type { TaskRecord } from '../../src/store/types.ts'
import { ProcessLease } from '../../src/tasks/process-lease.ts'
import type { TaskService } from '../../src/tasks/task-service.ts'
import { task } from '../contract/task-records.ts'

const LEASE_MS = 3000

/** What the lease logged, by level. */
interface Logged { warn: string[], error: string[] }

type Owners = ReadonlyMap<string, string | null>

/** The lease, what it logged, and the owners it gave the runner's stand-down each time. */
interface Watched { lease: ProcessLease, logged: Logged, stopped: Owners[] }

/**
 * Process `a`'s lease on a shared store, running `running`, whose owners the store gives as `owners`; the clock is
 * faked, so a pause is a jump of the clock followed by the renewal timer firing late.
 */
function leaseOf (leases: MemoryLeaseStore, running: TaskRecord[], owners: Map<string, string | null>): Watched {
  const logged: Logged = { warn: [], error: [] }
  const log = {
    warn: (_: unknown, msg: string) => logged.warn.push(msg),
    error: (_: unknown, msg: string) => logged.error.push(msg),
    info: () => {},
  } as unknown as Logger
  const stopped: Owners[] = []
  const lease = new ProcessLease({
    processId: 'a',
    leases,
    bus: new MemoryBus(),
    tasks: { adoptOrphans: async () => ({ resumed: 0, rerun: 0, started: 0, failed: 0 }) } as unknown as TaskService,
    store: { ownerOf: async (id: string) => owners.get(id) ?? null },
    runner: {
      running,
      standDown: (map) => {
        stopped.push(map)
        return [...map.entries()].filter(([id, owner]) => owner !== running.find((t) => t.id === id)?.owner).length
      },
    },
    shared: true,
    leaseMs: LEASE_MS,
    log,
  })
  return { lease, logged, stopped }
}

/** The process is paused for `ms` (the clock moves on, no timer fires), then runs its overdue renewal. */
async function pause (ms: number): Promise<void> {
  vi.setSystemTime(Date.now() + ms)
  await vi.advanceTimersByTimeAsync(LEASE_MS / 3)
}

describe('the lease of a process paused past it', () => {
  beforeEach(() => { vi.useFakeTimers() })
  afterEach(() => { vi.useRealTimers() })

  it('stands down from the tasks another process took over, and says at error that it lost its lease', async () => {
    const leases = new MemoryLeaseStore()
    const mine = task({ owner: 'a' })
    const taken = task({ owner: 'a' })
    const { lease, logged, stopped } = leaseOf(leases, [mine, taken], new Map([[mine.id, 'a'], [taken.id, 'b']]))
    await lease.start()
    await vi.advanceTimersByTimeAsync(LEASE_MS)
    expect(logged).toEqual({ warn: [], error: [] })
    // Process b takes the tasks over and releases a's lapsed lease meanwhile.
    vi.setSystemTime(Date.now() + 2 * LEASE_MS)
    await leases.release('a')
    await pause(0)
    expect(stopped).toEqual([new Map([[mine.id, 'a'], [taken.id, 'b']])])
    expect(logged.error).toEqual([expect.stringContaining('lost its lease')])
    expect(await leases.alive('a', Date.now())).toBe(true)
    await lease.stop()
  })

  it('only warns when it renews a lapsed lease before any process took its tasks over', async () => {
    const leases = new MemoryLeaseStore()
    const mine = task({ owner: 'a' })
    const { lease, logged } = leaseOf(leases, [mine], new Map([[mine.id, 'a']]))
    await lease.start()
    await pause(2 * LEASE_MS)
    expect(logged.error).toEqual([])
    expect(logged.warn).toEqual([expect.stringContaining('renewed its lease after it had lapsed')])
    await lease.stop()
  })
})
