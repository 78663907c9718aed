import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { demoStdioYaml, startGatewayProcess, writeConfig } from '../helpers/process.ts'
import { RawSession } from '../helpers/raw-session.ts'

type Json = Record<string, unknown>
const TOKEN = 'restart-test-token'

function config (database: string): string {
  return `
store: { kind: sqlite, path: ${JSON.stringify(database)} }
logging: { level: info }
auth:
  tokens: [{ principal: ops, sha256: ${sha256Hex(TOKEN)} }]
upstreams:
${demoStdioYaml()}
    toolSettings:
      slow: { idempotent: true }
`
}

async function create (session: RawSession, name: string, args: Json): Promise<string> {
  const response = await session.request('tools/call', { name, arguments: args, task: { ttl: 600_000 } })
  return ((response.result as Json).task as Json).taskId as string
}

/** A real gateway process on a sqlite file, killed with SIGKILL while tasks run, then started again. */
describe('restart after kill -9', () => {
  it('keeps completed results, fails interrupted tasks and runs idempotent ones again', async () => {
    const file = writeConfig(config(join(mkdtempSync(join(tmpdir(), 'gw-restart-')), 'gateway.db')))
    const first = await startGatewayProcess(file)
    const before = await RawSession.open(first.url, { elicitation: { form: {} } }, { authorization: `Bearer ${TOKEN}` })
    const done = await create(before, 'demo__slow', { duration: 10, steps: 1 })
    const doneTask = await before.waitFor(done, ['completed'])
    const doneResult = await before.request('tasks/result', { taskId: done })
    const asking = await create(before, 'demo__ask_user', {})
    await before.waitFor(asking, ['input_required'])
    const rerun = await create(before, 'demo__slow', { duration: 1500, steps: 3 })
    await before.waitFor(rerun, ['working'])

    first.child.kill('SIGKILL')
    await first.exited
    const second = await startGatewayProcess(file)
    const after = await RawSession.open(second.url, {}, { authorization: `Bearer ${TOKEN}` })

    expect((await after.request('tasks/get', { taskId: done })).result).toEqual(doneTask)
    expect((await after.request('tasks/result', { taskId: done })).result).toEqual(doneResult.result)
    expect((await after.request('tasks/get', { taskId: asking })).result).toMatchObject({ status: 'failed', statusMessage: 'gateway restarted during execution' })
    expect((await after.request('tasks/result', { taskId: asking })).error).toMatchObject({ code: -32603, message: 'gateway restarted during execution' })
    const rerunTask = await after.waitFor(rerun, ['completed', 'failed'])
    expect(rerunTask.status).toBe('completed')
    expect(JSON.stringify((await after.request('tasks/result', { taskId: rerun })).result)).toContain('3 steps')
    expect(second.lines.some((l) => l.includes('recovered tasks interrupted by a restart'))).toBe(true)

    second.child.kill('SIGTERM')
    expect((await second.exited)[0]).toBe(0)
  })
})

describe('a second gateway on the same sqlite file', () => {
  it('refuses to start, naming the file and the holder, and leaves the running tasks alone', async () => {
    const database = join(mkdtempSync(join(tmpdir(), 'gw-overlap-')), 'gateway.db')
    const file = writeConfig(config(database))
    const first = await startGatewayProcess(file)
    const session = await RawSession.open(first.url, { elicitation: { form: {} } }, { authorization: `Bearer ${TOKEN}` })
    const asking = await create(session, 'demo__ask_user', {})
    await session.waitFor(asking, ['input_required'])
    const running = await create(session, 'demo__slow', { duration: 3000, steps: 3 })
    await session.waitFor(running, ['working'])

    const refused = await startGatewayProcess(file).then(
      async (second) => {
        second.child.kill('SIGKILL')
        await second.exited
        return 'the second gateway started'
      },
      (err: unknown) => String(err),
    )
    expect((await session.request('tasks/get', { taskId: asking })).result).toMatchObject({ status: 'input_required' })
    expect(await session.waitFor(running, ['completed', 'failed'])).toMatchObject({ status: 'completed' })
    expect(refused).toMatch(/gateway exited with 1/)
    expect(refused).toContain(database)
    expect(refused).toContain(`pid ${first.child.pid}`)
    // Nothing left running: the stop below does not wait out server.shutdownGrace for the unanswered task.
    expect((await session.request('tasks/cancel', { taskId: asking })).result).toMatchObject({ status: 'cancelled' })
    first.child.kill('SIGTERM')
    expect((await first.exited)[0]).toBe(0)

    // Once the first has stopped, the file is free again.
    const next = await startGatewayProcess(file)
    next.child.kill('SIGTERM')
    expect((await next.exited)[0]).toBe(0)
  })
})
