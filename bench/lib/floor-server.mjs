// The floors the bench holds the gateway to, each a child process (plain JS, no tsx) that prints
// `listening <port>` on stdout once it accepts connections on 127.0.0.1:
//
//   node floor-server.mjs fastify '<json: { contentType, answer }>'
//     A bare Fastify route (the gateway's Fastify) answering every POST /mcp with `answer`, a JSON-RPC answer
//     the gateway gave, with the request's id put in: the HTTP and JSON work of a request without the gateway.
//   node floor-server.mjs forward <upstream origin> <connections>
//     A bare HTTP forwarder on undici: each request's body streamed to the same path on the upstream over a
//     keep-alive pool of `connections` sockets, the answer streamed back. The cost of one extra hop, no MCP.
import { createServer } from 'node:http'
import { pipeline } from 'node:stream/promises'
import Fastify from 'fastify'
import { Pool } from 'undici'

const [mode, arg, connections] = process.argv.slice(2)

/** Headers of one connection that a forwarder does not pass on. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host'])

function passable (headers) {
  const out = {}
  for (const [name, value] of Object.entries(headers)) if (!HOP_BY_HOP.has(name) && value !== undefined) out[name] = value
  return out
}

async function fastifyFloor ({ contentType, answer }) {
  const app = Fastify({ logger: false })
  const sse = contentType.startsWith('text/event-stream')
  app.post('/mcp', async (request, reply) => {
    const message = { ...answer, id: request.body?.id ?? null }
    reply.type(contentType)
    return sse ? `event: message\ndata: ${JSON.stringify(message)}\n\n` : message
  })
  await app.listen({ host: '127.0.0.1', port: 0 })
  return app.server.address().port
}

async function forwarder (upstream, size) {
  const pool = new Pool(upstream, { connections: size, pipelining: 1, keepAliveTimeout: 60_000 })
  const server = createServer((req, res) => {
    const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : req
    pool.request({ method: req.method, path: req.url, headers: passable(req.headers), body })
      .then(async (answer) => {
        res.writeHead(answer.statusCode, passable(answer.headers))
        await pipeline(answer.body, res)
      })
      .catch((err) => {
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' })
        res.end(String(err))
      })
  })
  server.keepAliveTimeout = 60_000
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  return server.address().port
}

const port = mode === 'fastify'
  ? await fastifyFloor(JSON.parse(arg))
  : mode === 'forward'
    ? await forwarder(arg, Number(connections))
    : (() => { throw new Error(`unknown floor ${mode}`) })()
process.stdout.write(`listening ${port}\n`)
process.on('SIGTERM', () => process.exit(0))
