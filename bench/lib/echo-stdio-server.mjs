// The stdio upstream of the stdio-peers section: an SDK v1 McpServer with one tool, `echo`, that returns
// its `text` argument. Plain JavaScript, so it starts like a published server (no TypeScript loader in
// each of its processes, which would inflate both the start time and the RSS every front end is charged).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { z } from 'zod'

const server = new McpServer({ name: 'bench-echo', version: '1.0.0' })
server.registerTool('echo', {
  description: 'Returns its text argument',
  inputSchema: { text: z.string() },
}, async ({ text }) => ({ content: [{ type: 'text', text }] }))

// A front end that dies without closing its sessions (SIGKILL, or supergateway's detached children)
// only leaves this process an EOF on stdin: exit then, so no echo server outlives its front end.
process.stdin.once('end', () => process.exit(0))
process.stdin.once('close', () => process.exit(0))

await server.connect(new StdioServerTransport())
