/**
 * State the demo upstream shares between all its connections.
 *
 * A v2 server instance serves exactly one connection, so the HTTP mode runs
 * one instance per session. What a real server would hold globally lives
 * here instead, shared by every instance of the process:
 *
 * - the tool list and which tools are enabled (`toggle_extra_tool`)
 * - resource revisions (bumped by `touch_resource`)
 * - the connected sessions, each with its own resource subscriptions
 *
 * With {@link DemoWorld.shareVia} the revisions and tool availability are
 * also shared with other demo processes through a watched file (see
 * demo-shared-state.ts); changes made by another process are notified to
 * this process's sessions like local ones.
 */
import type { Server } from '@modelcontextprotocol/server'
import { SharedStateFile, type SharedState } from './demo-shared-state.ts'
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
  private revisions = new Map<string, number>()
  private shared: SharedStateFile | undefined
  private readonly log: (line: string) => void

  constructor (log: (line: string) => void) {
    this.log = log
  }

  /** Shares revisions and tool availability with the other demo processes using `dir`. */
  shareVia (dir: string): void {
    if (this.shared !== undefined) throw new Error(`already sharing state via ${this.shared.dir}`)
    this.shared = new SharedStateFile(dir, (state) => { this.adopt(state) }, this.log)
    this.adopt(this.shared.read())
  }

  /** Stops sharing (the last process to stop removes the state directory). */
  close (): void {
    this.shared?.close()
    this.shared = undefined
  }

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

  /** Bumps and returns the revision of `uri`. The caller notifies this process's subscribers. */
  touch (uri: string): number {
    if (this.shared === undefined) {
      const next = this.revision(uri) + 1
      this.revisions.set(uri, next)
      return next
    }
    const state = this.shared.update((current) => { current.revisions[uri] = (current.revisions[uri] ?? 1) + 1 })
    this.revisions = new Map(Object.entries(state.revisions))
    return this.revision(uri)
  }

  /** Flips whether tool `name` is enabled and returns the new value. The caller notifies this process's sessions. */
  toggleTool (name: string): boolean {
    if (this.shared !== undefined) this.adopt(this.shared.read())
    const enabled = !this.tools.isEnabled(name)
    this.tools.setEnabled(name, enabled)
    this.shared?.update((current) => { current.tools[name] = enabled })
    return enabled
  }

  /** Takes over a state written by any process, notifying this process's sessions of what changed. */
  private adopt (state: SharedState): void {
    const updated: string[] = []
    for (const [uri, revision] of Object.entries(state.revisions)) {
      if (this.revision(uri) !== revision) updated.push(uri)
    }
    this.revisions = new Map(Object.entries(state.revisions))
    let toolsChanged = false
    for (const [name, enabled] of Object.entries(state.tools)) {
      if (this.tools.setEnabled(name, enabled)) toolsChanged = true
    }
    for (const uri of updated) {
      for (const session of this.subscribersOf(uri)) {
        this.deliver(session.server.sendResourceUpdated({ uri }), 'notifications/resources/updated')
      }
    }
    if (toolsChanged) {
      for (const session of this.sessions) this.deliver(session.server.sendToolListChanged(), 'notifications/tools/list_changed')
    }
  }

  private deliver (sending: Promise<void>, method: string): void {
    sending.catch((error: unknown) => { this.log(`could not send ${method}: ${error instanceof Error ? error.message : String(error)}`) })
  }
}
