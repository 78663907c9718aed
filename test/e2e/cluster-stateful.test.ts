import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { fixture } from '../helpers/built.ts'
import { startCluster, type Cluster } from '../helpers/cluster.ts'
import { SHARED_KINDS } from '../helpers/shared-store.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { runTask } from '../helpers/tasks.ts'

type Json = Record<string, unknown>

async function call (client: Client, name: string, args: Json = {}): Promise<string> {
  return textOf(await client.callTool({ name: `s__${name}`, arguments: args }))
}

/**
 * Three gateway processes on one shared store (Redis, then PostgreSQL) behind a round-robin balancer with no affinity, in front of a
 * stdio server that keeps state per process: every request of a client, whichever process it lands on,
 * reaches the one upstream session (one child process, on the client's home process) that serves it.
 */
describe.each(SHARED_KINDS)('a stateful stdio upstream behind three gateway processes on %s', (kind) => {
  let cluster: Cluster
  let alice: Client

  beforeAll(async () => {
    cluster = await startCluster(`tasks: { pollInterval: 50ms }
upstreams:
  - name: s
    transport: stdio
    command: ${JSON.stringify(process.execPath)}
    args: [${fixture('stateful-upstream')}]
`, { store: kind })
    alice = await connectV1(cluster.url)
  })

  afterAll(async () => {
    await alice?.close()
    await cluster?.close()
  })

  it('counts on for one client over sequential and concurrent calls and a task, wherever they land', async () => {
    for (let i = 1; i <= 5; i++) expect(await call(alice, 'inc')).toBe(String(i))
    const concurrent = await Promise.all(Array.from({ length: 6 }, async () => await call(alice, 'inc')))
    expect(concurrent.map(Number).sort((a, b) => a - b)).toEqual([6, 7, 8, 9, 10, 11])
    const task = await runTask(alice, 's__inc', {})
    expect(textOf(task.result)).toBe('12')
    await call(alice, 'add_note', { text: 'one state' })
    expect(await call(alice, 'notes')).toBe('one state')
    expect((await alice.readResource({ uri: 'notes://all' })).contents).toMatchObject([{ text: 'one state' }])
    const instances = new Set(await Promise.all(Array.from({ length: 6 }, async () => (JSON.parse(await call(alice, 'whoami')) as Json).instance)))
    expect(instances.size).toBe(1)
    // Every process served some of those requests.
    for (const served of cluster.balancer.served.values()) expect(served).toBeGreaterThan(3)
  })

  it('relays a client\'s elicitation from the home process to whichever process holds its request, and keeps clients apart', async () => {
    const bob = await connectV1(cluster.url, { onElicit: (params) => ({ action: 'accept', content: { name: `Bob (${String(params.message)})` } }) })
    try {
      expect(await call(bob, 'inc')).toBe('1')
      expect(await call(bob, 'ask', { question: 'Who?' })).toBe('Who? Bob (Who?)')
      const answers = await Promise.all(['A?', 'B?', 'C?'].map(async (question) => await call(bob, 'ask', { question })))
      expect(answers).toEqual(['A? Bob (A?)', 'B? Bob (B?)', 'C? Bob (C?)'])
      expect(await call(bob, 'inc')).toBe('2')
      expect(await call(alice, 'inc')).toBe('13')
    } finally {
      await bob.close()
    }
  })

  it('gives a 2026-07-28 client one consistent state, wherever its requests land', async () => {
    const modern = new ModernRaw(cluster.url, { elicitation: { form: {} } })
    const counts: string[] = []
    for (let i = 0; i < 4; i++) counts.push(((await modern.result('tools/call', { name: 's__inc', arguments: {} })).content as Json[]).map((c) => String(c.text)).join(''))
    expect(counts).toEqual(['1', '2', '3', '4'])
  })
})
