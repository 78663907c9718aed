import { describe, expect, it } from 'vitest'
import { fixture } from '../helpers/built.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { demoStdio, gatewayForSuite } from '../helpers/gateway.ts'

/** The upstream sees exactly the capabilities of the client a call serves. */
describe('capability mirroring', () => {
  const gw = gatewayForSuite({ upstreams: [demoStdio(), { name: 's', transport: 'stdio', command: process.execPath, args: [fixture('stateful-upstream')] }] })

  it('lets a client without elicitation see the upstream refuse to ask, with a clear reason', async () => {
    const client = await connectV1(gw.url, { capabilities: {} })
    const outcome = await client.callTool({ name: 'demo__ask_user', arguments: {} }).then(
      (result) => ({ ok: true, text: textOf(result), isError: result.isError }),
      (err: unknown) => ({ ok: false, text: String(err), isError: true }),
    )
    expect(outcome.isError).toBe(true)
    expect(outcome.text.toLowerCase()).toContain('elicitation')
    await client.close()
  })

  it('relays url-mode elicitation to a client that declared it, and not to one that declared form only', async () => {
    const urls: string[] = []
    const both = await connectV1(gw.url, {
      capabilities: { elicitation: { form: {}, url: {} } },
      onElicit: (params) => {
        urls.push(String(params.url))
        return { action: 'accept' }
      },
    })
    const accepted = await both.callTool({ name: 'demo__ask_url', arguments: {} })
    expect(accepted.isError).toBeFalsy()
    expect(urls).toHaveLength(1)
    expect(urls[0]).toMatch(/^https?:\/\//)
    await both.close()

    const formOnly = await connectV1(gw.url, { capabilities: { elicitation: { form: {} } }, onElicit: () => ({ action: 'accept' }) })
    const refused = await formOnly.callTool({ name: 'demo__ask_url', arguments: {} }).then(
      (result) => ({ text: textOf(result), isError: result.isError === true }),
      (err: unknown) => ({ text: String(err), isError: true }),
    )
    expect(refused.isError).toBe(true)
    expect(refused.text.toLowerCase()).toContain('url')
    await formOnly.close()
  })

  it('answers an upstream that asks for a capability the client lacks with the documented error, whatever the capability', async () => {
    const formOnly = await connectV1(gw.url, { capabilities: { elicitation: { form: {} } }, onElicit: () => ({ action: 'accept' }) })
    const refused = await formOnly.callTool({ name: 's__open_link', arguments: { url: 'https://example.com/consent' } })
    // The upstream reports the error its request got: the gateway's documented one, not the SDK's own check.
    expect(refused.isError).toBe(true)
    expect(textOf(refused)).toContain("MCP error -32601: the downstream client did not declare the 'elicitation.url' capability, so 'elicitation/create' cannot be relayed to it")
    const bare = await connectV1(gw.url, { capabilities: {} })
    expect(textOf(await bare.callTool({ name: 's__open_link', arguments: { url: 'https://example.com/consent' } }))).toContain("did not declare the 'elicitation' capability")
    await formOnly.close()
    await bare.close()
  })

  it('asks a client that runs no tasks of its own the plain request when the upstream asks for a task anyway, and gives the upstream its answer', async () => {
    const asked: Array<Record<string, unknown>> = []
    const client = await connectV1(gw.url, {
      capabilities: { sampling: {} },
      onSample: (params) => {
        asked.push(params)
        return { role: 'assistant', content: { type: 'text', text: 'plainly sampled' }, model: 'm' }
      },
    })
    const result = await client.callTool({ name: 's__sample_as_task', arguments: { prompt: 'hi' } })
    expect(result.isError).toBeFalsy()
    expect(JSON.parse(textOf(result))).toMatchObject({ role: 'assistant', content: { text: 'plainly sampled' }, model: 'm' })
    expect(asked).toHaveLength(1)
    expect(asked[0]).not.toHaveProperty('task')
    await client.close()
  })
})
