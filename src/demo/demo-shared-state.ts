/**
 * Cross-process state for the demo upstream: a small JSON file in a directory
 * that several demo processes watch.
 *
 * Why: a gateway usually runs several stdio processes of one upstream (say a
 * shared connection for subscriptions and list changes, and exclusive ones
 * for calls). A real stdio server backed by shared data (files, a database)
 * stays consistent across its processes; the demo imitates that by keeping
 * resource revisions and tool availability in this file, so a
 * `touch_resource` or `toggle_extra_tool` handled by one process is seen,
 * and notified, by all of them.
 *
 * Each process marks its membership with a `member-<pid>` file. A process
 * that finds no live member when it joins resets the state (it was left by
 * processes that are gone); the last member to leave removes the directory.
 * Concurrent updates are read-modify-write without a lock: good enough for a
 * demo, where a lost revision bump does no harm.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, watch, writeFileSync, type FSWatcher } from 'node:fs'
import { join } from 'node:path'
import * as z from 'zod'

const STATE_FILE = 'state.json'
const MEMBER_PREFIX = 'member-'

const SharedStateSchema = z.object({
  revisions: z.record(z.string(), z.number().int()).default({}),
  tools: z.record(z.string(), z.boolean()).default({}),
})

/** What the processes share: resource revisions and tool availability. */
export type SharedState = z.output<typeof SharedStateSchema>

function emptyState (): SharedState {
  return { revisions: {}, tools: {} }
}

function isAlive (pid: number): boolean {
  if (pid === process.pid) return true
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return error instanceof Error && 'code' in error && error.code === 'EPERM'
  }
}

export class SharedStateFile {
  readonly dir: string
  private readonly file: string
  private readonly watcher: FSWatcher
  private closed = false

  /**
   * Joins the state in `dir` (created if missing) and calls `onChange` with
   * the new state whenever the file changes, including after this process's
   * own writes (callers diff against what they hold).
   */
  constructor (dir: string, onChange: (state: SharedState) => void, log: (line: string) => void) {
    this.dir = dir
    this.file = join(dir, STATE_FILE)
    mkdirSync(dir, { recursive: true })
    if (this.liveMembers().length === 0) this.write(emptyState())
    writeFileSync(join(dir, `${MEMBER_PREFIX}${process.pid}`), '')
    this.watcher = watch(dir, (_event, filename) => {
      if (this.closed || (filename !== null && filename !== STATE_FILE)) return
      onChange(this.read())
    })
    this.watcher.on('error', (error) => { log(`shared state watcher: ${error.message}`) })
    this.watcher.unref()
  }

  read (): SharedState {
    let text: string
    try {
      text = readFileSync(this.file, 'utf8')
    } catch {
      return emptyState()
    }
    try {
      const parsed = SharedStateSchema.safeParse(JSON.parse(text))
      return parsed.success ? parsed.data : emptyState()
    } catch {
      return emptyState()
    }
  }

  /** Read-modify-write of the state file (atomic replace); returns the written state. */
  update (mutate: (state: SharedState) => void): SharedState {
    const state = this.read()
    mutate(state)
    this.write(state)
    return state
  }

  /** Leaves the state; the last live member removes the directory. */
  close (): void {
    if (this.closed) return
    this.closed = true
    this.watcher.close()
    // Leave first, then look: of two members leaving at once, the later look sees nobody.
    rmSync(join(this.dir, `${MEMBER_PREFIX}${process.pid}`), { force: true })
    if (this.liveMembers().length === 0) rmSync(this.dir, { recursive: true, force: true })
  }

  private write (state: SharedState): void {
    mkdirSync(this.dir, { recursive: true })
    const temporary = `${this.file}.${process.pid}.tmp`
    writeFileSync(temporary, JSON.stringify(state))
    renameSync(temporary, this.file)
  }

  /** Pids with a member file whose process is alive; files of dead processes are removed. */
  private liveMembers (): number[] {
    let names: string[]
    try {
      names = readdirSync(this.dir)
    } catch {
      return []
    }
    const alive: number[] = []
    for (const name of names) {
      if (!name.startsWith(MEMBER_PREFIX)) continue
      const pid = Number(name.slice(MEMBER_PREFIX.length))
      if (Number.isInteger(pid) && isAlive(pid)) alive.push(pid)
      else rmSync(join(this.dir, name), { force: true })
    }
    return alive
  }
}
