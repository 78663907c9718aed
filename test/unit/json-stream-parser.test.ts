import { describe, expect, it } from 'vitest'
import { JsonStreamParser } from '../../src/upstream/json-stream-parser.ts'

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
