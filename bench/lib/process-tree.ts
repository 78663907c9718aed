// A process and all its descendants, read from /proc: what a front end costs in memory is its own RSS
// plus that of every upstream process it spawned (and their shells). Linux only; elsewhere the tree is
// empty and the section reports n/a.
import { readFileSync, readdirSync } from 'node:fs'

export interface ProcessInfo {
  pid: number
  ppid: number
  /** `comm` from /proc/<pid>/stat (e.g. `node`, `sh`). */
  name: string
  /** Start time in clock ticks since boot: with the pid, it tells a process from a later one that reused its pid. */
  startTime: number
  /** A zombie has exited and holds no memory; only its parent's wait() is missing. */
  zombie: boolean
}

export interface TreeSample {
  processes: Array<ProcessInfo & ProcessMemory>
  /** Sum of VmRSS over the tree. Shared pages (node's text, libc) count once per process, as `ps` shows them. */
  rssBytes: number
  /** Sum of RssAnon: the private memory (heaps), without the file pages every node process maps alike. */
  rssAnonBytes: number
}

export interface ProcessMemory {
  rssBytes: number
  rssAnonBytes: number
}

function readStat (pid: number): ProcessInfo | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // comm may hold spaces and parentheses: it runs from the first '(' to the last ')'.
    const close = stat.lastIndexOf(')')
    const fields = stat.slice(close + 2).split(' ')
    return { pid, ppid: Number(fields[1]), name: stat.slice(stat.indexOf('(') + 1, close), startTime: Number(fields[19]), zombie: fields[0] === 'Z' }
  } catch {
    return undefined // gone, or no /proc
  }
}

function allProcesses (): ProcessInfo[] {
  let entries: string[]
  try {
    entries = readdirSync('/proc')
  } catch {
    return []
  }
  const out: ProcessInfo[] = []
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    const info = readStat(Number(entry))
    if (info !== undefined) out.push(info)
  }
  return out
}

/**
 * `root` and its descendants, parents before children. Found by parent pid over all of /proc rather than
 * /proc/<pid>/task/<tid>/children, which needs a kernel option and misses nothing the scan would find.
 * Detached children (own process group, as supergateway spawns them) are still children by ppid.
 */
export function processTree (root: number): ProcessInfo[] {
  const all = allProcesses()
  const byParent = new Map<number, ProcessInfo[]>()
  for (const p of all) {
    const siblings = byParent.get(p.ppid)
    if (siblings === undefined) byParent.set(p.ppid, [p])
    else siblings.push(p)
  }
  const top = all.find((p) => p.pid === root)
  if (top === undefined) return []
  const tree = [top]
  for (let i = 0; i < tree.length; i++) tree.push(...(byParent.get(tree[i]!.pid) ?? []))
  return tree
}

function memoryOf (pid: number): ProcessMemory | undefined {
  let status: string
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8')
  } catch {
    return undefined // exited between the scan and this read
  }
  // Kernel threads have no Vm lines: they hold no user memory.
  const kib = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+)\\s+kB$`, 'm').exec(status)?.[1] ?? 0) * 1024
  return { rssBytes: kib('VmRSS'), rssAnonBytes: kib('RssAnon') }
}

/** The live tree under `root` with each process's RSS; zombies and processes that exit while it is read are left out. */
export function sampleTree (root: number): TreeSample {
  const processes: TreeSample['processes'] = []
  for (const p of processTree(root)) {
    if (p.zombie) continue
    const memory = memoryOf(p.pid)
    if (memory !== undefined) processes.push({ ...p, ...memory })
  }
  return {
    processes,
    rssBytes: processes.reduce((n, p) => n + p.rssBytes, 0),
    rssAnonBytes: processes.reduce((n, p) => n + p.rssAnonBytes, 0),
  }
}

/** Whether this very process (not a later one with its pid) is still there. */
export function stillRunning (p: ProcessInfo): boolean {
  const now = readStat(p.pid)
  return now !== undefined && !now.zombie && now.startTime === p.startTime
}

/** `node×3 sh×1`: the processes of a tree by name. */
export function describeTree (processes: readonly ProcessInfo[]): string {
  const counts = new Map<string, number>()
  for (const p of processes) counts.set(p.name, (counts.get(p.name) ?? 0) + 1)
  return [...counts].map(([name, n]) => `${name}×${n}`).join(' ')
}

/**
 * Waits up to `graceMs` for `processes` (the descendants of a front end that was just stopped) to exit,
 * then SIGKILLs the ones still there, by pid, never by name; returns those it killed. A front end is
 * expected to take its upstream processes down with it, so a non-empty result is a finding.
 */
export async function reapLeftovers (processes: readonly ProcessInfo[], graceMs = 5000): Promise<ProcessInfo[]> {
  const deadline = Date.now() + graceMs
  let alive = processes.filter(stillRunning)
  while (alive.length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    alive = alive.filter(stillRunning)
  }
  for (const p of alive) {
    try {
      process.kill(p.pid, 'SIGKILL')
    } catch {
      // exited at the last moment
    }
  }
  return alive
}
