import { describe, expect, it } from 'vitest'
import { gatewayForSuite } from '../helpers/gateway.ts'
import { legacyTask, RawSession } from '../helpers/raw-session.ts'

/**
 * A blocking tasks/result waits for the task's end, not longer: a task that is still unfinished when its
 * TTL passes (its outcome never stored) is gone, and the waiting client is told so instead of waiting forever.
 */
describe('a blocking tasks/result', () => {
  const gw = gatewayForSuite()

  it('answers with an error when the task reaches the end of its TTL unfinished', async () => {
    const session = await RawSession.open(gw.url)
    const taskId = await legacyTask(session, 'demo__slow', { duration: 600_000, steps: 1 }, 300)
    const answer = await session.request('tasks/result', { taskId })
    expect(answer.result).toBeUndefined()
    expect(answer.error).toMatchObject({ code: -32602, message: `Invalid params: task '${taskId}' not found (unknown, expired, or not yours)` })
  })
})
