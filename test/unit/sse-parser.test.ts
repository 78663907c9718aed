import { describe, expect, it } from 'vitest'
import { SseParser, type ParsedSseEvent } from '../../src/upstream/sse-parser.ts'
import { chunked, leastCpu } from '../helpers/cpu-ratio.ts'

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

  it('reports the reconnection time a `retry` field asks for (digits only, as the event-stream format says), apart from the events', () => {
    const retries: number[] = []
    const events: ParsedSseEvent[] = []
    const parser = new SseParser((event) => events.push(event), { onRetry: (ms) => retries.push(ms) })
    parser.push(Buffer.from('id: p1\nretry: 5000\ndata: \n\nretry: 2s\n\nretry: 250\n\n'))
    expect(retries).toEqual([5000, 250])
    expect(events).toEqual([{ id: 'p1', data: '' }])
  })
})

/** One event whose data is a JSON string of `bytes` bytes, as an upstream sends a large result. */
function bigEvent (bytes: number): Buffer {
  return Buffer.from(`id: 7\nevent: message\ndata: {"result":"${'x'.repeat(bytes)}"}\n\n`)
}

describe('SseParser on large events', () => {
  it('parses one 8 MB event in 4 KB chunks for about the CPU of eight 1 MB events (linear time: rescanning the buffer on every chunk costs 8× more)', () => {
    const parseAll = (chunks: Buffer[]): void => {
      let seen = 0
      const parser = new SseParser((event) => { seen += event.data.length })
      for (const chunk of chunks) parser.push(chunk)
      if (seen === 0) throw new Error('no event')
    }
    const small = chunked(bigEvent(1 << 20), 4096)
    const large = chunked(bigEvent(8 << 20), 4096)
    parseAll(small)
    const eightSmall = leastCpu(() => { for (let i = 0; i < 8; i++) parseAll(small) })
    const ratio = leastCpu(() => parseAll(large)) / eightSmall
    // Linear work gives about 1; work that grows with what is buffered gives 8 or more.
    expect(ratio).toBeLessThan(3)
  })

  it('gives the same event cut into 1-byte chunks as whole, with CR, LF and CRLF line ends', () => {
    const text = Buffer.from('id: 1\r\ndata: a\rdata: é\n\r\nevent: x\ndata: b\r\r')
    const whole = parse(text.toString())
    const events: ParsedSseEvent[] = []
    const parser = new SseParser((event) => events.push(event))
    for (const chunk of chunked(text, 1)) parser.push(chunk)
    expect(events).toEqual(whole)
    expect(whole).toEqual([{ id: '1', data: 'a\né' }, { event: 'x', data: 'b' }])
  })

  it('drops an event over maxEventBytes as it comes, tells once, and reads the events after it', () => {
    const events: ParsedSseEvent[] = []
    const tooLarge: number[] = []
    const parser = new SseParser((event) => events.push(event), { maxEventBytes: 1000, onTooLarge: (bytes) => tooLarge.push(bytes) })
    parser.push(Buffer.from('data: small\n\n'))
    for (const chunk of chunked(bigEvent(100_000), 100)) parser.push(chunk)
    parser.push(Buffer.from('data: after\n\n'))
    expect(events).toEqual([{ data: 'small' }, { data: 'after' }])
    expect(tooLarge).toHaveLength(1)
    expect(tooLarge[0]).toBeGreaterThan(1000)
    expect(tooLarge[0]).toBeLessThanOrEqual(1100)
  })
})
