import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { fixture } from '../helpers/built.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { gatewayForSuite, type RunningGateway, startGateway } from '../helpers/gateway.ts'
import { runTask } from '../helpers/tasks.ts'

type Json = Record<string, unknown>

const STATEFUL = { name: 's', transport: 'stdio', command: process.execPath, args: [fixture('stateful-upstream')] }
const ELICITATION = { capabilities: { elicitation: {} } }

async function call (client: Client, name: string, args: Json = {}): Promise<string> {
  return textOf(await client.callTool({ name: `s__${name}`, arguments: args }))
}

/** A client that answers every question with its own text, and records in which task each was shown. */
async function answering (url: string, shownIn: Map<string, string> = new Map()): Promise<Client> {
  return await connectV1(url, {
    onElicit: (params) => {
      const related = (params._meta as Json | undefined)?.['io.modelcontextprotocol/related-task'] as Json | undefined
      shownIn.set(String(params.message), String(related?.taskId))
      return { action: 'accept', content: { name: `answer to ${String(params.message)}` } }
    },
  })
}

// The two describes run side by side, each with a gateway of its own (a describe's tests one after another).
describe.concurrent('sessions: shared', () => {
  let gw: RunningGateway
  const clients: Client[] = []

  beforeAll(async () => {
    gw = await startGateway({ upstreams: [{ ...STATEFUL, sessions: 'shared' }] })
  })

  afterAll(async () => {
    for (const client of clients) await client.close()
    await gw?.close()
  })

  it.sequential('serves every client that declares the same capabilities from one session, and the others from another', async () => {
    const [a, b] = [await connectV1(gw.url, { capabilities: {} }), await connectV1(gw.url, { capabilities: {} })]
    const c = await answering(gw.url)
    clients.push(a, b, c)
    expect(await call(a, 'inc')).toBe('1')
    expect(await call(b, 'inc')).toBe('2')
    expect(JSON.parse(await call(a, 'whoami'))).toEqual(JSON.parse(await call(b, 'whoami')))
    expect(await call(c, 'inc')).toBe('1')
    expect((JSON.parse(await call(c, 'whoami')) as Json).capabilities).toEqual({ elicitation: { form: {}, url: {} } })
    expect(gw.gateway.upstreams[0]!.load.sessions).toBe(2)
  })

  it.sequential('refuses a question it cannot give to one client rather than ask the wrong one', async () => {
    const [a, b] = [await connectV1(gw.url, { ...ELICITATION, onElicit: () => ({ action: 'accept', content: { name: 'A' } }) }), await connectV1(gw.url, { ...ELICITATION, onElicit: () => ({ action: 'accept', content: { name: 'B' } }) })]
    clients.push(a, b)
    const answers = await Promise.all([call(a, 'ask_in_pair', { question: 'Who is A?' }), call(b, 'ask_in_pair', { question: 'Who is B?' })])
    for (const answer of answers) expect(answer).toMatch(/calls of several clients are in flight on this upstream session/)
  })
})

describe.concurrent('sessions: per-call', () => {
  const gw = gatewayForSuite({ upstreams: [{ ...STATEFUL, sessions: 'per-call' }], tasks: { pollInterval: '50ms' } })

  it.sequential('shows each of two concurrent questions of one client in the task that asked it', async () => {
    const shownIn = new Map<string, string>()
    const client = await answering(gw.url, shownIn)
    try {
      const [first, second] = await Promise.all([runTask(client, 's__ask', { question: 'First?' }), runTask(client, 's__ask', { question: 'Second?' })])
      expect(textOf(first.result)).toBe('First? answer to First?')
      expect(textOf(second.result)).toBe('Second? answer to Second?')
      expect(Object.fromEntries(shownIn)).toEqual({ 'First?': first.taskId, 'Second?': second.taskId })
    } finally {
      await client.close()
    }
  })
})
