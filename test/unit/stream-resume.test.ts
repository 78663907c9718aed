import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { streamCursor } from '../../src/upstream/sse-stream-reader.ts'
import { MAX_RECONNECT_MS, resumeUntilAnswered, type StreamResumeFailed } from '../../src/upstream/stream-resume.ts'
import type { ReplayAnswer } from '../../src/upstream/stream-replay.ts'

/** Runs the resume loop against answers given in turn; records when (fake clock) each reconnect was made. */
interface Run {
  /** When each reconnect was made, in ms after the start. */
  opened: number[]
  failed: Promise<StreamResumeFailed | undefined>
}

function resume (retryMs: number | undefined, answers: ReplayAnswer[]): Run {
  const cursor = streamCursor(1, 'e1')
  cursor.retryMs = retryMs
  const opened: number[] = []
  let failure: StreamResumeFailed | undefined
  const start = Date.now()
  const failed = resumeUntilAnswered({
    cursor,
    signal: new AbortController().signal,
    open: async () => {
      opened.push(Date.now() - start)
      const answer = answers.shift()
      if (answer === undefined) cursor.answered = true
      return answer ?? { statusCode: 200, text: '', body: undefined }
    },
    read: async () => {},
    fail: (f) => { failure = f },
  }).then(() => failure)
  return { opened, failed }
}

const refused = (statusCode: number): ReplayAnswer => ({ statusCode, text: 'no', body: undefined })

describe('resumeUntilAnswered()', () => {
  beforeEach(() => { vi.useFakeTimers() })
  afterEach(() => { vi.useRealTimers() })

  it('waits the retry the upstream asked for, but never longer than MAX_RECONNECT_MS', async () => {
    const run = resume(3_600_000, [])
    await vi.advanceTimersByTimeAsync(MAX_RECONNECT_MS - 1)
    expect(run.opened).toEqual([])
    await vi.advanceTimersByTimeAsync(1)
    expect(run.opened).toEqual([MAX_RECONNECT_MS])
  })

  it('doubles the wait after each failed reconnect and fails the request after five in a row, naming the last answer', async () => {
    const run = resume(100, [503, 503, 502, 503, 500].map(refused))
    await vi.advanceTimersByTimeAsync(10_000)
    expect(run.opened).toEqual([100, 300, 700, 1500, 3100])
    expect((await run.failed)?.message).toMatch(/5 attempts to resume it from event 'e1' \(GET with Last-Event-ID\) failed; the last: HTTP 500: no/)
  })

  it('waits 1 s when the upstream asked for no retry, and fails at once on 404', async () => {
    const run = resume(undefined, [refused(404)])
    await vi.advanceTimersByTimeAsync(5_000)
    expect(run.opened).toEqual([1000])
    expect((await run.failed)?.message).toMatch(/refused to resume it from event 'e1' \(GET with Last-Event-ID answered HTTP 404: no\)/)
  })
})
