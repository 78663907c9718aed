import { once } from 'node:events'
import { EventEmitter } from 'node:events'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { decodeTraceRequest } from './otlp-protobuf.ts'

export type AttributeValue = string | number | boolean

/** One span as a collector received it, in the few fields the tests read. */
export interface RecordedSpan {
  traceId: string
  spanId: string
  /** '' for a root span. */
  parentSpanId: string
  name: string
  kind: 'internal' | 'server' | 'client' | 'producer' | 'consumer' | 'unspecified'
  attributes: Record<string, AttributeValue>
  links: Array<{ traceId: string, spanId: string }>
  /** 0 unset, 1 ok, 2 error. */
  statusCode: number
  /** The resource's service.name and service.instance.id (the gateway process). */
  service: string
  instance: string
}

const KINDS: readonly RecordedSpan['kind'][] = ['unspecified', 'internal', 'server', 'client', 'producer', 'consumer']

export function spanKind (kind: number): RecordedSpan['kind'] {
  return KINDS[kind] ?? 'unspecified'
}

interface JsonAnyValue { stringValue?: string, boolValue?: boolean, intValue?: number | string, doubleValue?: number }
interface JsonKeyValue { key: string, value?: JsonAnyValue }
interface JsonSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind?: number
  attributes?: JsonKeyValue[]
  links?: Array<{ traceId: string, spanId: string }>
  status?: { code?: number }
}
interface JsonRequest { resourceSpans?: Array<{ resource?: { attributes?: JsonKeyValue[] }, scopeSpans?: Array<{ spans?: JsonSpan[] }> }> }

function jsonValue (value: JsonAnyValue | undefined): AttributeValue {
  if (value?.stringValue !== undefined) return value.stringValue
  if (value?.boolValue !== undefined) return value.boolValue
  if (value?.intValue !== undefined) return Number(value.intValue)
  return value?.doubleValue ?? ''
}

function jsonAttributes (list: JsonKeyValue[] | undefined): Record<string, AttributeValue> {
  return Object.fromEntries((list ?? []).map((kv) => [kv.key, jsonValue(kv.value)]))
}

/** The spans of an OTLP/HTTP JSON export request (trace and span ids in hex, as OTLP/JSON writes them). */
function decodeJson (body: Buffer): RecordedSpan[] {
  const request = JSON.parse(body.toString('utf8')) as JsonRequest
  return (request.resourceSpans ?? []).flatMap((resourceSpans) => {
    const resource = jsonAttributes(resourceSpans.resource?.attributes)
    return (resourceSpans.scopeSpans ?? []).flatMap((scope) => (scope.spans ?? []).map((span) => ({
      traceId: span.traceId,
      spanId: span.spanId,
      parentSpanId: span.parentSpanId ?? '',
      name: span.name,
      kind: spanKind(span.kind ?? 0),
      attributes: jsonAttributes(span.attributes),
      links: (span.links ?? []).map((link) => ({ traceId: link.traceId, spanId: link.spanId })),
      statusCode: span.status?.code ?? 0,
      service: String(resource['service.name'] ?? ''),
      instance: String(resource['service.instance.id'] ?? ''),
    })))
  })
}

/**
 * A small OTLP/HTTP trace collector on a loopback port: it accepts export requests at `/v1/traces` in JSON
 * or protobuf, answers them as a collector does, and records their spans.
 */
export class OtlpReceiver {
  readonly spans: RecordedSpan[] = []
  /** Export requests received, by content type. */
  readonly requests = new Map<string, number>()
  /** Header values each export request carried, for the header under test. */
  readonly headers: Array<Record<string, string | string[] | undefined>> = []
  readonly #events = new EventEmitter()
  readonly #server: Server
  /** `http://127.0.0.1:<port>/v1/traces` once listening. */
  url = ''

  constructor () {
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (chunk: Buffer) => chunks.push(chunk))
      req.on('end', () => {
        const type = String(req.headers['content-type'] ?? '')
        if (req.method !== 'POST' || req.url !== '/v1/traces') {
          res.writeHead(404).end()
          return
        }
        const body = Buffer.concat(chunks)
        let spans: RecordedSpan[]
        try {
          spans = type.includes('json') ? decodeJson(body) : decodeTraceRequest(body)
        } catch {
          res.writeHead(400).end()
          return
        }
        this.requests.set(type, (this.requests.get(type) ?? 0) + 1)
        this.headers.push(req.headers)
        this.spans.push(...spans)
        res.writeHead(200, { 'content-type': type.includes('json') ? 'application/json' : 'application/x-protobuf' })
        res.end(type.includes('json') ? '{}' : undefined)
        this.#events.emit('spans')
      })
    })
  }

  async listen (): Promise<string> {
    this.#server.listen(0, '127.0.0.1')
    await once(this.#server, 'listening')
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/v1/traces`
    return this.url
  }

  /**
   * Resolves with the spans once `ready` says they are all there, checked on every export received; rejects
   * after `timeoutMs` with what arrived.
   */
  async waitFor (what: string, ready: (spans: RecordedSpan[]) => boolean, timeoutMs = 15_000): Promise<RecordedSpan[]> {
    if (ready(this.spans)) return this.spans
    return await new Promise<RecordedSpan[]>((resolve, reject) => {
      const check = (): void => {
        if (!ready(this.spans)) return
        clearTimeout(timer)
        this.#events.off('spans', check)
        resolve(this.spans)
      }
      const timer = setTimeout(() => {
        this.#events.off('spans', check)
        const seen = this.spans.map((s) => `${s.name} (${s.kind}, ${s.instance}, ${s.traceId}/${s.spanId} under ${s.parentSpanId || 'none'}) ${JSON.stringify(s.attributes)}`)
        reject(new Error(`${what}: not received within ${timeoutMs} ms; spans:\n${seen.join('\n')}`))
      }, timeoutMs)
      this.#events.on('spans', check)
    })
  }

  async close (): Promise<void> {
    this.#server.closeAllConnections()
    this.#server.close()
    await once(this.#server, 'close')
  }
}
