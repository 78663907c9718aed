/**
 * State the demo upstream keeps in memory, like a real server: one world per
 * process, shared by all its connections and lost when it exits.
 *
 * A v2 server instance serves exactly one connection, so the HTTP mode runs
 * one instance per session. What a real server would hold globally lives
 * here instead, shared by every instance of the process:
 *
 * - the tool list and which tools are enabled (`toggle_extra_tool`)
 * - resource revisions (bumped by `touch_resource`)
 * - the connected sessions, each with its own resource subscriptions
 *
 * Over stdio a process serves one client, so the world is that client's.
 */
import type { Server } from '@modelcontextprotocol/server'
import { DemoToolRegistry } from './demo-tool-registry.ts'

/** One connected server instance: the stdio connection or one HTTP session. */
export class DemoSession {
  readonly server: Server
  private readonly subscriptions = new Set<string>()

  constructor (server: Server) {
    this.server = server
  }

  subscribe (uri: string): void {
    this.subscriptions.add(uri)
  }

  unsubscribe (uri: string): void {
    this.subscriptions.delete(uri)
  }

  isSubscribed (uri: string): boolean {
    return this.subscriptions.has(uri)
  }
}

export class DemoWorld {
  /** The tools every session lists and calls. */
  readonly tools = new DemoToolRegistry()
  private readonly sessions = new Set<DemoSession>()
  private readonly revisions = new Map<string, number>()

  /** Registers a server instance; call {@link leave} when its connection closes. */
  join (server: Server): DemoSession {
    const session = new DemoSession(server)
    this.sessions.add(session)
    return session
  }

  leave (session: DemoSession): void {
    this.sessions.delete(session)
  }

  /** Sessions subscribed to `uri`. */
  subscribersOf (uri: string): DemoSession[] {
    return [...this.sessions].filter((session) => session.isSubscribed(uri))
  }

  /** Every session except `session`. */
  othersThan (session: DemoSession): DemoSession[] {
    return [...this.sessions].filter((other) => other !== session)
  }

  /** Current revision of a resource (starts at 1). */
  revision (uri: string): number {
    return this.revisions.get(uri) ?? 1
  }

  /** Bumps and returns the revision of `uri`. The caller notifies the subscribers. */
  touch (uri: string): number {
    const next = this.revision(uri) + 1
    this.revisions.set(uri, next)
    return next
  }

  /** Flips whether tool `name` is enabled and returns the new value. The caller notifies the sessions. */
  toggleTool (name: string): boolean {
    const enabled = !this.tools.isEnabled(name)
    this.tools.setEnabled(name, enabled)
    return enabled
  }
}
