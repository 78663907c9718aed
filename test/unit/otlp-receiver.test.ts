import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api'
// The serializers the OTLP exporters use (a dependency of @opentelemetry/exporter-trace-otlp-http).
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { fetch } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { OtlpReceiver } from '../helpers/otlp-receiver.ts'

/** The test collector reads both encodings of an export request alike, as the tracing tests rely on it. */
describe('the test OTLP receiver', () => {
  const receiver = new OtlpReceiver()
  beforeAll(async () => { await receiver.listen() })
  afterAll(async () => { await receiver.close() })

  it('records the same spans from a JSON and a protobuf export of them', async () => {
    const exporter = new InMemorySpanExporter()
    const provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ 'service.name': 'svc', 'service.instance.id': 'p-1' }),
      spanProcessors: [new SimpleSpanProcessor(exporter)],
    })
    const tracer = provider.getTracer('test')
    const other = tracer.startSpan('elsewhere')
    other.end()
    const server = tracer.startSpan('tools/call x', { kind: SpanKind.SERVER, attributes: { text: 'héllo', count: -3, ratio: 0.5, flag: true }, links: [{ context: other.spanContext() }] })
    const client = tracer.startSpan('tools/call y', { kind: SpanKind.CLIENT }, trace.setSpan(ROOT_CONTEXT, server))
    client.setStatus({ code: SpanStatusCode.ERROR })
    client.end()
    server.end()
    const spans = exporter.getFinishedSpans()

    for (const [type, serializer] of [['application/json', JsonTraceSerializer], ['application/x-protobuf', ProtobufTraceSerializer]] as const) {
      const res = await fetch(receiver.url, { method: 'POST', headers: { 'content-type': type }, body: serializer.serializeRequest(spans) })
      expect(res.status).toBe(200)
      await res.arrayBuffer()
    }
    expect(receiver.requests).toEqual(new Map([['application/json', 1], ['application/x-protobuf', 1]]))
    const [json, protobuf] = [receiver.spans.slice(0, 3), receiver.spans.slice(3)]
    expect(protobuf).toEqual(json)
    type Ids = { traceId: string, spanId: string }
    const ids = (span: { spanContext: () => Ids }): Ids => ({ traceId: span.spanContext().traceId, spanId: span.spanContext().spanId })
    expect(json).toEqual(expect.arrayContaining([
      expect.objectContaining({ ...ids(server), name: 'tools/call x', kind: 'server', parentSpanId: '', attributes: { text: 'héllo', count: -3, ratio: 0.5, flag: true }, links: [ids(other)], statusCode: 0, service: 'svc', instance: 'p-1' }),
      expect.objectContaining({ ...ids(client), name: 'tools/call y', kind: 'client', parentSpanId: server.spanContext().spanId, statusCode: 2 }),
    ]))
    await provider.shutdown()
  })
})
