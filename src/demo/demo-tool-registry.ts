/**
 * A small tool registry for the demo upstream, installed directly on the
 * low-level `Server` (`tools/list` + `tools/call`).
 *
 * Why not `McpServer.registerTool`? The SDK's built-in `tools/call` handler
 * converts every error thrown by a tool into an `isError` result. The demo
 * needs a tool (`throw_error`) whose failure reaches the client as a real
 * JSON-RPC error, so tools are dispatched here instead:
 *
 * - unknown tool name               → JSON-RPC error -32602
 * - arguments fail the schema       → `isError` result (tool execution error,
 *                                     so a model can correct itself)
 * - handler throws JsonRpcToolError → JSON-RPC error with its code/message/data
 * - handler throws anything else    → `isError` result carrying the message
 *   (including SDK/protocol errors, e.g. a client that refused roots/list)
 */
import {
  ProtocolError,
  ProtocolErrorCode,
  type CallToolResult,
  type Server,
  type ServerContext,
  type Tool,
  type ToolAnnotations,
} from '@modelcontextprotocol/server'
import * as z from 'zod'
import type { DemoSession } from './demo-world.ts'

/**
 * Thrown by a tool handler to answer `tools/call` with a JSON-RPC error
 * response instead of an `isError` result. The SDK puts `code`, `message`
 * and `data` on the wire as they are (except -32002, which it rewrites to
 * -32602).
 */
export class JsonRpcToolError extends Error {
  readonly code: number
  readonly data: unknown

  constructor (code: number, message: string, data?: unknown) {
    super(message)
    this.name = 'JsonRpcToolError'
    this.code = code
    this.data = data
  }
}

/**
 * What a tool author writes: a zod object schema plus a typed handler. The
 * handler also gets the calling session (the server instance the call came in on).
 */
export interface DemoToolSpec<S extends z.ZodObject> {
  name: string
  title?: string
  description: string
  inputSchema: S
  annotations?: ToolAnnotations
  handler: (args: z.output<S>, ctx: ServerContext, session: DemoSession) => Promise<CallToolResult>
}

/** A tool with its type parameter erased, as stored by the registry. */
export interface DemoTool {
  readonly name: string
  readonly listing: Tool
  call(rawArgs: unknown, ctx: ServerContext, session: DemoSession): Promise<CallToolResult>
}

/** Erases the schema type of a tool spec so tools can share one list. */
export function defineTool<S extends z.ZodObject> (spec: DemoToolSpec<S>): DemoTool {
  const listing: Tool = {
    name: spec.name,
    description: spec.description,
    inputSchema: toInputJsonSchema(spec.inputSchema),
  }
  if (spec.title !== undefined) listing.title = spec.title
  if (spec.annotations !== undefined) listing.annotations = spec.annotations
  return {
    name: spec.name,
    listing,
    async call (rawArgs, ctx, session) {
      const parsed = spec.inputSchema.safeParse(rawArgs ?? {})
      if (!parsed.success) {
        return errorResult(`Invalid arguments for tool ${spec.name}: ${z.prettifyError(parsed.error)}`)
      }
      return await spec.handler(parsed.data, ctx, session)
    },
  }
}

/** Converts a zod object schema into the JSON Schema object `tools/list` advertises. */
function toInputJsonSchema (schema: z.ZodObject): Tool['inputSchema'] {
  // A JSON round trip keeps only plain JSON data (drops zod's non-JSON extras).
  const json: Record<string, unknown> = JSON.parse(JSON.stringify(z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' })))
  delete json['$schema']
  return { ...json, type: 'object' }
}

/** Builds a one-text-block result. */
export function textResult (text: string): CallToolResult {
  return { content: [{ type: 'text', text }] }
}

/** Builds a one-text-block `isError` result. */
export function errorResult (text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true }
}

export class DemoToolRegistry {
  private readonly tools = new Map<string, DemoTool>()
  private readonly disabled = new Set<string>()

  /** Adds a tool; a disabled tool is neither listed nor callable until enabled. */
  add (tool: DemoTool, enabled = true): void {
    this.tools.set(tool.name, tool)
    if (enabled) this.disabled.delete(tool.name)
    else this.disabled.add(tool.name)
  }

  isEnabled (name: string): boolean {
    return this.tools.has(name) && !this.disabled.has(name)
  }

  /** Enables or disables a registered tool; returns whether anything changed. */
  setEnabled (name: string, enabled: boolean): boolean {
    if (!this.tools.has(name) || this.isEnabled(name) === enabled) return false
    if (enabled) this.disabled.delete(name)
    else this.disabled.add(name)
    return true
  }

  private enabledTools (): DemoTool[] {
    return [...this.tools.values()].filter((tool) => !this.disabled.has(tool.name))
  }

  /**
   * Installs `tools/list` and `tools/call` on one session's low-level server.
   * Must run before `connect()`; it also declares the `tools` capability (with
   * `listChanged`, because `toggle_extra_tool` changes the list at runtime).
   * One registry may be installed on many servers: they all share its tools.
   */
  install (server: Server, session: DemoSession): void {
    server.registerCapabilities({ tools: { listChanged: true } })
    server.setRequestHandler('tools/list', () => ({
      tools: this.enabledTools().map((tool) => tool.listing),
    }))
    server.setRequestHandler('tools/call', async (request, ctx) => {
      const tool = this.isEnabled(request.params.name) ? this.tools.get(request.params.name) : undefined
      if (tool === undefined) {
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`)
      }
      try {
        return await tool.call(request.params.arguments, ctx, session)
      } catch (error) {
        // Deliberate JSON-RPC errors (throw_error) and cancellations are not
        // tool results: rethrow so the SDK answers with a JSON-RPC error (or,
        // when the request was cancelled, sends nothing at all).
        if (error instanceof JsonRpcToolError || ctx.mcpReq.signal.aborted) throw error
        return errorResult(error instanceof Error ? error.message : String(error))
      }
    })
  }
}
