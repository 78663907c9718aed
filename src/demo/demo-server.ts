/**
 * The demo upstream MCP server that ships with the gateway.
 *
 * `createDemoServer()` builds one fresh server instance. A v2 `McpServer`
 * can be connected to exactly one transport, so every connection (the stdio
 * pipe, or each Streamable HTTP session) gets its own instance. Instances
 * built with the same {@link DemoWorld} (see `createDemoWorld()`) share the
 * tool list and resource state, like sessions of one real server; each keeps
 * its own resource subscriptions.
 *
 * The server serves 2025-era (initialize + session) clients: tools send
 * push-style server→client requests (elicitation/create,
 * sampling/createMessage, roots/list) tied to the tool call that caused
 * them, which the 2026-07-28 per-request era does not allow.
 */
import { McpServer } from '@modelcontextprotocol/server'
import { registerDemoPromptsAndResources } from './demo-resources.ts'
import { registerDemoTools, type DemoLog } from './demo-tools.ts'
import { DemoWorld } from './demo-world.ts'

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
  log?: DemoLog
  /** Shared state of all instances of one process; a fresh world when omitted. */
  world?: DemoWorld
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

/** Builds the shared state (tool list, resource revisions) for a set of demo servers. */
export function createDemoWorld (log: DemoLog = stderrLog): DemoWorld {
  const world = new DemoWorld()
  registerDemoTools(world, log)
  return world
}

/**
 * Builds a fresh, unconnected demo server. It joins `options.world` (or a new
 * world of its own) and leaves it when its connection closes; whoever sets
 * `server.onclose` afterwards must call the previous handler.
 */
export function createDemoServer (options: DemoServerOptions = {}): McpServer {
  const log = options.log ?? stderrLog
  const world = options.world ?? createDemoWorld(log)
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

  const session = world.join(mcp.server)
  mcp.server.onclose = () => { world.leave(session) }
  registerDemoPromptsAndResources(mcp, world, session)
  world.tools.install(mcp.server, session)
  return mcp
}
