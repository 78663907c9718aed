import { describe, expect, it } from 'vitest'
import {
  RESUME, RUNNING_STATUSES, TASK_STATUSES, TERMINAL_STATUSES, TRANSITIONS, canTransition, isTerminal, restatement, sourcesOf,
  type TaskStatus,
} from '../../src/wire/task-state.ts'

/**
 * The spec's table (2025-11-25, Task Status), written out pair by pair, plus the self-moves of the two running
 * statuses (a new statusMessage, same status): every move not listed is forbidden.
 */
const ALLOWED = new Set([
  'working → working',
  'working → input_required',
  'working → completed',
  'working → failed',
  'working → cancelled',
  'input_required → working',
  'input_required → input_required',
  'input_required → completed',
  'input_required → failed',
  'input_required → cancelled',
])

const pairs = TASK_STATUSES.flatMap((from) => TASK_STATUSES.map((to) => [from, to] as [TaskStatus, TaskStatus]))

describe('task state machine', () => {
  it('knows exactly the five statuses of the spec', () => {
    expect([...TASK_STATUSES].sort()).toEqual(['cancelled', 'completed', 'failed', 'input_required', 'working'])
    expect(Object.keys(TRANSITIONS).sort()).toEqual([...TASK_STATUSES].sort())
  })

  it.each(pairs)('%s → %s is allowed exactly when the spec allows it', (from, to) => {
    const allowed = ALLOWED.has(`${from} → ${to}`)
    expect(canTransition(from, to)).toBe(allowed)
    expect(TRANSITIONS[from].includes(to)).toBe(allowed)
    expect(sourcesOf(to).includes(from)).toBe(allowed)
  })

  it('completed, failed and cancelled are terminal and lead nowhere', () => {
    expect([...TERMINAL_STATUSES].sort()).toEqual(['cancelled', 'completed', 'failed'])
    for (const status of TASK_STATUSES) {
      const terminal = TERMINAL_STATUSES.includes(status)
      expect(isTerminal(status)).toBe(terminal)
      expect(TRANSITIONS[status].length === 0).toBe(terminal)
    }
  })

  it('working and input_required are the running statuses', () => {
    expect(RUNNING_STATUSES).toEqual(['working', 'input_required'])
  })

  it('gives the compare-and-set sources of each status', () => {
    expect(sourcesOf('working')).toEqual(['working', 'input_required'])
    expect(sourcesOf('input_required')).toEqual(['working', 'input_required'])
    for (const end of TERMINAL_STATUSES) expect(sourcesOf(end)).toEqual(['working', 'input_required'])
  })

  it('resumes only a task waiting for input', () => {
    expect(RESUME).toEqual({ from: ['input_required'], to: 'working' })
  })

  it('restates a running status as a move to itself, and refuses to restate a terminal one', () => {
    for (const status of RUNNING_STATUSES) expect(restatement(status)).toEqual({ from: [status], to: status })
    for (const end of TERMINAL_STATUSES) expect(() => restatement(end)).toThrow(`a task that is ${end} never changes`)
  })

  it('cannot be changed at run time', () => {
    expect(Object.isFrozen(TRANSITIONS)).toBe(true)
    expect(Object.isFrozen(TRANSITIONS.working)).toBe(true)
    expect(Object.isFrozen(sourcesOf('completed'))).toBe(true)
    expect(Object.isFrozen(TERMINAL_STATUSES) && Object.isFrozen(RUNNING_STATUSES)).toBe(true)
    expect(Object.isFrozen(RESUME) && Object.isFrozen(RESUME.from)).toBe(true)
  })
})
