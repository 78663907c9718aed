#!/usr/bin/env node
// The container image's HEALTHCHECK: `node dist/healthcheck.js --config <file>` asks the gateway that runs with
// that configuration file for `/healthz` and exits 0 when it answers 200, 1 otherwise (with the reason on
// stderr). It reads the file as the gateway does (the same ${…} variables and GATEWAY_… overrides), so the port
// and the scheme are the gateway's own: HTTPS when the file has server.tls, plain HTTP otherwise.
import { parseArgs } from 'node:util'
import { readConfig } from './config/load.ts'
import { errorMessage } from './errors.ts'
import { checkHealth, healthTarget } from './http/health-probe.ts'

async function main (): Promise<number> {
  const { values } = parseArgs({ options: { config: { type: 'string', short: 'c' } }, strict: true })
  if (values.config === undefined) {
    process.stderr.write('usage: healthcheck --config <file> (the configuration file the gateway runs with)\n')
    return 1
  }
  const { config } = await readConfig(values.config)
  const problem = await checkHealth(await healthTarget(config.server))
  if (problem === undefined) return 0
  process.stderr.write(`unhealthy: ${problem}\n`)
  return 1
}

main().then((code) => process.exit(code), (err: unknown) => {
  process.stderr.write(`unhealthy: ${errorMessage(err)}\n`)
  process.exit(1)
})
