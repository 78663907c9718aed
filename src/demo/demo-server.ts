/**
 * The demo upstream MCP server that ships with the gateway.
 *
 * `createDemoServer()` builds one fresh server instance. A v2 `McpServer`
 * can be connected to exactly one transport, so every connection (the stdio
 * pipe, or each Streamable HTTP session) gets its own instance, and with it
 * its own subscriptions and its own "extra" tool toggle.
 *
 * The server serves 2025-era (initialize + session) clients: tools send
 * push-style server→client requests (elicitation/create,
 * sampling/createMessage, roots/list) tied to the tool call that caused
 * them, which the 2026-07-28 per-request era does not allow.
 */
import { McpServer } from '@modelcontextprotocol/server'
import { DemoResourceState, registerDemoPromptsAndResources } from './demo-resources.ts'
import { DemoToolRegistry } from './demo-tool-registry.ts'
import { registerDemoTools } from './demo-tools.ts'

export const DEMO_SERVER_NAME = 'mcp-task-gateway-demo'
export const DEMO_SERVER_VERSION = '0.1.0'

/** Tool names present from the start (`extra` appears via `toggle_extra_tool`). */
export const DEMO_TOOL_NAMES = [
  'slow',
  'echo',
  'ask_user',
  'ask_url',
  'summarize',
  'list_roots',
  'fail_tool',
  'throw_error',
  'touch_resource',
  'toggle_extra_tool',
] as const

export interface DemoServerOptions {
  /** Server name reported in `initialize` (default `mcp-task-gateway-demo`). */
  name?: string
  /** Diagnostics sink; defaults to stderr (stdout is the stdio protocol channel). */
  log?: (line: string) => void
}

export function stderrLog (line: string): void {
  process.stderr.write(`[demo] ${line}\n`)
}

const INSTRUCTIONS = [
  'Demo upstream for the MCP task gateway.',
  'Use `slow` for a long-running call with progress, `echo` for a fast call,',
  '`ask_user`/`ask_url` for elicitation, `summarize` for sampling and',
  '`list_roots` for roots. `fail_tool` returns a tool error, `throw_error` a',
  'JSON-RPC error.',
].join(' ')

/** Builds a fresh, unconnected demo server. */
export function createDemoServer (options: DemoServerOptions = {}): McpServer {
  const log = options.log ?? stderrLog
  const mcp = new McpServer(
    { name: options.name ?? DEMO_SERVER_NAME, version: DEMO_SERVER_VERSION },
    {
      capabilities: {
        tools: { listChanged: true },
        prompts: { listChanged: false },
        resources: { subscribe: true, listChanged: false },
        completions: {},
      },
      instructions: INSTRUCTIONS,
    },
  )
  mcp.server.onerror = (error) => { log(`server error: ${error.message}`) }

  const resources = new DemoResourceState()
  registerDemoPromptsAndResources(mcp, resources)

  const registry = new DemoToolRegistry()
  registerDemoTools({ server: mcp.server, registry, resources, log })
  registry.install(mcp.server)
  return mcp
}
