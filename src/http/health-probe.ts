import { X509Certificate } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import type { TLSSocket } from 'node:tls'
import type { Config } from '../config/schema.ts'
import { errorMessage } from '../errors.ts'

/** Longer than a live gateway ever takes to answer /healthz, shorter than a HEALTHCHECK's usual --timeout. */
const TIMEOUT_MS = 4000

export interface HealthTarget {
  url: URL
  /** With server.tls: the SHA-256 fingerprint of the configured certificate, which the listener must present. */
  fingerprint256: string | undefined
}

/**
 * Where the gateway of `server` answers: its own address, or loopback when it listens on every interface.
 * Its certificate is checked by fingerprint rather than by a CA and a name: the check runs beside the
 * gateway, which may serve a certificate for a public name only, signed by a CA the container does not hold.
 */
export async function healthTarget (server: Config['server']): Promise<HealthTarget> {
  const host = server.host === '0.0.0.0' ? '127.0.0.1' : server.host === '::' ? '[::1]' : server.host.includes(':') ? `[${server.host}]` : server.host
  const scheme = server.tls === undefined ? 'http' : 'https'
  const url = new URL(`${scheme}://${host}:${server.port}/healthz`)
  if (server.tls === undefined) return { url, fingerprint256: undefined }
  const certificate = new X509Certificate(await readFile(server.tls.cert))
  return { url, fingerprint256: certificate.fingerprint256 }
}

/** Asks `/healthz` once: undefined when it answered 200, else what went wrong. */
export async function checkHealth (target: HealthTarget, timeoutMs = TIMEOUT_MS): Promise<string | undefined> {
  return await new Promise<string | undefined>((resolve) => {
    const onResponse = (response: IncomingMessage): void => {
      response.resume()
      if (target.fingerprint256 !== undefined) {
        const presented = (response.socket as TLSSocket).getPeerCertificate().fingerprint256
        if (presented !== target.fingerprint256) {
          resolve(`${target.url.origin} presented a certificate (SHA-256 ${presented}) other than server.tls.cert's (${target.fingerprint256})`)
          return
        }
      }
      resolve(response.statusCode === 200 ? undefined : `${target.url.href} answered HTTP ${response.statusCode ?? '?'}`)
    }
    const options = { timeout: timeoutMs, headers: { connection: 'close' } }
    const req = target.url.protocol === 'https:'
      // The chain is not verified; the fingerprint above says it is the configured certificate.
      ? httpsRequest(target.url, { ...options, rejectUnauthorized: false }, onResponse)
      : httpRequest(target.url, options, onResponse)
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)))
    req.on('error', (err) => resolve(`${target.url.href}: ${errorMessage(err)}`))
    req.end()
  })
}
