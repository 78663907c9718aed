// The shutdown runs its steps in order, and one step that fails does not keep the later ones from running: a
// listener that will not close must not leave the store open or the traces unflushed. Every failure is
// logged as it happens and reported together at the end, so main exits non-zero and the operator sees each.
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../src/errors.ts'
import { closeOnce, type ShutdownStep } from '../../src/gateway/lifecycle.ts'
import type { Logger } from '../../src/observability/logger.ts'

function capturingLog (): { log: Logger, lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = []
  const sink = new Writable({ write (chunk, _enc, done) { lines.push(JSON.parse(String(chunk)) as Record<string, unknown>); done() } })
  return { log: pino({ level: 'debug' }, sink), lines }
}

/** Steps that record that they ran; `fails` names the ones that throw (the second of them asynchronously). */
function steps (names: readonly string[], fails: ReadonlySet<string>): { steps: ShutdownStep[], ran: string[] } {
  const ran: string[] = []
  return {
    ran,
    steps: names.map((name, index) => ({
      name,
      run: index % 2 === 0
        ? () => { ran.push(name); if (fails.has(name)) throw new Error(`${name} broke`) }
        : async () => { ran.push(name); await Promise.resolve(); if (fails.has(name)) throw new Error(`${name} broke`) },
    })),
  }
}

describe('closeOnce', () => {
  it('runs every step when some fail, logs each failure with its step and rejects naming them all', async () => {
    const { log, lines } = capturingLog()
    const plan = steps(['refuse new requests', 'close the listener', 'close upstreams', 'close the store', 'flush traces'], new Set(['close the listener', 'close the store']))
    const close = closeOnce(plan.steps, log)

    const err = await close().then(() => undefined, (e: unknown) => e)

    expect(plan.ran).toEqual(['refuse new requests', 'close the listener', 'close upstreams', 'close the store', 'flush traces'])
    expect(err).toBeInstanceOf(GatewayError)
    expect((err as GatewayError).code).toBe('GW_ERR_SHUTDOWN_INCOMPLETE')
    expect((err as GatewayError).message).toContain("'close the listener', 'close the store'")
    const cause = (err as GatewayError).cause
    expect(cause).toBeInstanceOf(AggregateError)
    expect((cause as AggregateError).errors.map((e: Error) => e.message)).toEqual(['close the listener broke', 'close the store broke'])
    const failures = lines.filter((line) => line.msg === 'shutdown step failed; the next steps still run')
    expect(failures.map((line) => [line.level, line.step, (line.err as { message: string }).message])).toEqual([
      [50, 'close the listener', 'close the listener broke'],
      [50, 'close the store', 'close the store broke'],
    ])
  })

  it('resolves when every step succeeds, and runs the steps once however often it is called', async () => {
    const { log } = capturingLog()
    const plan = steps(['close the listener', 'close the store'], new Set())
    const close = closeOnce(plan.steps, log)
    await Promise.all([close(), close()])
    await close()
    expect(plan.ran).toEqual(['close the listener', 'close the store'])
  })

  it('gives a later call the same failure without running the steps again', async () => {
    const { log } = capturingLog()
    const plan = steps(['close the listener', 'close the store'], new Set(['close the store']))
    const close = closeOnce(plan.steps, log)
    const first = await close().then(() => undefined, (e: unknown) => e)
    const second = await close().then(() => undefined, (e: unknown) => e)
    expect(second).toBe(first)
    expect(plan.ran).toEqual(['close the listener', 'close the store'])
  })
})
