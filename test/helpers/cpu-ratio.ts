/**
 * The CPU time `work` takes, in microseconds, the least of `runs` runs (the least is the one least disturbed by
 * other processes and the collector). Tests compare two such numbers as a ratio, never against a clock.
 */
export function leastCpu (work: () => void, runs = 3): number {
  let least = Number.POSITIVE_INFINITY
  for (let run = 0; run < runs; run++) {
    const before = process.cpuUsage()
    work()
    const used = process.cpuUsage(before)
    least = Math.min(least, used.user + used.system)
  }
  return least
}

/** `text` cut into chunks of `size` bytes, as a socket may deliver it. */
export function chunked (text: Buffer, size: number): Buffer[] {
  const chunks: Buffer[] = []
  for (let at = 0; at < text.length; at += size) chunks.push(text.subarray(at, at + size))
  return chunks
}
