import { setTimeout as delay } from 'node:timers/promises'
import type { Dispatcher } from 'undici'
import { errorMessage } from '../errors.ts'
import { settled } from '../observability/ignored.ts'

/** How long a replayed stream may stay silent before it is asked for again from its last event. */
const REPLAY_SILENCE_MS = 1000
/** How often a replay refused with 409 is asked for again, the first wait, doubled each time (about 3 s in all). */
const CONFLICT_RETRIES = 5
const CONFLICT_WAIT_MS = 100

type Body = Dispatcher.ResponseData['body']

/** A call's stream replayed to this process: its response, sent as `from`, is handed on as `to`, once. */
export interface Replayed {
  from: string | number
  to: string | number
  answered: boolean
}

/** An upstream's answer to a request for a replay: the SSE body, or the status and text of a refusal. */
export interface ReplayAnswer {
  statusCode: number
  text: string
  body: Body | undefined
}

/**
 * The first replay of a call's stream that another process handed over: an upstream that still counts that
 * process's connection to the stream as open answers 409 (the TypeScript SDK: "Stream already has an active
 * connection") until it notices the connection closed, a moment later. Such a refusal is asked again after a
 * short, doubling wait, a few times; any other answer is returned as it came, and so is the last 409.
 */
export async function firstReplay (
  ask: () => Promise<ReplayAnswer>, signal: AbortSignal, waitMs = CONFLICT_WAIT_MS,
): Promise<ReplayAnswer> {
  for (let attempt = 0; ; attempt++) {
    const res = await ask()
    if (res.statusCode !== 409 || attempt === CONFLICT_RETRIES || signal.aborted) return res
    await settled(delay(waitMs * 2 ** attempt, undefined, { signal }))
  }
}

export interface ReplayFollower {
  /** The first replay's body, and the event it replays after. */
  body: Body
  from: string
  replayed: Replayed
  /** Whether nobody waits for the call any more (the session closed, the call was aborted). */
  gone (): boolean
  closed: AbortSignal
  /** Reads a replay to its end; `quiet` hears each event; returns the last event id. */
  read (body: Body, last: string, quiet: () => void): Promise<string | undefined>
  /** Asks for the events after `last` again; `waited` aborts the request when its answer is too long in coming. */
  reopen (last: string, waited: AbortSignal): Promise<ReplayAnswer>
  /** Hands a message on to the session's client (the call's failure, when the upstream forgot the stream). */
  deliver (message: object): void
}

/**
 * Reads a replayed stream until the call's response came. A stream that ends, or stays silent for
 * REPLAY_SILENCE_MS, is asked for again from its last event: some upstreams replay a stream but do not go on
 * sending the call's later events on it; they store them, and the next replay has them. An upstream that no
 * longer knows the session or the stream (404, 400) fails the call with -32602, as for a task it forgot.
 */
export async function followReplay (follower: ReplayFollower): Promise<void> {
  const { replayed, gone } = follower
  let last = follower.from
  let current: Body | undefined = follower.body
  while (current !== undefined && !replayed.answered && !gone()) {
    const reading = current
    let silence: NodeJS.Timeout | undefined
    const quiet = (): void => {
      clearTimeout(silence)
      silence = setTimeout(() => { reading.destroy() }, REPLAY_SILENCE_MS)
    }
    quiet()
    last = await follower.read(reading, last, quiet) ?? last
    clearTimeout(silence)
    current = undefined
    while (!replayed.answered && !gone() && current === undefined) {
      const failed = (err: unknown): ReplayAnswer => ({ statusCode: 0, text: errorMessage(err), body: undefined })
      // An upstream may send no headers for a replay with nothing in it until it has something to send (the
      // TypeScript SDK's first keep-alive comes 15 s later): asked again after the silence a stream may keep.
      const waited = new AbortController()
      const timer = setTimeout(() => { waited.abort(new Error('the upstream did not answer the replay request in time')) }, REPLAY_SILENCE_MS)
      const res = await follower.reopen(last, waited.signal).catch(failed)
      clearTimeout(timer)
      if (waited.signal.aborted && res.statusCode !== 200) continue
      if (res.statusCode === 200) {
        current = res.body
      } else if (res.statusCode === 404 || res.statusCode === 400) {
        const message = `the upstream no longer replays the call's stream (HTTP ${res.statusCode}: ${res.text.slice(0, 200)})`
        follower.deliver({ jsonrpc: '2.0', id: replayed.to, error: { code: -32602, message } })
        return
      } else {
        // Cut short when the follower closes (the wait rejects): the loop then ends on its own.
        await settled(delay(REPLAY_SILENCE_MS, undefined, { signal: follower.closed }))
      }
    }
  }
}
