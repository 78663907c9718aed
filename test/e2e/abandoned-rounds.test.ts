import { fork, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { REPO_ROOT } from '../fixtures/spawn-upstream.ts'
import { demoStdio } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

/**
 * Calls abandoned per kind of client; each carries an extra argument of ARGUMENT_BYTES. Kept, they would hold
 * 40 MB, five times the tolerance: more calls only push more megabytes through the upstream's pipe.
 */
const ABANDONED = 20
const ARGUMENT_BYTES = 1_000_000
/** What may stay on the heap after all of them ended (allocator noise, caches warmed by the calls). */
const TOLERANCE_MB = 8

/** The gateway in a child process with --expose-gc (see the fixture), asked over IPC. */
class HeapGateway {
  readonly #child: ChildProcess
  url = ''
  base = ''

  constructor (config: Json) {
    this.#child = fork('test/fixtures/heap-gateway.ts', [JSON.stringify(config)], { cwd: REPO_ROOT, execArgv: ['--expose-gc', '--import', 'tsx'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
  }

  async started (): Promise<void> {
    const [message] = await once(this.#child, 'message') as [{ url: string, base: string }]
    this.url = message.url
    this.base = message.base
  }

  async heapMb (): Promise<number> {
    const answer = once(this.#child, 'message') as Promise<[{ heapMb: number }]>
    this.#child.send('heap')
    return (await answer)[0].heapMb
  }

  async close (): Promise<void> {
    if (this.#child.exitCode !== null) return
    const exited = once(this.#child, 'exit')
    this.#child.send('close')
    await exited
  }
}

/** Upstream calls running, queued, or waiting on their client (parked), as /readyz reports them. */
async function upstreamCalls (base: string): Promise<number> {
  const ready = await (await fetch(`${base}/readyz`)).json() as { upstreams: Array<{ calls: { active: number, waiting: number, parked: number } }> }
  return ready.upstreams.reduce((sum, upstream) => sum + upstream.calls.active + upstream.calls.waiting + upstream.calls.parked, 0)
}

/**
 * A 2026-07-28 client that gets `input_required` and never retries must cost nothing once
 * `server.inputHoldTimeout` has passed: the held call, its upstream call and its arguments are gone.
 */
describe('abandoned 2026-07-28 input rounds', () => {
  let gw: HeapGateway

  beforeAll(async () => {
    // A wide decision window whose input comes back in rounds: every round comes back as input_required
    // however slowly a loaded upstream asks.
    gw = new HeapGateway({ upstreams: [demoStdio()], server: { inputHoldTimeout: '2s' }, tasks: { decide: { after: '60s', input: 'round' } } })
    await gw.started()
  })

  afterAll(async () => {
    await gw?.close()
  })

  it('frees the held call and its arguments and ends the upstream call once the hold expires, with or without tasks', async () => {
    const clients = [new ModernRaw(gw.url, { elicitation: { form: {} } }), ModernRaw.withTasks(gw.url, { elicitation: { form: {} } })]
    // One answered round per client first: upstream sessions, catalog and code paths are warm.
    for (const client of clients) {
      const round = await client.result('tools/call', { name: 'demo__ask_user', arguments: { message: 'warm' } })
      const [key] = Object.keys(round.inputRequests as Json)
      const answered = await client.result('tools/call', { name: 'demo__ask_user', arguments: { message: 'warm' }, requestState: round.requestState, inputResponses: { [key!]: { action: 'accept', content: { name: 'Warm' } } } })
      expect(answered).toMatchObject({ resultType: 'complete', content: [{ text: 'Hello, Warm!' }] })
    }
    const baseline = await gw.heapMb()

    const extra = 'x'.repeat(ARGUMENT_BYTES)
    let last: Json = {}
    for (const client of clients) {
      for (let i = 0; i < ABANDONED; i++) {
        last = await client.result('tools/call', { name: 'demo__ask_user', arguments: { message: `abandoned ${i}`, extra } })
        expect(last.resultType).toBe('input_required')
      }
    }
    // The hold expires: every abandoned upstream call is cancelled and ends.
    await until('every abandoned upstream call to end after the hold expired', async () => await upstreamCalls(gw.base) === 0 || undefined, { timeoutMs: 30_000, everyMs: 50 })
    const retry = await clients[1]!.request('tools/call', { name: 'demo__ask_user', arguments: {}, requestState: last.requestState, inputResponses: {} })
    expect(retry.body.error).toMatchObject({ code: -32602 })

    const after = await gw.heapMb()
    expect(after - baseline, `heap ${baseline.toFixed(1)} MB before, ${after.toFixed(1)} MB after ${2 * ABANDONED} abandoned calls of ${ARGUMENT_BYTES} bytes`).toBeLessThan(TOLERANCE_MB)
  }, 90_000)
})
