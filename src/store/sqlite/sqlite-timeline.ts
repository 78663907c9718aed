import type Database from 'better-sqlite3'
import { TIMELINE_LIMIT } from '../task-timeline.ts'
import type { TaskEvent } from '../types.ts'

/**
 * Task timelines in the `task_events` table, one JSON entry per row in insertion order. Every method runs
 * inside the caller's transaction (the one of the change it records); none opens its own.
 */
export class SqliteTimeline {
  readonly #insert: Database.Statement<[{ taskId: string, event: string }]>
  readonly #trim: Database.Statement<[{ taskId: string, keep: number }]>
  readonly #select: Database.Statement<[string], { event: string }>
  readonly #sweep: Database.Statement<[number]>

  constructor (db: Database.Database) {
    this.#insert = db.prepare('INSERT INTO task_events (task_id, event) VALUES (@taskId, @event)')
    // Everything older than the newest `keep` entries: one index walk of at most `keep` + 1 entries.
    this.#trim = db.prepare(`DELETE FROM task_events WHERE task_id = @taskId AND id <= (
      SELECT id FROM task_events WHERE task_id = @taskId ORDER BY id DESC LIMIT 1 OFFSET @keep)`)
    this.#select = db.prepare('SELECT event FROM task_events WHERE task_id = ? ORDER BY id')
    this.#sweep = db.prepare('DELETE FROM task_events WHERE task_id IN (SELECT id FROM tasks WHERE expires_at <= ?)')
  }

  /** The first entry of a new task (nothing to trim). */
  start (taskId: string, event: TaskEvent): void {
    this.#insert.run({ taskId, event: JSON.stringify(event) })
  }

  /** Appends an entry and drops the oldest beyond TIMELINE_LIMIT. */
  append (taskId: string, event: TaskEvent): void {
    this.#insert.run({ taskId, event: JSON.stringify(event) })
    this.#trim.run({ taskId, keep: TIMELINE_LIMIT })
  }

  of (taskId: string): TaskEvent[] {
    return this.#select.all(taskId).map((row) => JSON.parse(row.event) as TaskEvent)
  }

  /** Deletes the timelines of the tasks the same sweep deletes (run before the tasks are). */
  sweep (now: number): void {
    this.#sweep.run(now)
  }
}
