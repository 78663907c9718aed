import { readFile } from 'node:fs/promises'
import type { ServerOptions } from 'node:https'
import { createSecureContext } from 'node:tls'
import { configError, type ConfigProblem } from '../config/load.ts'
import type { TlsConfig } from '../config/schema.ts'
import { errorMessage } from '../errors.ts'

/**
 * Turns a `tls` section (`server.tls`, or another listener's) into the `https` options of a Fastify instance.
 * The files are read once, here; every file that cannot be read, and a key that does not belong to its
 * certificate, is one problem of a GW_ERR_CONFIG_INVALID that names the option (`at`) and the path.
 */
export async function loadTlsOptions (tls: TlsConfig | undefined, at = 'server.tls'): Promise<ServerOptions | undefined> {
  if (tls === undefined) return undefined
  const problems: ConfigProblem[] = []
  const read = async (field: keyof TlsConfig): Promise<Buffer | undefined> => {
    const path = tls[field]
    if (path === undefined) return undefined
    try {
      return await readFile(path)
    } catch (err) {
      problems.push({ path: `${at}.${field}`, message: `cannot read '${path}': ${errorMessage(err)}` })
      return undefined
    }
  }
  const [cert, key, ca] = await Promise.all([read('cert'), read('key'), read('ca')])
  const options: ServerOptions = { cert, key, ...(ca !== undefined && { ca }) }
  if (problems.length === 0) {
    try {
      // What the HTTPS server would do at its creation, with a message that names the option.
      createSecureContext(options)
    } catch (err) {
      problems.push({ path: at, message: `the certificate and key cannot be used: ${errorMessage(err)}; check that both are PEM and that the key is the certificate's` })
    }
  }
  if (problems.length > 0) throw configError('files named in the configuration', problems)
  return options
}
