// The project's container image, built from its own Dockerfile and started as an operator would, with buildah
// (neither a Docker daemon nor a container registry is needed): the Node 22 base image comes from
// scripts/node-base-image.sh, built once and kept by buildah. Used by test/e2e/container-image.test.ts.
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { EventEmitter, once } from 'node:events'
import { readdirSync, readFileSync } from 'node:fs'
import { createInterface } from 'node:readline'
import { randomUUID } from 'node:crypto'
import { afterAll } from 'vitest'
import { REPO_ROOT } from '../fixtures/spawn-upstream.ts'
import { IMAGE, run } from './image-build.ts'
import type { GatewayProcess } from './process.ts'

export { buildImage, IMAGE, MISSING_BUILDAH, nodeBaseImage, requireBuildah } from './image-build.ts'

/** What the image says about how it runs (its Docker config). */
export interface ImageConfig {
  entrypoint: string[]
  cmd: string[]
  /** HEALTHCHECK's command, `CMD` first as Docker stores it. */
  healthcheck: string[]
  user: string
  /** The image's VOLUME paths. */
  volumes: string[]
  /** Its size as buildah reports it, e.g. `450 MB`. */
  size: string
}

export async function imageConfig (image = IMAGE): Promise<ImageConfig> {
  const inspected = JSON.parse(await run('buildah', ['inspect', '--type', 'image', image])) as {
    Docker: {
      config: { Entrypoint?: string[], Cmd?: string[], User?: string, Healthcheck?: { Test: string[] }, Volumes?: Record<string, unknown> }
    }
  }
  const { config } = inspected.Docker
  const size = (JSON.parse(await run('buildah', ['images', '--json', image])) as Array<{ size: string }>)[0]?.size ?? '?'
  return {
    entrypoint: config.Entrypoint ?? [],
    cmd: config.Cmd ?? [],
    healthcheck: config.Healthcheck?.Test ?? [],
    user: config.User ?? '',
    volumes: Object.keys(config.Volumes ?? {}),
    size,
  }
}

/** A process on this host: its parent and command line. */
function processes (): Array<{ pid: number, ppid: number, cmdline: string[] }> {
  return readdirSync('/proc').filter((name) => /^\d+$/.test(name)).flatMap((name) => {
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').filter((part) => part !== '')
      return [{ pid: Number(name), ppid, cmdline }]
    } catch {
      return [] // it ended meanwhile
    }
  })
}

/** Every descendant of `pid`, parents before their children. */
function descendants (pid: number): Array<{ pid: number, cmdline: string[] }> {
  const all = processes()
  const found: Array<{ pid: number, cmdline: string[] }> = []
  const visit = (parent: number): void => {
    for (const child of all.filter((p) => p.ppid === parent)) {
      found.push(child)
      visit(child.pid)
    }
  }
  visit(pid)
  return found
}

export interface RunningContainer extends GatewayProcess {
  name: string
  /** The container's first process (tini, the image's ENTRYPOINT), which `docker stop` would signal. */
  initPid: () => number
  /** The real user id the gateway process (node dist/main.js) runs as. */
  gatewayUid: () => number
  /** Runs a command in the container, with its environment and volumes; its exit code and output. */
  exec: (command: string[]) => Promise<{ code: number, output: string }>
}

const containers = new Set<{ name: string, child: ChildProcess }>()

// A test that fails half-way leaves containers running: whatever runs when the file ends is killed and removed.
afterAll(async () => {
  for (const container of containers) {
    if (container.child.exitCode === null && container.child.signalCode === null) {
      const exited = once(container.child, 'exit')
      for (const process of descendants(container.child.pid!).reverse()) killQuietly(process.pid)
      container.child.kill('SIGKILL')
      await exited
    }
    await run('buildah', ['rm', container.name]).catch(() => {})
  }
  containers.clear()
})

function killQuietly (pid: number): void {
  try {
    process.kill(pid, 'SIGKILL')
  } catch {}
}

/**
 * Starts the image's ENTRYPOINT and CMD in a new container on the host's network (`buildah run --isolation
 * chroot`, which has no network or PID namespace of its own), with `env` and `volumes` (`host:container[:ro]`)
 * as `docker run -e … -v …` would give them, and waits until the gateway serves and its upstreams started.
 */
export async function startContainer (
  config: ImageConfig,
  options: { env: Record<string, string>, volumes: string[] },
): Promise<RunningContainer> {
  const name = `mcp-task-gateway-test-${randomUUID().slice(0, 8)}`
  await run('buildah', ['from', '--name', name, IMAGE])
  // buildah run (1.28) gives each of the image's VOLUMEs a directory of its own, which now and then wins over a
  // -v onto the same path, and the data never reaches the host: the container forgets those VOLUMEs, so the
  // -v alone is mounted there, as `docker run -v` does.
  for (const target of options.volumes.map((volume) => volume.split(':')[1] ?? '').filter((path) => config.volumes.includes(path))) {
    await run('buildah', ['config', '--volume', `${target}-`, name])
  }
  // With no PID namespace tini is not PID 1: as a subreaper it still reaps what stdio upstreams leave behind.
  const env = { ...options.env, TINI_SUBREAPER: '1' }
  const runArgs = ['run', '--isolation', 'chroot', '--network', 'host',
    ...Object.entries(env).flatMap(([key, value]) => ['-e', `${key}=${value}`]),
    ...options.volumes.flatMap((volume) => ['-v', volume]), name, '--']
  const child = spawn('buildah', [...runArgs, ...config.entrypoint, ...config.cmd], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
  containers.add({ name, child })
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>
  const lines: string[] = []
  const output = new EventEmitter()
  const record = (line: string): void => {
    lines.push(line)
    output.emit('line', line)
  }
  const stdout = createInterface({ input: child.stdout! })
  const stderr = createInterface({ input: child.stderr! }).on('line', record)
  const drained = Promise.all([once(stderr, 'close'), once(stdout, 'close')])
  const url = await new Promise<string>((resolve, reject) => {
    // A guard against hangs: a container on a loaded machine can take many seconds to start.
    const timer = setTimeout(() => reject(new Error(`the container did not start:\n${lines.join('\n')}`)), 120_000)
    let address: string | undefined
    stdout.on('line', (line) => {
      record(line)
      if (line.includes('"gateway listening"')) address = (JSON.parse(line) as { address: string }).address
      if (line.includes('"upstreams started"') && address !== undefined) {
        clearTimeout(timer)
        resolve(address)
      }
    })
    void exited.then(([code]) => reject(new Error(`the container exited with ${code}:\n${lines.join('\n')}`)))
  })
  const inContainer = (matches: (cmdline: string[]) => boolean): number => {
    const found = descendants(child.pid!).find((p) => matches(p.cmdline))
    if (found === undefined) throw new Error(`no such process in container ${name}`)
    return found.pid
  }
  return {
    child,
    url,
    lines,
    output,
    drained,
    exited,
    name,
    initPid: () => inContainer((cmdline) => cmdline[0] === config.entrypoint[0]),
    gatewayUid: () => {
      const status = readFileSync(`/proc/${inContainer((cmdline) => cmdline.includes('dist/main.js'))}/status`, 'utf8')
      return Number(/^Uid:\s+(\d+)/m.exec(status)?.[1])
    },
    exec: async (command) => await new Promise((resolve) => {
      execFile('buildah', [...runArgs, ...command], { cwd: REPO_ROOT }, (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1
        resolve({ code, output: `${stdout}${stderr}` })
      })
    }),
  }
}
