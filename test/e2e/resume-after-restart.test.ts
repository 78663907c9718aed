import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { CountingProxy } from '../helpers/counting-proxy.ts'
import { startGatewayProcess, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { legacyTask, RawSession } from '../helpers/raw-session.ts'
import { expectCompleted, recordedInSqlite, startResumeUpstreams, type ResumeKind, type ResumeUpstreams } from '../helpers/resume.ts'

/**
 * The only gateway process on a SQLite file is killed with SIGKILL while tasks run and started again on the same
 * file: the new process resumes what the old one left, in front of @modelcontextprotocol/server-everything (its
 * own task tool) and of an upstream that replays its call streams (plain calls). The client's session is in the
 * file too: it goes on with the new process.
 */
describe('running tasks survive a kill -9 and restart on SQLite', () => {
  let upstreams: ResumeUpstreams
  let everythingProxy: CountingProxy
  let replayProxy: CountingProxy
  const processes: GatewayProcess[] = []

  beforeAll(async () => {
    upstreams = await startResumeUpstreams()
    ;({ everythingProxy, replayProxy } = upstreams)
  }, 90_000)

  afterAll(async () => {
    await stopAll(processes)
    await upstreams?.close()
  })

  /**
   * Starts a process on a new file, runs `count` tasks of `tool` through it, waits until each records how it is
   * resumed, kills the process and starts another on the file. Returns the session on the new process and the tasks.
   */
  async function killMidway (
    tool: string,
    args: (i: number) => Record<string, unknown>,
    count: number,
    kind: ResumeKind,
  ): Promise<{ after: RawSession, taskIds: string[], second: GatewayProcess }> {
    const database = join(mkdtempSync(join(tmpdir(), 'gw-resume-')), 'gateway.db')
    const file = writeConfig(`
store: { kind: sqlite, path: ${JSON.stringify(database)} }
tasks: { pollInterval: 50ms }
upstreams:
  - { name: ev, transport: streamable-http, url: ${JSON.stringify(everythingProxy.url)}, timeouts: { connect: 60s } }
  - { name: rp, transport: streamable-http, url: ${JSON.stringify(replayProxy.url)} }
`)
    const first = await startGatewayProcess(file)
    processes.push(first)
    const session = await RawSession.open(first.url)
    const taskIds = await Promise.all(Array.from({ length: count }, async (_, i) => await legacyTask(session, tool, args(i))))
    await recordedInSqlite(database, taskIds, kind)
    first.child.kill('SIGKILL')
    await first.exited
    const second = await startGatewayProcess(file)
    processes.push(second)
    return { after: session.on(second.url), taskIds, second }
  }

  it.concurrent('the upstream\'s own tasks: every task completes with its real report, none run twice upstream', { timeout: 90_000 }, async () => {
    const before = everythingProxy.count('tools/call simulate-research-query')
    const { after, taskIds, second } = await killMidway('ev__simulate-research-query', (i) => ({ topic: `restart ${i}` }), 5, 'native')
    await expectCompleted(after, taskIds, (i) => `Research Report: restart ${i}`)
    expect(everythingProxy.count('tools/call simulate-research-query') - before).toBe(5)
    expect(second.lines.some((line) => line.includes('recovered tasks interrupted by a restart') && line.includes('"resumed":5'))).toBe(true)
  })

  it.concurrent('plain calls whose streams the upstream replays: every task completes with the call\'s result, none called twice', { timeout: 60_000 }, async () => {
    const before = replayProxy.count('tools/call slow_report')
    const { after, taskIds } = await killMidway('rp__slow_report', (i) => ({ topic: `restart ${i}`, ms: 3000 }), 3, 'stream')
    await expectCompleted(after, taskIds, (i) => `report on restart ${i} after 3 steps`)
    expect(replayProxy.count('tools/call slow_report') - before).toBe(3)
  })
})
