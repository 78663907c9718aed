import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'

/** The write-ahead log is cut back to this size once its frames are in the database file. */
export const WAL_SIZE_LIMIT_BYTES = 4 * 1024 * 1024
/** Free pages given back per write transaction, so that the event loop never waits long on the write lock. */
const VACUUM_CHUNK_PAGES = 256
/** At most this many chunks per tick; what is left is given back on the next ticks. */
const VACUUM_CHUNKS_PER_TICK = 64

/**
 * Runs in the worker, on its own connection to the file, on every tick:
 *  1. gives free pages back to the file system (incremental vacuum, in small transactions);
 *  2. copies the write-ahead log into the database file (a passive checkpoint: it never waits, and never
 *     holds up a write of the gateway's own connection).
 * It never truncates the log itself: a truncating checkpoint holds the write lock through its fsyncs, and
 * the gateway's next write would wait for it on the event loop. The gateway's connection cuts the log back
 * to the limit instead (journal_size_limit), when it starts the log over after a complete checkpoint.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads')
const Database = require(workerData.module)
const db = new Database(workerData.path)
db.pragma('busy_timeout = 1000')
db.pragma('journal_size_limit = ' + workerData.walLimit)
function tick () {
  try {
    for (let i = 0; i < workerData.vacuumChunks && db.pragma('freelist_count', { simple: true }) > 0; i++) {
      db.pragma('incremental_vacuum(' + workerData.vacuumPages + ')')
    }
  } catch {
    // The file busy past busy_timeout (or locked): the next tick tries again.
  }
  try {
    db.pragma('wal_checkpoint(PASSIVE)')
  } catch {
    // As above: the next tick tries again.
  }
}
const timer = setInterval(tick, workerData.intervalMs)
parentPort.once('message', () => {
  clearInterval(timer)
  try { db.pragma('wal_checkpoint(PASSIVE)') } catch { /* the gateway's own connection checkpoints as it closes */ }
  db.close()
  parentPort.postMessage('closed')
})
`

/**
 * Keeps a SQLite file small from a worker thread, so that the fsyncs of a checkpoint never stall the
 * event loop that serves requests (the main connection turns SQLite's own automatic checkpoints off):
 * checkpoints, truncation of the write-ahead log, and the return of freed pages (deleted tasks) to the
 * file system.
 */
export class Checkpointer {
  readonly #worker: Worker

  /**
   * The worker opens the file now, as the store opens it: a connection opened later would open whatever is at
   * the path by then, and create an empty database there if the file was deleted (the store's guard must see
   * the deletion, not a new file; sqlite-guard.ts).
   */
  constructor (path: string, intervalMs = 1000) {
    const module = createRequire(import.meta.url).resolve('better-sqlite3')
    this.#worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: {
        module,
        path,
        intervalMs,
        walLimit: WAL_SIZE_LIMIT_BYTES,
        vacuumPages: VACUUM_CHUNK_PAGES,
        vacuumChunks: VACUUM_CHUNKS_PER_TICK,
      },
    })
    this.#worker.unref()
  }

  /** Runs a last checkpoint and stops the worker. */
  async close (): Promise<void> {
    const worker = this.#worker
    const closed = new Promise<void>((resolve) => {
      worker.once('message', () => resolve())
      worker.once('exit', () => resolve())
      worker.once('error', () => resolve())
    })
    worker.postMessage('close')
    await closed
    await worker.terminate()
  }
}
