import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { CallSlots } from '../../src/upstream/call-slots.ts'
import { GatewayError } from '../../src/errors.ts'

/** Whether `promise` has settled once pending callbacks ran (fake timers leave the microtask queue alone). */
async function settled (promise: Promise<unknown>): Promise<boolean> {
  let done = false
  promise.then(() => { done = true }, () => { done = true })
  await vi.advanceTimersByTimeAsync(0)
  return done
}

describe('call slots', () => {
  beforeEach(() => { vi.useFakeTimers() })
  afterEach(() => { vi.useRealTimers() })

  it('gives the slot of a call waiting on its client to the next call', async () => {
    const slots = new CallSlots('demo', 1, 10)
    const claim = slots.claim('alice', slots.tryTake('alice')!)
    const next = slots.take('alice')
    expect(await settled(next)).toBe(false)

    claim.park()
    expect(await settled(next)).toBe(true)
    expect({ active: slots.active, waiting: slots.waiting, parked: slots.parked }).toEqual({ active: 1, waiting: 0, parked: 1 })
  })

  it('lets a call parked by a client that never answers hold nothing: every slot serves other calls', async () => {
    const slots = new CallSlots('demo', 4, 10)
    const parked = [1, 2, 3, 4].map(() => slots.claim('alice', slots.tryTake('alice')!))
    for (const claim of parked) claim.park()
    const others = [1, 2, 3, 4].map(() => slots.tryTake('alice'))
    expect(others.every((release) => release !== undefined)).toBe(true)
    expect({ active: slots.active, parked: slots.parked }).toEqual({ active: 4, parked: 4 })
  })

  it('gives an answered call a slot again ahead of the calls that queued while it waited', async () => {
    const slots = new CallSlots('demo', 1, 10)
    const answered = slots.claim('alice', slots.tryTake('alice')!)
    answered.park()
    const running = slots.claim('alice', await slots.take('alice'))
    const newcomer = slots.take('alice')
    const signal = new AbortController().signal
    let queued = 0
    const back = answered.unpark(signal, () => { queued++ })
    expect(queued).toBe(1)
    expect(slots.waiting).toBe(2)

    running.release()
    expect(await settled(back)).toBe(true)
    expect(await settled(newcomer)).toBe(false)
    answered.release()
    expect(await settled(newcomer)).toBe(true)
    expect(slots.parked).toBe(0)
  })

  it('takes a slot back at once when one is free, and only once nothing the call asked is outstanding', async () => {
    const slots = new CallSlots('demo', 1, 10)
    const claim = slots.claim('alice', slots.tryTake('alice')!)
    const signal = new AbortController().signal
    claim.park()
    claim.park()
    await claim.unpark(signal)
    expect({ active: slots.active, parked: slots.parked }).toEqual({ active: 0, parked: 1 })
    await claim.unpark(signal)
    expect({ active: slots.active, parked: slots.parked }).toEqual({ active: 1, parked: 0 })
    claim.release()
    expect(slots.active).toBe(0)
  })

  it('never refuses an answered call for a full queue', async () => {
    const slots = new CallSlots('demo', 1, 1)
    const answered = slots.claim('alice', slots.tryTake('alice')!)
    answered.park()
    const running = await slots.take('alice')
    const queuedNew = slots.take('alice')
    await expect(slots.take('alice')).rejects.toMatchObject({ code: 'GW_ERR_UPSTREAM_BUSY' })
    const back = answered.unpark(new AbortController().signal)
    running()
    await back
    expect(slots.active).toBe(1)
    answered.release()
    await queuedNew
  })

  it('counts a call that ends while it waits on its client out of the parked ones, and one that ends while it waits for its slot back', async () => {
    const slots = new CallSlots('demo', 1, 10)
    const ended = slots.claim('alice', slots.tryTake('alice')!)
    ended.park()
    ended.release()
    expect({ active: slots.active, parked: slots.parked }).toEqual({ active: 0, parked: 0 })

    const other = slots.claim('alice', slots.tryTake('alice')!)
    other.park()
    const holder = slots.claim('alice', slots.tryTake('alice')!)
    const stop = new AbortController()
    const back = other.unpark(stop.signal)
    stop.abort(new Error('cancelled'))
    await expect(back).rejects.toThrow('cancelled')
    other.release()
    holder.release()
    expect({ active: slots.active, waiting: slots.waiting, parked: slots.parked }).toEqual({ active: 0, waiting: 0, parked: 0 })
  })

  it('fails a call a client waits on once slotWaitTimeout passes, naming the option, and lets a task wait on', async () => {
    const slots = new CallSlots('demo', 1, 10)
    const holder = slots.tryTake('alice')!
    const task = slots.take('alice')
    const sync = slots.take('alice', { timeoutMs: 30_000 })
    const failure = sync.catch((err: unknown) => err)
    await vi.advanceTimersByTimeAsync(30_000)
    const err = await failure as GatewayError
    expect(err).toBeInstanceOf(GatewayError)
    expect(err.code).toBe('GW_ERR_UPSTREAM_SLOT_TIMEOUT')
    expect(err.message).toBe("upstream 'demo' had no free call slot within 30s (upstreams[].slotWaitTimeout): its 1 call slots (maxConcurrentCalls) were all taken; try again later")
    expect(slots.waiting).toBe(1)

    await vi.advanceTimersByTimeAsync(3_600_000)
    expect(await settled(task)).toBe(false)
    holder()
    expect(await settled(task)).toBe(true)
  })

  it('leaves no timer behind for a call served in time', async () => {
    const slots = new CallSlots('demo', 1, 10)
    const holder = slots.tryTake('alice')!
    const sync = slots.take('alice', { timeoutMs: 30_000 })
    holder()
    const release = await sync
    expect(vi.getTimerCount()).toBe(0)
    release()
  })

  it('holds each principal to its share and gives the slots it cannot take to the calls of others behind it', async () => {
    const slots = new CallSlots('demo', 4, 100, 2)
    const alice = [slots.tryTake('alice'), slots.tryTake('alice'), slots.tryTake('alice')]
    expect(alice.map((release) => release !== undefined)).toEqual([true, true, false])
    const aliceQueued = slots.take('alice')
    const bob = [slots.tryTake('bob'), slots.tryTake('bob')]
    expect(bob.every((release) => release !== undefined)).toBe(true)
    expect(await settled(aliceQueued)).toBe(false)

    // Bob's third call waits for the upstream, behind alice's; a slot bob frees goes to alice, one alice frees to her too.
    const bobQueued = slots.take('bob')
    bob[0]!()
    expect(await settled(bobQueued)).toBe(true)
    expect(await settled(aliceQueued)).toBe(false)
    alice[0]!()
    expect(await settled(aliceQueued)).toBe(true)
    expect({ active: slots.active, waiting: slots.waiting }).toEqual({ active: 4, waiting: 0 })
  })

  it('says which bound kept a call from a slot: its principal\'s share', async () => {
    const slots = new CallSlots('demo', 4, 100, 1)
    slots.tryTake('alice')
    const failure = slots.take('alice', { timeoutMs: 1000 }).catch((err: unknown) => err)
    await vi.advanceTimersByTimeAsync(1000)
    expect((await failure as GatewayError).message).toBe("upstream 'demo' had no free call slot within 1s (upstreams[].slotWaitTimeout): its caller already held its share of 1 call slots (maxConcurrentCallsPerPrincipal); try again later")
  })

  it('counts a parked call out of its principal\'s share until it takes its slot back', async () => {
    const slots = new CallSlots('demo', 4, 100, 1)
    const asking = slots.claim('alice', slots.tryTake('alice')!)
    asking.park()
    const other = slots.tryTake('alice')
    expect(other).toBeDefined()
    const back = asking.unpark(new AbortController().signal)
    expect(await settled(back)).toBe(false)
    other!()
    expect(await settled(back)).toBe(true)
    expect(slots.active).toBe(1)
  })

  it('bounds the wait for a slot back after an answer as a new call\'s, for a call a client waits on', async () => {
    const slots = new CallSlots('demo', 1, 10)
    const answered = slots.claim('alice', slots.tryTake('alice')!)
    answered.park()
    const holder = slots.tryTake('bob')!
    const back = answered.unpark(new AbortController().signal, undefined, 30_000).catch((err: unknown) => err)
    await vi.advanceTimersByTimeAsync(30_000)
    expect(await back).toMatchObject({ code: 'GW_ERR_UPSTREAM_SLOT_TIMEOUT' })
    expect({ active: slots.active, waiting: slots.waiting, parked: slots.parked }).toEqual({ active: 1, waiting: 0, parked: 1 })
    answered.release()
    holder()
    expect({ active: slots.active, parked: slots.parked }).toEqual({ active: 0, parked: 0 })
  })
})
