import type Database from 'better-sqlite3'
import type { TaskCursor, TaskQuery } from '../types.ts'

/** The filters of a TaskQuery and the column each one matches. */
const FILTERS = [['status', 'status'], ['upstream', 'upstream'], ['tool', 'tool'], ['principal', 'principal']] as const

interface QueryParams {
  status?: string
  upstream?: string
  tool?: string
  principal?: string
  createdAt?: number
  id?: string
  limit: number
  now: number
}

/**
 * The operator's query over every principal's tasks, newest first. One statement per combination of filters
 * (at most 32, prepared on first use), so that SQLite picks an index for each: `tasks_created` walks every task
 * in order, `tasks_principal_list` serves a principal filter.
 */
export class SqliteTaskQuery<Row> {
  readonly #db: Database.Database
  readonly #statements = new Map<string, Database.Statement<[QueryParams], Row>>()
  readonly #live: string

  constructor (db: Database.Database, live: string) {
    this.#db = db
    this.#live = live
  }

  rows (query: TaskQuery, before: TaskCursor | undefined, limit: number, now: number): Row[] {
    const used = FILTERS.filter(([field]) => query[field] !== undefined)
    const shape = `${used.map(([field]) => field).join(',')}|${before ? 'before' : 'first'}`
    let statement = this.#statements.get(shape)
    if (!statement) {
      const where = [this.#live, ...used.map(([field, column]) => `${column} = @${field}`)]
      if (before) where.push('(created_at < @createdAt OR (created_at = @createdAt AND id < @id))')
      statement = this.#db.prepare<[QueryParams], Row>(`SELECT * FROM tasks WHERE ${where.join(' AND ')}
        ORDER BY created_at DESC, id DESC LIMIT @limit`)
      this.#statements.set(shape, statement)
    }
    const params: QueryParams = { limit: Math.max(0, limit), now }
    for (const [field] of used) params[field] = query[field]
    if (before) {
      params.createdAt = before.createdAt
      params.id = before.id
    }
    return statement.all(params)
  }
}
