import { describe, expect, it } from 'vitest'
import type { JSONRPCMessage } from '@modelcontextprotocol/client'
import { ResponseTooLarge, responseTooLarge, type ResponseLimits } from '../../src/upstream/response-limit.ts'
import { responseIdOf, StdioLineReader } from '../../src/upstream/stdio-line-reader.ts'
import { chunked, leastCpu } from '../helpers/cpu-ratio.ts'

function reader (maxResponseBytes: number, seen: Array<{ tooLarge: ResponseTooLarge, id: unknown }> = []): StdioLineReader {
  const limits: ResponseLimits = { maxResponseBytes, onTooLarge: (tooLarge, id) => seen.push({ tooLarge, id }) }
  return new StdioLineReader(limits)
}

function drain (lines: StdioLineReader): JSONRPCMessage[] {
  const messages: JSONRPCMessage[] = []
  for (let message = lines.readMessage(); message !== null; message = lines.readMessage()) messages.push(message)
  return messages
}

/** A response as the TypeScript SDK writes it (result first, id last) holding a text of `bytes` bytes. */
function response (id: number, bytes: number): Buffer {
  return Buffer.from(`${JSON.stringify({ result: { content: [{ type: 'text', text: 'x'.repeat(bytes) }] }, jsonrpc: '2.0', id })}\n`)
}

describe('StdioLineReader', () => {
  it('reads messages however the lines are cut, skipping lines that are not JSON and CRs before the LF', () => {
    const lines = reader(1024)
    const text = Buffer.from('{"jsonrpc":"2.0","id":1,"result":{}}\r\nnot json\n{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"é"}}\n')
    for (const chunk of chunked(text, 1)) lines.append(chunk)
    expect(drain(lines)).toEqual([
      { jsonrpc: '2.0', id: 1, result: {} },
      { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'é' } },
    ])
  })

  it('fails the request a line over maxResponseBytes answered, holding none of it, and reads the lines after it', () => {
    const seen: Array<{ tooLarge: ResponseTooLarge, id: unknown }> = []
    const lines = reader(1000, seen)
    for (const chunk of chunked(Buffer.concat([response(4, 100_000), response(5, 10)]), 4096)) lines.append(chunk)
    const [failed, after] = drain(lines) as Array<{ id: number, error?: { data: unknown } }>
    expect(failed).toMatchObject({ id: 4, error: { code: -32603 } })
    expect(responseTooLarge(failed!.error)).toBeInstanceOf(ResponseTooLarge)
    expect(after).toMatchObject({ id: 5, result: { content: [{ text: 'x'.repeat(10) }] } })
    expect(seen).toHaveLength(1)
    expect(seen[0]).toMatchObject({ id: 4, tooLarge: { bytes: 1000 } })
  })

  it('reports a line over maxResponseBytes that answers no request of the gateway as an error, and reads the lines after it', () => {
    const seen: Array<{ tooLarge: ResponseTooLarge, id: unknown }> = []
    const lines = reader(1000, seen)
    const notification = JSON.stringify({ method: 'notifications/message', params: { level: 'info', data: 'x'.repeat(5000) }, jsonrpc: '2.0' })
    lines.append(Buffer.from(`${notification}\n{"jsonrpc":"2.0","id":2,"result":{}}\n`))
    expect(() => lines.readMessage()).toThrow(/message of \d+ bytes, over maxResponseBytes \(1000 bytes\)/)
    expect(lines.readMessage()).toEqual({ jsonrpc: '2.0', id: 2, result: {} })
    expect(seen).toMatchObject([{ id: undefined }])
  })

  it('tells a response id from the ends of a line, in either order, and nothing from other messages', () => {
    expect(responseIdOf('{"result":{"content":[{"text":"xx', 'xx"}]},"jsonrpc":"2.0","id":12}')).toBe(12)
    expect(responseIdOf('{"jsonrpc":"2.0","id":"a\\"b","result":{"content":', 'xx"}]}}')).toBe('a"b')
    expect(responseIdOf('{"error":{"code":1,"message":"xx', 'xx"},"id":3}')).toBe(3)
    // A request of the upstream (its id is the upstream's own), a notification, a nested id: no request of ours to fail.
    expect(responseIdOf('{"method":"sampling/createMessage","params":{"x":"', 'x"},"jsonrpc":"2.0","id":0}')).toBeUndefined()
    expect(responseIdOf('{"method":"notifications/message","params":{"data":"', 'x"}}')).toBeUndefined()
    expect(responseIdOf('{"result":{"content":[{"text":"', 'x","id":9}]}}')).toBeUndefined()
  })

  it('splits one 8 MB line in 64 KB chunks for about the CPU of eight 1 MB lines (linear time)', () => {
    const readAll = (chunks: Buffer[]): void => {
      const lines = reader(64 << 20)
      for (const chunk of chunks) lines.append(chunk)
      if (drain(lines).length !== 1) throw new Error('no message')
    }
    const small = chunked(response(1, 1 << 20), 65_536)
    const large = chunked(response(1, 8 << 20), 65_536)
    readAll(small)
    const eightSmall = leastCpu(() => { for (let i = 0; i < 8; i++) readAll(small) })
    expect(leastCpu(() => readAll(large)) / eightSmall).toBeLessThan(3)
  })
})
