/**
 * Runs the demo upstream's slow tool as a task through a running gateway, the way a 2025-11-25 client
 * does it, and prints what happens: the task handle, status changes, progress and the final result.
 *
 *   npm start                      # in one terminal: the gateway on its default configuration
 *   npm run demo                   # in another: this script against http://127.0.0.1:8080/mcp
 *   npm run demo -- http://host:port/mcp [tool] [duration-ms]
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js'

const url = new URL(process.argv[2] ?? 'http://127.0.0.1:8080/mcp')
const tool = process.argv[3] ?? 'demo__slow'
const duration = Number(process.argv[4] ?? 5000)

const client = new Client({ name: 'task-demo', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } })
// If the tool asks the user something while the task runs, answer as a scripted user would.
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  process.stdout.write(`  upstream asks: ${request.params.message}\n`)
  return { action: 'accept', content: { name: 'Demo User' } }
})
await client.connect(new StreamableHTTPClientTransport(url))
process.stdout.write(`connected to ${url.href}\n`)

const stream = client.experimental.tasks.callToolStream(
  { name: tool, arguments: { duration, steps: 5 } },
  undefined,
  {
    task: { ttl: 10 * 60_000 },
    timeout: 10 * 60_000,
    onprogress: (p) => process.stdout.write(`  progress ${p.progress}/${p.total ?? '?'} ${p.message ?? ''}\n`),
  },
)
let failed = false
for await (const message of stream) {
  switch (message.type) {
    case 'taskCreated':
      process.stdout.write(`task created: ${message.task.taskId} (ttl ${message.task.ttl} ms, poll every ${message.task.pollInterval} ms)\n`)
      break
    case 'taskStatus':
      process.stdout.write(`  status: ${message.task.status}${message.task.statusMessage ? ` - ${message.task.statusMessage}` : ''}\n`)
      break
    case 'result':
      process.stdout.write(`result: ${JSON.stringify(message.result.content)}\n`)
      break
    case 'error':
      failed = true
      process.stdout.write(`error: ${message.error.message}\n`)
      break
  }
}
await client.close()
process.exit(failed ? 1 : 0)
