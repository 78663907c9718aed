import { execFile } from 'node:child_process'
import { chownSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { freePort } from './private-redis.ts'
import { until } from './until.ts'

const run = promisify(execFile)

interface ServerUser {
  /** What runs a PostgreSQL program as that user (nothing when it is the current one). */
  prefix: string[]
  uid?: number
  gid?: number
}

/**
 * PostgreSQL refuses to run as root: as root, its programs run as the machine's `postgres` user (and its
 * directory is that user's), otherwise as whoever runs the tests.
 */
function serverUser (): ServerUser {
  if (process.getuid?.() !== 0) return { prefix: [] }
  const entry = readFileSync('/etc/passwd', 'utf8').split('\n').find((line) => line.startsWith('postgres:'))
  if (entry === undefined) throw new Error('as root, a private PostgreSQL runs as the `postgres` user, and this machine has none')
  const [, , uid, gid] = entry.split(':')
  return { prefix: ['runuser', '-u', 'postgres', '--'], uid: Number(uid), gid: Number(gid) }
}

/**
 * A PostgreSQL server of the test's own: a fresh cluster (`initdb`, trust auth) in a temporary directory,
 * listening on 127.0.0.1 on a free port. The test may stop, restart or kill it; `close()` stops it and removes
 * the directory.
 */
export class PrivatePostgres {
  readonly port: number
  readonly dir: string
  /** A URL of the server's `postgres` database as its `postgres` superuser. */
  readonly url: string
  readonly #user: ServerUser

  private constructor (port: number, dir: string, user: ServerUser) {
    this.port = port
    this.dir = dir
    this.#user = user
    this.url = `postgres://postgres@127.0.0.1:${port}/postgres`
  }

  static async start (): Promise<PrivatePostgres> {
    const user = serverUser()
    const dir = mkdtempSync(join(tmpdir(), 'mcpgw-pg-'))
    if (user.uid !== undefined) chownSync(dir, user.uid, user.gid!)
    const server = new PrivatePostgres(await freePort(), dir, user)
    await server.#pg('initdb', ['-D', server.#data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C'])
    await server.start()
    return server
  }

  get #data (): string {
    return join(this.dir, 'data')
  }

  async #pg (program: string, args: string[]): Promise<string> {
    const [command, ...rest] = [...this.#user.prefix, program, ...args]
    try {
      const { stdout } = await run(command!, rest, { cwd: this.dir })
      return stdout
    } catch (err) {
      const { stdout, stderr } = err as { stdout?: string, stderr?: string }
      throw new Error(`${program} ${args.join(' ')} failed:\n${stdout ?? ''}${stderr ?? ''}${this.#log()}`, { cause: err })
    }
  }

  #log (): string {
    try {
      return `\nserver log:\n${readFileSync(join(this.dir, 'server.log'), 'utf8').split('\n').slice(-20).join('\n')}`
    } catch {
      return ''
    }
  }

  /** The options the server runs with: this port, a socket in the temporary directory, loopback only. */
  get #options (): string {
    return `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`
  }

  /** Starts the server and returns once it accepts connections (`pg_ctl -w` waits for that, then pg_isready agrees). */
  async start (): Promise<void> {
    // After a kill -9, the killed postmaster's backends may still hold its shared memory for a moment: a start
    // refused for that is tried again until they are gone.
    await until('the private PostgreSQL to start', async () => {
      try {
        await this.#pg('pg_ctl', ['start', '-w', '-D', this.#data, '-l', join(this.dir, 'server.log'), '-o', this.#options])
        return true
      } catch (err) {
        if (/pre-existing shared memory|lock file .* already exists|could not start server/i.test((err as Error).message)) return undefined
        throw err
      }
    }, { everyMs: 100 })
    await this.ready()
  }

  /**
   * Starts the server unless it runs (`pg_ctl status`): a test that failed while the server was down leaves it
   * running for the next one, instead of failing every later test of the file at its start.
   */
  async ensureRunning (): Promise<void> {
    try {
      await this.#pg('pg_ctl', ['status', '-D', this.#data])
    } catch {
      await this.start()
    }
  }

  /** Waits until the server accepts connections. */
  async ready (): Promise<void> {
    await until('the private PostgreSQL to accept connections', async () => {
      try {
        await run('pg_isready', ['-h', '127.0.0.1', '-p', String(this.port), '-U', 'postgres', '-d', 'postgres'])
        return true
      } catch {
        return undefined
      }
    })
  }

  /** `pg_ctl restart -m fast`: sessions are ended, the server stops and starts again; returns once it accepts connections. */
  async restart (): Promise<void> {
    await this.#pg('pg_ctl', ['restart', '-w', '-m', 'fast', '-D', this.#data, '-l', join(this.dir, 'server.log'), '-o', this.#options])
    await this.ready()
  }

  /** `pg_ctl stop -m fast`: returns once the server is down. */
  async stop (): Promise<void> {
    await this.#pg('pg_ctl', ['stop', '-w', '-m', 'fast', '-D', this.#data])
  }

  /** The postmaster's process id, from `postmaster.pid` (undefined when the server is not running). */
  postmasterPid (): number | undefined {
    try {
      return Number(readFileSync(join(this.#data, 'postmaster.pid'), 'utf8').split('\n')[0])
    } catch {
      return undefined
    }
  }

  /**
   * SIGKILL to the postmaster, as a crash or the OOM killer would: returns once it is gone (its backends notice
   * and end by themselves). `start()` brings the server back, through crash recovery.
   */
  async kill9 (): Promise<void> {
    const pid = this.postmasterPid()
    if (pid === undefined) throw new Error('the private PostgreSQL is not running')
    process.kill(pid, 'SIGKILL')
    await until('the killed postmaster to be gone', () => alive(pid) ? undefined : true)
  }

  /** Runs SQL on the server as its superuser (psql) and returns what it printed, unaligned and without headers. */
  async sql (statement: string): Promise<string> {
    const { stdout } = await run('psql', ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', this.url, '-c', statement])
    return stdout.trim()
  }

  async close (): Promise<void> {
    if (this.postmasterPid() !== undefined) await this.#pg('pg_ctl', ['stop', '-w', '-m', 'immediate', '-D', this.#data]).catch(() => {})
    rmSync(this.dir, { recursive: true, force: true })
  }
}

/** Whether a process runs (a zombie nobody reaped yet does not: a container's init may be slow to reap). */
function alive (pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    try {
      process.kill(pid, 0)
      return true
    } catch {
      return false
    }
  }
}
