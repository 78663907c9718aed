import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'

/**
 * A secret kept in a file (a Docker or Kubernetes secret mounted at `/run/secrets/…`), for `${file:…}` in the
 * YAML and `GATEWAY_…_FILE` variables: the file's content less one trailing newline (most tools that write
 * such files end them with one), or why it cannot be read. A relative path is relative to the gateway's
 * working directory. The file is read at each load, so a reload picks up a rotated secret.
 */
export function readSecretFile (path: string, cwd = process.cwd()): { value: string } | { problem: string } {
  try {
    return { value: readFileSync(resolve(cwd, path), 'utf8').replace(/\r?\n$/, '') }
  } catch (err) {
    return { problem: `cannot read the secret file '${path}': ${(err as NodeJS.ErrnoException).code ?? String(err)}` }
  }
}
