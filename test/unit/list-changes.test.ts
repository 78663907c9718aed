import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { listChangeAnsweredBy, ListChangeCoalescer } from '../../src/wire/list-changes.ts'

const TOOLS = 'notifications/tools/list_changed'
const PROMPTS = 'notifications/prompts/list_changed'

/** A coalescer and the notifications it sent, as `owner kind`. */
interface Probe { changes: ListChangeCoalescer, sent: string[], change: (owner: string, kind: string) => string }

function coalescer (untilListed: boolean): Probe {
  const changes = new ListChangeCoalescer({ untilListed })
  const sent: string[] = []
  return { changes, sent, change: (owner, kind) => changes.schedule(owner, kind, () => sent.push(`${owner} ${kind}`) > 0) }
}

describe('list-change coalescing', () => {
  beforeEach(() => { vi.useFakeTimers() })
  afterEach(() => { vi.useRealTimers() })

  it('merges the changes of a burst into one notification, sent when the window ends', () => {
    const { sent, change } = coalescer(false)
    expect(change('s1', TOOLS)).toBe('window')
    vi.advanceTimersByTime(30)
    expect(change('s1', TOOLS)).toBe('merged')
    expect(sent).toEqual([])
    vi.advanceTimersByTime(20)
    expect(sent).toEqual([`s1 ${TOOLS}`])
    // Without the rule of sessions, a change after the window is sent again.
    expect(change('s1', TOOLS)).toBe('window')
    vi.advanceTimersByTime(50)
    expect(sent).toEqual([`s1 ${TOOLS}`, `s1 ${TOOLS}`])
  })

  it('holds back further changes of a kind until the owner has listed it, however late they come', () => {
    const { changes, sent, change } = coalescer(true)
    change('s1', TOOLS)
    vi.advanceTimersByTime(50)
    expect(sent).toEqual([`s1 ${TOOLS}`])
    expect(change('s1', TOOLS)).toBe('held')
    vi.advanceTimersByTime(60 * 60_000)
    expect(change('s1', TOOLS)).toBe('held')
    vi.runAllTimers()
    expect(sent).toHaveLength(1)

    changes.listed('s1', TOOLS)
    expect(change('s1', TOOLS)).toBe('window')
    expect(change('s1', TOOLS)).toBe('merged')
    vi.advanceTimersByTime(50)
    expect(sent).toEqual([`s1 ${TOOLS}`, `s1 ${TOOLS}`])
    expect(change('s1', TOOLS)).toBe('held')
  })

  it('keeps owners and kinds apart', () => {
    const { changes, sent, change } = coalescer(true)
    change('s1', TOOLS)
    change('s2', TOOLS)
    change('s1', PROMPTS)
    vi.advanceTimersByTime(50)
    expect(sent.sort()).toEqual([`s1 ${PROMPTS}`, `s1 ${TOOLS}`, `s2 ${TOOLS}`])
    // s1 read its tools: its next tools change is sent; its prompts and s2's tools stay held back.
    changes.listed('s1', TOOLS)
    expect(change('s1', TOOLS)).toBe('window')
    expect(change('s1', PROMPTS)).toBe('held')
    expect(change('s2', TOOLS)).toBe('held')
    // Listing one kind or owner frees only that one.
    changes.listed('s2', PROMPTS)
    expect(change('s2', TOOLS)).toBe('held')
  })

  it('does not hold back after a notification that could not be delivered, nor after forget', () => {
    const changes = new ListChangeCoalescer({ untilListed: true })
    changes.schedule('s1', TOOLS, () => false)
    vi.advanceTimersByTime(50)
    expect(changes.schedule('s1', TOOLS, () => true)).toBe('window')
    vi.advanceTimersByTime(50)
    expect(changes.schedule('s1', TOOLS, () => true)).toBe('held')
    changes.forget('s1')
    expect(changes.schedule('s1', TOOLS, () => true)).toBe('window')
  })

  it('names the notification each list request answers', () => {
    expect(listChangeAnsweredBy('tools/list')).toBe(TOOLS)
    expect(listChangeAnsweredBy('prompts/list')).toBe(PROMPTS)
    expect(listChangeAnsweredBy('resources/list')).toBe('notifications/resources/list_changed')
    expect(listChangeAnsweredBy('resources/templates/list')).toBe('notifications/resources/list_changed')
    expect(listChangeAnsweredBy('tools/call')).toBeUndefined()
  })
})
