import { randomUUID } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { GatewayStore, TaskOutcome, TaskRecord } from '../../src/store/types.ts'
import { input, T0, task } from './task-records.ts'

/** What a new task counts against its account: the UTF-8 JSON of its request and of its client capabilities. */
function bytesOf (record: TaskRecord): number {
  return Buffer.byteLength(JSON.stringify(record.request)) + Buffer.byteLength(JSON.stringify(record.clientCapabilities))
}

/** A task whose request carries `size` characters of arguments (ASCII: as many bytes). */
function sized (principal: string, size: number, overrides: Partial<TaskRecord> = {}): TaskRecord {
  return task({ principal, request: { arguments: { blob: 'x'.repeat(size) } }, clientCapabilities: {}, ...overrides })
}

function result (size: number): TaskOutcome {
  return { result: { content: [{ type: 'text', text: 'y'.repeat(size) }] } }
}

const overBudget = { code: 'GW_ERR_STORED_BYTES_LIMIT', message: expect.stringContaining('limits.storedBytesPerPrincipal') }

/**
 * The per-principal budget of stored bytes (limits.storedBytesPerPrincipal), kept by the store in the same
 * atomic step as the writes that add and remove bytes. `open` gives the stores of every process sharing one
 * backend (two for a shared one, so that racing creates also race between processes).
 */
export function storedBytesContract (name: string, open: () => Promise<GatewayStore[]>): void {
  describe(`store contract (stored bytes): ${name}`, () => {
    let stores: GatewayStore[]

    beforeEach(async () => {
      stores = await open()
    })

    afterEach(async () => {
      for (const store of stores.toReversed()) await store.close()
    })

    it('refuses a task that would take its principal past the budget, stores nothing of it, and leaves other principals alone', async () => {
      const store = stores[0]!.tasks
      const principal = `principal:${randomUUID()}`
      const first = sized(principal, 4000)
      const budget = bytesOf(first) * 2 + 100
      await store.create(first, { maxStoredBytes: budget })
      await store.create(sized(principal, 4000), { maxStoredBytes: budget })
      expect(await store.storedBytes(principal)).toBe(bytesOf(first) * 2)

      const third = sized(principal, 4000)
      await expect(store.create(third, { maxStoredBytes: budget })).rejects.toMatchObject(overBudget)
      expect(await store.get(third.id, T0)).toBeNull()
      expect(await store.storedBytes(principal)).toBe(bytesOf(first) * 2)
      // A small task still fits in what is left; another principal has a budget of its own.
      await store.create(sized(principal, 10), { maxStoredBytes: budget })
      const other = `principal:${randomUUID()}`
      await store.create(sized(other, 4000), { maxStoredBytes: budget })
      expect(await store.storedBytes(other)).toBe(bytesOf(first))
    })

    it('of many racing creates of one principal, only those that fit the budget are stored', async () => {
      const principal = `principal:${randomUUID()}`
      const each = bytesOf(sized(principal, 1000))
      const attempts = Array.from({ length: 40 }, (_, i) =>
        stores[i % stores.length]!.tasks.create(sized(principal, 1000), { maxStoredBytes: each * 5 }))
      const settled = await Promise.allSettled(attempts)
      expect(settled.filter((s) => s.status === 'fulfilled')).toHaveLength(5)
      for (const failure of settled.filter((s) => s.status === 'rejected')) expect(failure.reason).toMatchObject(overBudget)
      expect(await stores[0]!.tasks.storedBytes(principal)).toBe(each * 5)
    })

    it('a task that ends gives back its request and counts its outcome; an outcome over the budget is refused and changes nothing', async () => {
      const store = stores[0]!.tasks
      const principal = `principal:${randomUUID()}`
      const running = sized(principal, 5000)
      const budget = bytesOf(running) + 3000
      await store.create(running, { maxStoredBytes: budget })

      const big = result(budget)
      await expect(store.transition(running.id, ['working'], 'completed', { outcome: big, maxStoredBytes: budget }, T0 + 1)).rejects.toMatchObject(overBudget)
      expect(await store.get(running.id, T0 + 1)).toMatchObject({ status: 'working', outcome: null, request: running.request })
      expect(await store.storedBytes(principal)).toBe(bytesOf(running))

      // The request's bytes are freed by the same move: an outcome larger than what was left still fits.
      const fits = result(6000)
      const ended = await store.transition(running.id, ['working'], 'completed', { outcome: fits, maxStoredBytes: budget }, T0 + 2)
      expect(ended).toMatchObject({ status: 'completed', outcome: fits })
      const outcomeBytes = Buffer.byteLength(JSON.stringify(fits))
      expect(await store.storedBytes(principal)).toBe(bytesOf(running) - Buffer.byteLength(JSON.stringify(running.request)) + outcomeBytes)
    })

    it('an ending that stores nothing is never refused, whatever the budget', async () => {
      const store = stores[0]!.tasks
      const principal = `principal:${randomUUID()}`
      const running = sized(principal, 100)
      await store.create(running)
      expect(await store.transition(running.id, ['working'], 'cancelled', { statusMessage: 'cancelled', maxStoredBytes: 1 }, T0 + 1))
        .toMatchObject({ status: 'cancelled' })
    })

    it('counts the params and answers of input requests, and refuses an input over the budget', async () => {
      const store = stores[0]!.tasks
      const principal = `principal:${randomUUID()}`
      const running = sized(principal, 100)
      await store.create(running)
      const asked = input(running, { params: { message: 'z'.repeat(2000) } })
      const paramsBytes = Buffer.byteLength(JSON.stringify(asked.params))
      const budget = bytesOf(running) + paramsBytes + 50
      await store.addInput(asked, 10, budget)
      expect(await store.storedBytes(principal)).toBe(bytesOf(running) + paramsBytes)
      const refused = input(running, { params: { message: 'z'.repeat(2000) } })
      await expect(store.addInput(refused, 10, budget)).rejects.toMatchObject(overBudget)
      expect(await store.getInput(refused.key)).toBeNull()

      const answer: TaskOutcome = { result: { action: 'accept', content: { colour: 'blue' } } }
      expect(await store.settleInput(asked.key, 'answered', answer, T0 + 20)).toBe(true)
      expect(await store.storedBytes(principal)).toBe(bytesOf(running) + paramsBytes + Buffer.byteLength(JSON.stringify(answer)))
    })

    it('a sweep gives back everything the expired tasks stored, and nothing of the live ones', async () => {
      const store = stores[0]!.tasks
      const principal = `principal:${randomUUID()}`
      const expiring = sized(principal, 3000, { ttlMs: 1000 })
      const staying = sized(principal, 500, { ttlMs: 60_000 })
      await store.create(expiring)
      await store.create(staying)
      await store.addInput(input(expiring), 10)
      await store.transition(expiring.id, ['working'], 'completed', { outcome: result(700) }, T0 + 1)
      await store.sweep(T0 + 1000)
      expect(await store.storedBytes(principal)).toBe(bytesOf(staying))
      const budget = bytesOf(staying) + bytesOf(expiring)
      await store.create(sized(principal, 3000, { createdAt: T0 + 1000 }), { maxStoredBytes: budget })
    })

    it('counts the tasks of every principal given one account together (a caller without auth, by address)', async () => {
      const store = stores[0]!.tasks
      const account = `anonymous@${randomUUID()}`
      const a = sized(`anonymous:${randomUUID()}`, 1000)
      const b = sized(`anonymous:${randomUUID()}`, 1000)
      await store.create(a, { account, maxActive: 2, maxStoredBytes: bytesOf(a) * 3 })
      await store.create(b, { account, maxActive: 2, maxStoredBytes: bytesOf(a) * 3 })
      expect(await store.countActive(account, T0)).toBe(2)
      expect(await store.storedBytes(account)).toBe(bytesOf(a) * 2)
      expect(await store.storedBytes(a.principal)).toBe(0)
      // The account's limits bind across its principals: the third task of a third principal is refused.
      await expect(store.create(sized(`anonymous:${randomUUID()}`, 10), { account, maxActive: 2 })).rejects.toMatchObject({ code: 'GW_ERR_TASK_LIMIT' })
      await store.transition(a.id, ['working'], 'completed', { outcome: result(10) }, T0 + 1)
      expect(await store.countActive(account, T0 + 1)).toBe(1)
      await store.create(sized(`anonymous:${randomUUID()}`, 10, { createdAt: T0 + 1 }), { account, maxActive: 2 })
      // The tasks stay their principals' own.
      expect((await store.list(b.principal, undefined, 10, T0 + 1)).map((t) => t.id)).toEqual([b.id])
    })

    it('counts the client capabilities and info of sessions with the tasks, refuses a session over the budget, and gives its bytes back when it ends', async () => {
      const { sessions, tasks } = stores[0]!
      const principal = `principal:${randomUUID()}`
      const record = (id: string) => ({
        id, principal, protocolVersion: '2025-11-25', clientCapabilities: { sampling: {} }, clientInfo: { name: 'n'.repeat(3000) }, createdAt: 1, lastSeenAt: 1,
      })
      const first = record(randomUUID())
      const each = Buffer.byteLength(JSON.stringify(first.clientCapabilities)) + Buffer.byteLength(JSON.stringify(first.clientInfo))
      const running = sized(principal, 2000)
      const budget = each * 2 + bytesOf(running)
      await sessions.create(first, { maxStoredBytes: budget })
      await tasks.create(running, { maxStoredBytes: budget })
      expect(await tasks.storedBytes(principal)).toBe(each + bytesOf(running))
      const second = record(randomUUID())
      await sessions.create(second, { maxStoredBytes: budget })
      // Sessions and tasks share one budget: now neither a third session nor a task fits.
      await expect(sessions.create(record(randomUUID()), { maxStoredBytes: budget })).rejects.toMatchObject(overBudget)
      await expect(tasks.create(sized(principal, 10), { maxStoredBytes: budget })).rejects.toMatchObject(overBudget)
      expect(await sessions.countOf(principal, 10)).toBe(2)
      expect(await sessions.delete(first.id)).toBe(true)
      expect(await sessions.delete(first.id)).toBe(false)
      expect(await tasks.storedBytes(principal)).toBe(each + bytesOf(running))
      await sessions.sweep(2)
      expect(await tasks.storedBytes(principal)).toBe(bytesOf(running))
    })

    it('of many racing session creates of one account, exactly maxSessions are stored; the rest get GW_ERR_SESSION_LIMIT', async () => {
      const account = `anonymous@${randomUUID()}`
      const attempts = Array.from({ length: 30 }, (_, i) => {
        const id = randomUUID()
        const record = { id, principal: `anonymous:${id}`, protocolVersion: '2025-11-25', clientCapabilities: {}, clientInfo: { name: 'c' }, createdAt: 1, lastSeenAt: 1 }
        return stores[i % stores.length]!.sessions.create(record, { account, maxSessions: 4 })
      })
      const settled = await Promise.allSettled(attempts)
      expect(settled.filter((s) => s.status === 'fulfilled')).toHaveLength(4)
      for (const failure of settled.filter((s) => s.status === 'rejected')) {
        expect(failure.reason).toMatchObject({ code: 'GW_ERR_SESSION_LIMIT', message: expect.stringContaining('limits.sessionsPerPrincipal') })
      }
      expect(await stores[0]!.sessions.countOf(account, 100)).toBe(4)
    })

    it('counts sessions under the account they were created with', async () => {
      const sessions = stores[0]!.sessions
      const account = `anonymous@${randomUUID()}`
      const ids = [randomUUID(), randomUUID()]
      for (const id of ids) {
        await sessions.create({ id, principal: `anonymous:${id}`, protocolVersion: '2025-11-25', clientCapabilities: {}, clientInfo: { name: 'c' }, createdAt: 1, lastSeenAt: 1 }, { account })
      }
      expect(await sessions.countOf(account, 10)).toBe(2)
      expect(await sessions.countOf(`anonymous:${ids[0]}`, 10)).toBe(0)
      await sessions.delete(ids[0]!)
      expect(await sessions.countOf(account, 10)).toBe(1)
      await sessions.sweep(2)
      expect(await sessions.countOf(account, 10)).toBe(0)
    })
  })
}
