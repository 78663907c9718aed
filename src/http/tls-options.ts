import { readFile } from 'node:fs/promises'
import type { ServerOptions } from 'node:https'
import { createSecureContext } from 'node:tls'
import { configError, type ConfigProblem } from '../config/load.ts'
import type { Config, TlsConfig } from '../config/schema.ts'
import { errorMessage } from '../errors.ts'

/** The `https` options of each listener: undefined for one that serves plain HTTP. */
export interface ListenerTls {
  server: ServerOptions | undefined
  admin: ServerOptions | undefined
}

/**
 * Turns the `tls` sections of the listeners (`server.tls`, `admin.tls`) into the `https` options of their
 * Fastify instances. The files are read once, here; every file that cannot be read, and a key that does not
 * belong to its certificate, is one problem, named by its option and path, of one GW_ERR_CONFIG_INVALID.
 */
export async function loadListenerTls (config: Pick<Config, 'server' | 'admin'>): Promise<ListenerTls> {
  const problems: ConfigProblem[] = []
  const [server, admin] = await Promise.all([
    readTls(config.server.tls, 'server.tls', problems),
    readTls(config.admin?.tls, 'admin.tls', problems),
  ])
  if (problems.length > 0) throw configError('files named in the configuration', problems)
  return { server, admin }
}

/** One `tls` section's options, or undefined with its problems added to `problems`. */
async function readTls (tls: TlsConfig | undefined, at: string, problems: ConfigProblem[]): Promise<ServerOptions | undefined> {
  if (tls === undefined) return undefined
  let unreadable = false
  const read = async (field: keyof TlsConfig): Promise<Buffer | undefined> => {
    const path = tls[field]
    if (path === undefined) return undefined
    try {
      return await readFile(path)
    } catch (err) {
      unreadable = true
      problems.push({ path: `${at}.${field}`, message: `cannot read '${path}': ${errorMessage(err)}` })
      return undefined
    }
  }
  const [cert, key, ca] = await Promise.all([read('cert'), read('key'), read('ca')])
  if (unreadable) return undefined
  const options: ServerOptions = { cert, key, ...(ca !== undefined && { ca }) }
  try {
    // What the HTTPS server would do at its creation, with a message that names the option.
    createSecureContext(options)
  } catch (err) {
    problems.push({ path: at, message: `the certificate and key cannot be used: ${errorMessage(err)}; check that both are PEM and that the key is the certificate's` })
    return undefined
  }
  return options
}
