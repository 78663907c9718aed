/**
 * The tools of the demo upstream. Each tool is a plain MCP tool that knows
 * nothing about tasks; together they exercise every behaviour a gateway has
 * to relay: progress, cancellation, elicitation (form and URL), sampling,
 * roots, tool errors, JSON-RPC errors, resource-updated and list-changed
 * notifications.
 *
 * Notifications caused by a tool call reach the calling session on that
 * call's own stream (related to the request, before the result); other
 * sessions get them as standalone notifications.
 */
import { randomUUID } from 'node:crypto'
import { setTimeout as delay } from 'node:timers/promises'
import type { ServerContext } from '@modelcontextprotocol/server'
import * as z from 'zod'
import { JsonRpcToolError, defineTool, errorResult, textResult, type DemoTool } from './demo-tool-registry.ts'
import type { DemoSession, DemoWorld } from './demo-world.ts'

export type DemoLog = (line: string) => void

/**
 * Runs a server→client request; when the client fails it (for instance because
 * it lacks the capability), the error message is prefixed with the method so
 * the resulting `isError` text says what failed. Cancellation passes through.
 */
async function clientRequest<T> (method: string, ctx: ServerContext, send: () => Promise<T>): Promise<T> {
  try {
    return await send()
  } catch (error) {
    if (ctx.mcpReq.signal.aborted) throw error
    throw new Error(`${method} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error })
  }
}

/** Options that tie a server→client request to the tool call that caused it. */
function related (ctx: ServerContext): { relatedRequestId: string | number, signal: AbortSignal } {
  return { relatedRequestId: ctx.mcpReq.id, signal: ctx.mcpReq.signal }
}

const slow = (log: DemoLog): DemoTool => defineTool({
  name: 'slow',
  title: 'Slow operation',
  description: 'Waits `duration` milliseconds split into `steps` equal steps. Sends notifications/progress after every step when the call carries a progressToken, and stops early when the call is cancelled.',
  inputSchema: z.object({
    duration: z.number().int().min(0).max(3_600_000).default(3000).describe('Total run time in milliseconds (default 3000).'),
    steps: z.number().int().min(1).max(10_000).default(5).describe('Number of steps, one progress notification each (default 5).'),
  }),
  annotations: { readOnlyHint: true, openWorldHint: false },
  handler: async ({ duration, steps }, ctx) => {
    const progressToken = ctx.mcpReq._meta?.progressToken
    const stepMs = duration / steps
    for (let step = 1; step <= steps; step++) {
      try {
        await delay(stepMs, undefined, { signal: ctx.mcpReq.signal })
      } catch (error) {
        log(`slow: cancelled at step ${step}/${steps} (request ${String(ctx.mcpReq.id)}, reason: ${String(ctx.mcpReq.signal.reason)})`)
        throw error
      }
      if (progressToken !== undefined) {
        await ctx.mcpReq.notify({
          method: 'notifications/progress',
          params: { progressToken, progress: step, total: steps, message: `step ${step}/${steps}` },
        })
      }
    }
    return textResult(`slow finished: ${steps} steps in ${duration} ms`)
  },
})

const echo = defineTool({
  name: 'echo',
  title: 'Echo',
  description: 'Returns its `text` argument unchanged as a single text block. Fast; meant for benchmarks.',
  inputSchema: z.object({ text: z.string().describe('The text to return.') }),
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  handler: async ({ text }) => textResult(text),
})

const askUser = defineTool({
  name: 'ask_user',
  title: 'Ask the user for their name',
  description: 'Sends a form-mode elicitation/create asking the user for a name, and returns "Hello, <name>!" on accept, or says that the user declined or cancelled.',
  inputSchema: z.object({
    message: z.string().default('What is your name?').describe('The question shown to the user.'),
    timeoutMs: z.number().int().min(1).optional().describe('How long to wait for the answer (default: the SDK\'s 60 s).'),
  }),
  handler: async ({ message, timeoutMs }, ctx) => {
    const answer = await clientRequest('elicitation/create', ctx, () => ctx.mcpReq.elicitInput({
      mode: 'form',
      message,
      requestedSchema: {
        type: 'object',
        properties: { name: { type: 'string', title: 'Name', description: 'Your name' } },
        required: ['name'],
      },
    }, { ...related(ctx), ...(timeoutMs !== undefined && { timeout: timeoutMs }) }))
    if (answer.action === 'accept') {
      const name = answer.content?.['name']
      return typeof name === 'string' && name !== ''
        ? textResult(`Hello, ${name}!`)
        : errorResult('The user accepted but gave no name.')
    }
    return textResult(answer.action === 'decline' ? 'The user declined to answer.' : 'The user cancelled the request.')
  },
})

const askUrl = defineTool({
  name: 'ask_url',
  title: 'Send the user to a URL',
  description: 'Sends a URL-mode elicitation/create (the client must declare elicitation.url). On accept it also sends notifications/elicitation/complete, as if the out-of-band step had finished. Returns the user\'s action.',
  inputSchema: z.object({
    url: z.url().default('https://example.com/demo-consent').describe('The URL the user is asked to open.'),
    message: z.string().default('Please open this page to continue.').describe('Why the user should open the URL.'),
  }),
  handler: async ({ url, message }, ctx, session) => {
    const elicitationId = randomUUID()
    const answer = await clientRequest('elicitation/create', ctx, () => ctx.mcpReq.elicitInput({ mode: 'url', message, url, elicitationId }, related(ctx)))
    if (answer.action === 'accept') {
      await session.server.createElicitationCompletionNotifier(elicitationId, { relatedRequestId: ctx.mcpReq.id })()
      return textResult(`The user accepted opening ${url} (elicitation ${elicitationId} completed).`)
    }
    return textResult(answer.action === 'decline' ? 'The user declined to open the URL.' : 'The user cancelled the request.')
  },
})

const summarize = defineTool({
  name: 'summarize',
  title: 'Summarize with the client\'s model',
  description: 'Sends sampling/createMessage asking the client\'s model to summarize `text`, and returns the model\'s text.',
  inputSchema: z.object({
    text: z.string().describe('The text to summarize.'),
    maxTokens: z.number().int().min(1).max(100_000).default(200).describe('Token budget for the summary (default 200).'),
  }),
  handler: async ({ text, maxTokens }, ctx) => {
    const result = await clientRequest('sampling/createMessage', ctx, () => ctx.mcpReq.requestSampling({
      messages: [{ role: 'user', content: { type: 'text', text: `Please summarize the following text concisely:\n\n${text}` } }],
      systemPrompt: 'You are a concise summarizer.',
      maxTokens,
    }, related(ctx)))
    const blocks = Array.isArray(result.content) ? result.content : [result.content]
    const texts = blocks.flatMap((block) => block.type === 'text' ? [block.text] : [])
    return texts.length > 0 ? textResult(texts.join('\n')) : errorResult('The model returned no text.')
  },
})

const listRoots = defineTool({
  name: 'list_roots',
  title: 'List the client\'s roots',
  description: 'Sends roots/list to the client and returns the roots as a JSON array text ([{"uri": ..., "name": ...}]).',
  inputSchema: z.object({}),
  annotations: { readOnlyHint: true },
  handler: async (_args, ctx) => {
    const result = await clientRequest('roots/list', ctx, () => ctx.mcpReq.send({ method: 'roots/list' }, { signal: ctx.mcpReq.signal }))
    return textResult(JSON.stringify(result.roots))
  },
})

const failTool = defineTool({
  name: 'fail_tool',
  title: 'Fail (tool error)',
  description: 'Always fails as a tool execution error: returns a result with isError: true and a text explaining the failure.',
  inputSchema: z.object({
    reason: z.string().default('no reason given').describe('Included in the failure text.'),
  }),
  annotations: { readOnlyHint: true },
  handler: async ({ reason }) => errorResult(`fail_tool failed on purpose: ${reason}`),
})

const throwError = defineTool({
  name: 'throw_error',
  title: 'Fail (JSON-RPC error)',
  description: 'Always fails with a JSON-RPC error response (not an isError result). Default code -32602; any integer code may be given. Note: the SDK rewrites -32002 to -32602 on the wire.',
  inputSchema: z.object({
    code: z.number().int().default(-32602).describe('JSON-RPC error code to answer with (default -32602).'),
    message: z.string().default('throw_error: invalid params (thrown on purpose)').describe('JSON-RPC error message.'),
  }),
  annotations: { readOnlyHint: true },
  handler: async ({ code, message }) => {
    throw new JsonRpcToolError(code, message, { tool: 'throw_error' })
  },
})

/** Sends to every session in `targets`: related to the call for the caller, standalone to the rest. */
async function notifySessions (
  targets: DemoSession[],
  caller: DemoSession,
  ctx: ServerContext,
  notification: { method: 'notifications/resources/updated', params: { uri: string } } | { method: 'notifications/tools/list_changed' },
  log: DemoLog,
): Promise<void> {
  const results = await Promise.allSettled(targets.map(async (target) => {
    if (target === caller) await ctx.mcpReq.notify(notification)
    else if (notification.method === 'notifications/tools/list_changed') await target.server.sendToolListChanged()
    else await target.server.sendResourceUpdated(notification.params)
  }))
  for (const result of results) {
    if (result.status === 'rejected') log(`could not send ${notification.method}: ${String(result.reason)}`)
  }
}

const touchResource = (world: DemoWorld, log: DemoLog): DemoTool => defineTool({
  name: 'touch_resource',
  title: 'Touch a resource',
  description: 'Bumps the revision of a resource and sends notifications/resources/updated for it to every session that subscribed to it (resources/subscribe); the caller\'s copy arrives before the result.',
  inputSchema: z.object({
    uri: z.string().default('demo://readme').describe('The resource URI to touch (default demo://readme).'),
  }),
  handler: async ({ uri }, ctx, session) => {
    const revision = world.touch(uri)
    const subscribers = world.subscribersOf(uri)
    await notifySessions(subscribers, session, ctx, { method: 'notifications/resources/updated', params: { uri } }, log)
    return textResult(`touched ${uri} (revision ${revision}); notified ${subscribers.length} subscribed session(s)`)
  },
})

const extra = defineTool({
  name: 'extra',
  title: 'Extra tool',
  description: 'Exists only while toggled on by toggle_extra_tool. Returns "extra tool called" plus the optional note.',
  inputSchema: z.object({ note: z.string().optional().describe('Appended to the reply.') }),
  annotations: { readOnlyHint: true },
  handler: async ({ note }) => textResult(note === undefined ? 'extra tool called' : `extra tool called: ${note}`),
})

const toggleExtraTool = (world: DemoWorld, log: DemoLog): DemoTool => defineTool({
  name: 'toggle_extra_tool',
  title: 'Toggle the "extra" tool',
  description: 'Adds the tool "extra" if it is absent, removes it if present (for every session), and sends notifications/tools/list_changed to every session; the caller\'s copy arrives before the result.',
  inputSchema: z.object({}),
  handler: async (_args, ctx, session) => {
    const enabled = world.toggleTool(extra.name)
    await notifySessions([session, ...world.othersThan(session)], session, ctx, { method: 'notifications/tools/list_changed' }, log)
    return textResult(enabled ? 'extra tool added' : 'extra tool removed')
  },
})

/** Registers every demo tool in the world's registry (`extra` starts disabled). */
export function registerDemoTools (world: DemoWorld, log: DemoLog): void {
  const tools = [
    slow(log),
    echo,
    askUser,
    askUrl,
    summarize,
    listRoots,
    failTool,
    throwError,
    touchResource(world, log),
    toggleExtraTool(world, log),
  ]
  for (const tool of tools) world.tools.add(tool)
  world.tools.add(extra, false)
}
