import { Readable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { followReplay, type ReplayAnswer, type ReplayFollower, type Replayed } from '../../src/upstream/stream-replay.ts'

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
