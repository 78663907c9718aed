import { Readable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { firstReplay, followReplay, type ReplayAnswer, type ReplayFollower, type Replayed } from '../../src/upstream/stream-replay.ts'

type Body = ReplayFollower['body']

function body (): Body {
  return Readable.from([]) as unknown as Body
}

/**
 * Following a call's replayed stream: an upstream that sends no headers for a replay with nothing in it yet (the
 * TypeScript SDK's server holds them back until its first keep-alive, 15 s later) is asked again instead of
 * being waited for, so a resumed call's response, stored meanwhile, arrives with the next replay.
 */
describe('following a replayed stream', () => {
  it('asks again when a replay request gets no answer, and hands the response of the next replay on', { timeout: 30_000 }, async () => {
    const replayed: Replayed = { from: 7, to: 1, answered: false }
    const withResponse = body()
    const reopened: string[] = []
    const delivered: object[] = []
    const follower: ReplayFollower = {
      body: body(),
      from: 'e0',
      replayed,
      gone: () => false,
      closed: new AbortController().signal,
      // The first replay had nothing after e1; the one that carries the response ends the call.
      read: async (read) => {
        if (read !== withResponse) return 'e1'
        replayed.answered = true
        return 'e2'
      },
      reopen: async (last, waited): Promise<ReplayAnswer> => {
        reopened.push(last)
        if (reopened.length === 1) {
          // Never answered: only giving up on it ends this request.
          return await new Promise((_resolve, reject) => {
            waited?.addEventListener('abort', () => { reject(waited.reason) }, { once: true })
          })
        }
        return { statusCode: 200, text: '', body: withResponse }
      },
      deliver: (message) => { delivered.push(message) },
    }
    await followReplay(follower)
    expect(replayed.answered).toBe(true)
    expect(reopened).toEqual(['e1', 'e1'])
    expect(delivered).toEqual([])
  })
})

/**
 * The first replay of a handed-over call: the TypeScript SDK's server answers 409 while it still counts the
 * stopped process's connection to the stream as open, and lets the replay through once it noticed it closed.
 */
describe('the first replay of a handed-over call', () => {
  const conflict: ReplayAnswer = { statusCode: 409, text: 'Conflict: Stream already has an active connection', body: undefined }
  const replay: ReplayAnswer = { statusCode: 200, text: '', body: body() }

  it('asks again while the upstream answers 409, and gets the replay once the old connection is gone', async () => {
    const answers = [conflict, conflict, replay]
    let asked = 0
    const res = await firstReplay(async () => answers[asked++]!, new AbortController().signal, 1)
    expect(res).toBe(replay)
    expect(asked).toBe(3)
  })

  it('gives up after a few 409s with the last refusal, and never asks again after another refusal', async () => {
    let asked = 0
    expect(await firstReplay(async () => { asked++; return conflict }, new AbortController().signal, 1)).toBe(conflict)
    expect(asked).toBe(6)
    const gone: ReplayAnswer = { statusCode: 404, text: 'Session not found', body: undefined }
    asked = 0
    expect(await firstReplay(async () => { asked++; return gone }, new AbortController().signal, 1)).toBe(gone)
    expect(asked).toBe(1)
  })

  it('stops asking when the transport closes', async () => {
    const closed = new AbortController()
    let asked = 0
    const res = await firstReplay(async () => { asked++; closed.abort(); return conflict }, closed.signal, 1)
    expect(res).toBe(conflict)
    expect(asked).toBe(1)
  })
})
