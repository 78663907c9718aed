import { describe, expect, it } from 'vitest'
import { SseParser, type ParsedSseEvent } from '../../src/upstream/sse-parser.ts'

function parse (...chunks: string[]): ParsedSseEvent[] {
  const events: ParsedSseEvent[] = []
  const parser = new SseParser((event) => events.push(event))
  for (const chunk of chunks) parser.push(Buffer.from(chunk))
  return events
}

describe('SseParser', () => {
  it('reads events with ids, types and multi-line data', () => {
    expect(parse('id: 1\nevent: message\ndata: {"a":\ndata: 1}\n\n')).toEqual([{ id: '1', event: 'message', data: '{"a":\n1}' }])
  })

  it('joins events split across chunks, even inside a UTF-8 character and a CRLF', () => {
    const text = Buffer.from('data: héllo\r\n\r\n')
    const events: ParsedSseEvent[] = []
    const parser = new SseParser((event) => events.push(event))
    for (let i = 0; i < text.length; i++) parser.push(text.subarray(i, i + 1))
    expect(events).toEqual([{ data: 'héllo' }])
  })

  it('skips comments and reports priming events (id without data)', () => {
    expect(parse(': keep-alive\n\nid: s:0\ndata: \n\n', 'data: x\r\r\n')).toEqual([{ id: 's:0', data: '' }, { data: 'x' }])
  })

  it('waits for the blank line before dispatching', () => {
    expect(parse('data: partial\n')).toEqual([])
  })
})
