import { spanKind, type AttributeValue, type RecordedSpan } from './otlp-receiver.ts'

/**
 * Just enough of a protobuf reader for an OTLP `ExportTraceServiceRequest` (opentelemetry-proto
 * trace/v1 and common/v1): the fields RecordedSpan holds, everything else skipped by its wire type.
 */

interface Field {
  no: number
  /** A varint (wire type 0), a fixed64 or fixed32 as a number (1, 5), or the bytes (2). */
  value: bigint | number | Buffer
}

function varint (buf: Buffer, at: number): [bigint, number] {
  let result = 0n
  let shift = 0n
  for (;;) {
    const byte = buf[at++]
    if (byte === undefined) throw new Error('truncated varint')
    result |= BigInt(byte & 0x7f) << shift
    if ((byte & 0x80) === 0) return [result, at]
    shift += 7n
  }
}

function fields (buf: Buffer): Field[] {
  const out: Field[] = []
  let at = 0
  while (at < buf.length) {
    const [tag, next] = varint(buf, at)
    at = next
    const no = Number(tag >> 3n)
    switch (Number(tag & 7n)) {
      case 0: {
        const [value, after] = varint(buf, at)
        out.push({ no, value })
        at = after
        break
      }
      case 1:
        out.push({ no, value: buf.readDoubleLE(at) })
        at += 8
        break
      case 2: {
        const [length, after] = varint(buf, at)
        out.push({ no, value: buf.subarray(after, after + Number(length)) })
        at = after + Number(length)
        break
      }
      case 5:
        out.push({ no, value: buf.readUInt32LE(at) })
        at += 4
        break
      default:
        throw new Error(`unsupported wire type in field ${no}`)
    }
  }
  return out
}

function bytesOf (list: Field[], no: number): Buffer[] {
  return list.filter((f) => f.no === no && Buffer.isBuffer(f.value)).map((f) => f.value as Buffer)
}

function first (list: Field[], no: number): Field['value'] | undefined {
  return list.find((f) => f.no === no)?.value
}

function text (list: Field[], no: number): string {
  const value = first(list, no)
  return Buffer.isBuffer(value) ? value.toString('utf8') : ''
}

function hex (list: Field[], no: number): string {
  const value = first(list, no)
  return Buffer.isBuffer(value) ? value.toString('hex') : ''
}

/** AnyValue: 1 string, 2 bool, 3 int, 4 double. */
function anyValue (buf: Buffer): AttributeValue {
  const list = fields(buf)
  const value = list[0]
  if (value === undefined) return ''
  if (value.no === 1 && Buffer.isBuffer(value.value)) return value.value.toString('utf8')
  if (value.no === 2) return value.value === 1n
  if (value.no === 3) return Number(BigInt.asIntN(64, value.value as bigint))
  return typeof value.value === 'number' ? value.value : ''
}

/** KeyValue: 1 key, 2 value. */
function attributes (list: Buffer[]): Record<string, AttributeValue> {
  return Object.fromEntries(list.map((kv) => {
    const parts = fields(kv)
    const value = first(parts, 2)
    return [text(parts, 1), Buffer.isBuffer(value) ? anyValue(value) : '']
  }))
}

/**
 * ResourceSpans (1 resource, 2 scope_spans) → ScopeSpans (2 spans) → Span: 1 trace_id, 2 span_id,
 * 4 parent_span_id, 5 name, 6 kind, 9 attributes, 13 links (1 trace_id, 2 span_id), 15 status (3 code).
 */
export function decodeTraceRequest (body: Buffer): RecordedSpan[] {
  return bytesOf(fields(body), 1).flatMap((resourceSpans) => {
    const parts = fields(resourceSpans)
    const resourceBytes = bytesOf(parts, 1)[0]
    const resource = resourceBytes === undefined ? {} : attributes(bytesOf(fields(resourceBytes), 1))
    return bytesOf(parts, 2).flatMap((scope) => bytesOf(fields(scope), 2).map((spanBytes) => {
      const span = fields(spanBytes)
      const statusBytes = bytesOf(span, 15)[0]
      return {
        traceId: hex(span, 1),
        spanId: hex(span, 2),
        parentSpanId: hex(span, 4),
        name: text(span, 5),
        kind: spanKind(Number(first(span, 6) ?? 0n)),
        attributes: attributes(bytesOf(span, 9)),
        links: bytesOf(span, 13).map((link) => ({ traceId: hex(fields(link), 1), spanId: hex(fields(link), 2) })),
        statusCode: statusBytes === undefined ? 0 : Number(first(fields(statusBytes), 3) ?? 0n),
        service: String(resource['service.name'] ?? ''),
        instance: String(resource['service.instance.id'] ?? ''),
      }
    }))
  })
}
