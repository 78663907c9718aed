import { describe, expect, it } from 'vitest'
import { JsonStreamParser } from '../../src/upstream/json-stream-parser.ts'
import { chunked, leastCpu } from '../helpers/cpu-ratio.ts'

function parse (...chunks: Array<string | Buffer>): { values: unknown[], rest: string } {
  const values: unknown[] = []
  const parser = new JsonStreamParser((text) => values.push(JSON.parse(text)))
  for (const chunk of chunks) parser.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)
  return { values, rest: parser.end() }
}

describe('JsonStreamParser', () => {
  it('gives a plain JSON body as one value, pretty-printed or not', () => {
    expect(parse('{"jsonrpc":"2.0","id":1,"result":{}}')).toEqual({ values: [{ jsonrpc: '2.0', id: 1, result: {} }], rest: '' })
    expect(parse('{\n  "id": 1,\n  "result": {\n    "content": []\n  }\n}\n')).toEqual({ values: [{ id: 1, result: { content: [] } }], rest: '' })
  })

  it('gives each message of a body written one per line as soon as it is complete', () => {
    const values: unknown[] = []
    const parser = new JsonStreamParser((text) => values.push(JSON.parse(text)))
    parser.push(Buffer.from('{"method":"notifications/subscriptions/acknowledged"}\n{"method":"notif'))
    expect(values).toEqual([{ method: 'notifications/subscriptions/acknowledged' }])
    parser.push(Buffer.from('ications/tools/list_changed"}\n'))
    expect(values).toHaveLength(2)
  })

  it('is not fooled by brackets and quotes inside strings, nor by a UTF-8 character split across chunks', () => {
    const text = Buffer.from('{"text":"} ] \\" { [ é"}[1,{"a":"]"}]')
    const chunks = [...text].map((byte) => Buffer.from([byte]))
    expect(parse(...chunks)).toEqual({ values: [{ text: '} ] " { [ é' }, [1, { a: ']' }]], rest: '' })
  })

  it('leaves what is not a complete object or array to the end', () => {
    expect(parse('{"a":1}\n{"b":')).toEqual({ values: [{ a: 1 }], rest: '{"b":' })
    expect(parse('42')).toEqual({ values: [], rest: '42' })
  })
})

describe('JsonStreamParser on large values', () => {
  /** One JSON-RPC response whose result holds a string of `bytes` bytes, with escapes in it. */
  const bigValue = (bytes: number): Buffer => Buffer.from(`{"jsonrpc":"2.0","id":1,"result":{"text":"${'ab\\"{'.repeat(bytes / 4)}"}}`)

  // The sizes only need 8× between them: rescanning what is buffered on every chunk costs (8²/8 =) 8× more at any size,
  // and 512 chunks of 4 KB are far from the per-parse constant costs (the test ran for half a minute under coverage at 8 MB).
  it('splits one 2 MB value in 4 KB chunks for about the CPU of eight 256 KB values (linear time: rescanning the buffer on every chunk costs 8× more)', () => {
    const parseAll = (chunks: Buffer[]): void => {
      let seen = 0
      const parser = new JsonStreamParser((text) => { seen += text.length })
      for (const chunk of chunks) parser.push(chunk)
      if (seen === 0) throw new Error('no value')
    }
    const small = chunked(bigValue(256 << 10), 4096)
    const large = chunked(bigValue(2 << 20), 4096)
    parseAll(small)
    const eightSmall = leastCpu(() => { for (let i = 0; i < 8; i++) parseAll(small) })
    const ratio = leastCpu(() => parseAll(large)) / eightSmall
    // Linear work gives about 1; work that grows with what is buffered gives 8 or more.
    expect(ratio).toBeLessThan(3)
  })

  it('gives up a value over maxValueBytes as it comes, telling once, and holds nothing of it', () => {
    const values: string[] = []
    const tooLarge: number[] = []
    const parser = new JsonStreamParser((text) => values.push(text), { maxValueBytes: 1000, onTooLarge: (bytes) => tooLarge.push(bytes) })
    parser.push(Buffer.from('{"small":1}\n'))
    for (const chunk of chunked(bigValue(100_000), 100)) parser.push(chunk)
    expect(values).toEqual(['{"small":1}'])
    expect(tooLarge).toHaveLength(1)
    expect(tooLarge[0]).toBeGreaterThan(1000)
    expect(tooLarge[0]).toBeLessThanOrEqual(1100)
    expect(parser.end()).toBe('')
  })
})
