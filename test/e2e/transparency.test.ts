import { writeFileSync } from 'node:fs'
import { afterAll, describe, expect, it } from 'vitest'
import { startGateway } from '../helpers/gateway.ts'
import { runTask } from '../helpers/tasks.ts'
import { sampleObject } from '../transparency/arguments.ts'
import { ALLOW_LIST, type AllowEntry } from '../transparency/allow-list.ts'
import { addReceived, compare, leaks, type Difference } from '../transparency/compare.ts'
import { runListing, runScript } from '../transparency/script.ts'
import { FOREIGN_SERVERS, type RunningServer, type Side } from '../transparency/servers.ts'
import { connectScripted, ERAS, type Era } from '../transparency/sessions.ts'

/**
 * A server behind the gateway looks as it does directly. For each foreign server (published on the npm
 * registry) and each era, the same scripted session runs directly and through a gateway that has the server as
 * its only upstream with names passed through; the transcripts are compared item by item after normalisation
 * (test/transparency/normalise.ts). A difference fails the test unless test/transparency/allow-list.ts lists
 * it with its reason; nothing of the gateway's own may reach the client. docs/development.md tells how to read
 * a failure.
 */
const results: Array<{ server: string, era: Era, compared: number, differences: Difference[] }> = []

async function session (era: Era, running: RunningServer, side: Side, gatewayUrl: string) {
  const target = side === 'direct' ? running.direct : { kind: 'http' as const, url: gatewayUrl }
  const recorded = await connectScripted(era, target, running.sides[side], side === 'gateway')
  try {
    const transcript = await runScript(recorded.session, { era, args: running.sides[side].args })
    addReceived(transcript, recorded)
    return { transcript, recorded }
  } finally {
    await recorded.close()
  }
}

/** The tools a 2025-11-25 client that declares every capability lists on `side`. */
async function listing (running: RunningServer, side: Side, gatewayUrl: string) {
  const target = side === 'direct' ? running.direct : { kind: 'http' as const, url: gatewayUrl }
  const recorded = await connectScripted('2025-11-25', target, running.sides[side], side === 'gateway', true)
  try {
    return await runListing(recorded.session)
  } finally {
    await recorded.close()
  }
}

/** Tools that, where a server has them, run as tasks in the leak check: they ask the client for input or send progress. */
const TASK_TOOLS = ['trigger-elicitation-request', 'trigger-sampling-request', 'get-roots-list', 'trigger-long-running-operation']

/**
 * Runs tools as 2025-11-25 tasks through the gateway (those of TASK_TOOLS, else the first listed) and returns
 * what of the gateway's own reached the client; the tasks' own ids may appear in statuses and related-task metadata.
 */
async function taskLeaks (running: RunningServer, gatewayUrl: string): Promise<string[]> {
  const side = running.sides.gateway
  const recorded = await connectScripted('2025-11-25', { kind: 'http', url: gatewayUrl }, side, true)
  const own = new Set<string>()
  try {
    const client = recorded.v1 as NonNullable<typeof recorded.v1>
    const tools = (await client.listTools()).tools
    const chosen = tools.filter((t) => TASK_TOOLS.includes(t.name))
    for (const tool of chosen.length > 0 ? chosen : tools.slice(0, 1)) {
      const outcome = await runTask(client, tool.name, side.args(tool.name) ?? sampleObject(tool.inputSchema), { onprogress: () => {} })
      if (outcome.taskId !== undefined) own.add(outcome.taskId)
    }
  } finally {
    await recorded.close()
  }
  return leaks(recorded, own).map((leak) => `a task's session: ${leak}`)
}

function explain (differences: Difference[]): string {
  return differences.map((d) => `${d.server} ${d.era} ${d.item}\n  direct:  ${d.direct.slice(0, 600)}\n  gateway: ${d.gateway.slice(0, 600)}`).join('\n')
}

describe.concurrent('a foreign server behind the gateway looks as it does directly', () => {
  for (const server of FOREIGN_SERVERS) {
    it(`${server.id} (${server.pkg})`, { timeout: 180_000 }, async () => {
      const running = await server.start()
      const gw = await startGateway({ upstreams: [running.upstream] }).catch(async (error: unknown) => {
        await running.close()
        throw error
      })
      const unexplained: Difference[] = []
      const leaked: string[] = []
      try {
        for (const era of ERAS) {
          const [direct, gateway] = await Promise.all([session(era, running, 'direct', gw.url), session(era, running, 'gateway', gw.url)])
          if (era === '2025-11-25') {
            const [left, right] = await Promise.all([listing(running, 'direct', gw.url), listing(running, 'gateway', gw.url)])
            for (const [item, value] of left) direct.transcript.set(item, value)
            for (const [item, value] of right) gateway.transcript.set(item, value)
          }
          const dirs = (side: Side): string[] => [running.sides[side].dir]
          const comparison = compare(server.id, era, { transcript: direct.transcript, dirs: dirs('direct') }, { transcript: gateway.transcript, dirs: dirs('gateway') })
          results.push({ server: server.id, era, ...comparison })
          unexplained.push(...comparison.differences.filter((d) => d.allowed === undefined))
          leaked.push(...leaks(gateway.recorded).map((leak) => `${era}: ${leak}`))
        }
        leaked.push(...await taskLeaks(running, gw.url))
      } finally {
        await gw.close()
        await running.close()
      }
      expect(leaked, 'something of the gateway\'s own reached the client').toEqual([])
      expect(unexplained, `differences not in test/transparency/allow-list.ts:\n${explain(unexplained)}`).toEqual([])
    })
  }
})

describe('the allow-list of test/e2e/transparency.test.ts', () => {
  afterAll(() => {
    const count = (differences: Difference[], kind: (entry: AllowEntry) => boolean): string =>
      String(differences.filter((d) => d.allowed !== undefined && kind(d.allowed)).length).padStart(3)
    const lines = results.map((r) => [
      `${r.server.padEnd(20)} ${r.era}  items ${String(r.compared).padStart(4)}  differences ${String(r.differences.length).padStart(3)}:`,
      `by design ${count(r.differences, (e) => e.goesAwayWith === undefined && e.bug !== true)},`,
      `issue items ${count(r.differences, (e) => e.goesAwayWith !== undefined)},`,
      `bugs ${count(r.differences, (e) => e.bug === true)},`,
      `unexplained ${String(r.differences.filter((d) => d.allowed === undefined).length).padStart(3)}`,
    ].join(' '))
    process.stdout.write(`transparency: compared items and differences per server and era\n${lines.join('\n')}\n`)
    // TRANSPARENCY_REPORT=<file>: every difference, allowed or not, with both sides' normalised items.
    const report = process.env.TRANSPARENCY_REPORT
    if (report !== undefined && report !== '') writeFileSync(report, `${JSON.stringify(results, null, 2)}\n`)
  })

  it('lists only differences that still occur', () => {
    // Only when every server ran: a failed server leaves its entries unmatched.
    expect(results).toHaveLength(FOREIGN_SERVERS.length * ERAS.length)
    const matched = new Set(results.flatMap((r) => r.differences.map((d) => d.allowed)))
    const stale = ALLOW_LIST.filter((entry) => entry.sometimes !== true && !matched.has(entry))
    expect(stale.map((e) => `${e.server} ${e.era ?? '*'} ${e.item}: ${e.reason}`), 'entries that matched no difference: delete them').toEqual([])
  })
})
