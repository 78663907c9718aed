import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'

/** Runs in the worker: its own connection to the file, a passive checkpoint on every tick. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads')
const Database = require(workerData.module)
const db = new Database(workerData.path)
db.pragma('busy_timeout = 1000')
const timer = setInterval(() => {
  try { db.pragma('wal_checkpoint(PASSIVE)') } catch {}
}, workerData.intervalMs)
parentPort.once('message', () => {
  clearInterval(timer)
  try { db.pragma('wal_checkpoint(PASSIVE)') } catch {}
  db.close()
  parentPort.postMessage('closed')
})
`

/**
 * Copies the write-ahead log back into the database file from a worker thread, so the fsyncs of a
 * checkpoint never stall the event loop that serves requests (the main connection turns SQLite's own
 * automatic checkpoints off).
 */
export class Checkpointer {
  readonly #worker: Worker

  constructor (path: string, intervalMs = 1000) {
    const module = createRequire(import.meta.url).resolve('better-sqlite3')
    this.#worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { module, path, intervalMs } })
    this.#worker.unref()
  }

  /** Runs a last checkpoint and stops the worker. */
  async close (): Promise<void> {
    const closed = new Promise<void>((resolve) => {
      this.#worker.once('message', () => resolve())
      this.#worker.once('exit', () => resolve())
      this.#worker.once('error', () => resolve())
    })
    this.#worker.postMessage('close')
    await closed
    await this.#worker.terminate()
  }
}
