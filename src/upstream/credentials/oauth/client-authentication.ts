/**
 * How the gateway proves who it is at an authorization server's token endpoint: a client secret (HTTP Basic or
 * in the form body) or a client assertion signed with its private key (`private_key_jwt`, RFC 7523). The secret
 * or key is read once, when the credentials are built; a file or variable that cannot be read is a precise
 * configuration error, naming where it looked and never what it found.
 */
import { createPrivateKey } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { importJWK, importPKCS8, type CryptoKey, type JWK } from 'jose'
import * as oauth from 'oauth4webapi'
import { GatewayError, errorMessage } from '../../../errors.ts'
import type { ClientAuthOptions } from './oauth-options.ts'

export interface ClientAuthentication {
  /** Adds the client's proof to one token request. */
  readonly apply: oauth.ClientAuth
  /** The client secret, to be kept out of any text the gateway writes; undefined for a private key. */
  readonly secret: string | undefined
}

function configError (upstream: string, what: string, cause?: unknown): GatewayError {
  return new GatewayError('GW_ERR_CONFIG_INVALID', [`upstreams['${upstream}'].credentials: ${what}`], { cause })
}

type Env = Readonly<Record<string, string | undefined>>

async function readSecret (upstream: string, auth: Extract<ClientAuthOptions, { secretFile?: unknown }>, env: Env): Promise<string> {
  if ((auth.secretFile === undefined) === (auth.secretEnv === undefined)) {
    throw configError(upstream, `${auth.method} needs the client secret from exactly one of secretFile and secretEnv`)
  }
  let secret: string
  if (auth.secretFile !== undefined) {
    try {
      secret = (await readFile(auth.secretFile, 'utf8')).trim()
    } catch (err) {
      throw configError(upstream, `cannot read the client secret file '${auth.secretFile}': ${(err as NodeJS.ErrnoException).code ?? errorMessage(err)}`)
    }
  } else {
    secret = (env[auth.secretEnv!] ?? '').trim()
  }
  if (secret === '') {
    throw configError(upstream, `the client secret (${auth.secretFile !== undefined ? `file '${auth.secretFile}'` : `environment variable ${auth.secretEnv!}`}) is empty`)
  }
  return secret
}

/** The JWS algorithm a PEM key signs with when none is configured. */
function algorithmOf (pem: string): string {
  const key = createPrivateKey(pem)
  switch (key.asymmetricKeyType) {
    case 'rsa': return 'RS256'
    case 'rsa-pss': return 'PS256'
    case 'ed25519': return 'Ed25519'
    case 'ec': {
      const curve = key.asymmetricKeyDetails?.namedCurve
      if (curve === 'prime256v1') return 'ES256'
      if (curve === 'secp384r1') return 'ES384'
      if (curve === 'secp521r1') return 'ES512'
      throw new Error(`EC curve ${curve ?? '(unknown)'} has no JWS algorithm`)
    }
    default: throw new Error(`a ${key.asymmetricKeyType ?? 'secret'} key cannot sign a client assertion`)
  }
}

async function readPrivateKey (upstream: string, auth: Extract<ClientAuthOptions, { method: 'private_key_jwt' }>): Promise<oauth.PrivateKey> {
  let text: string
  try {
    text = await readFile(auth.keyFile, 'utf8')
  } catch (err) {
    throw configError(upstream, `cannot read the private key file '${auth.keyFile}': ${(err as NodeJS.ErrnoException).code ?? errorMessage(err)}`)
  }
  try {
    if (text.trimStart().startsWith('{')) {
      const jwk = JSON.parse(text) as JWK
      if (jwk.d === undefined) throw new Error('the JWK holds no private key (no "d")')
      const alg = auth.alg ?? jwk.alg ?? (jwk.kty === 'RSA' ? 'RS256' : jwk.kty === 'OKP' ? 'Ed25519' : jwk.crv === 'P-384' ? 'ES384' : 'ES256')
      const key = await importJWK(jwk, alg) as CryptoKey
      const kid = auth.kid ?? jwk.kid
      return kid === undefined ? { key } : { key, kid }
    }
    const key = await importPKCS8(text, auth.alg ?? algorithmOf(text))
    return auth.kid === undefined ? { key } : { key, kid: auth.kid }
  } catch (err) {
    // The parser's message names the format problem, never the key's bytes.
    throw configError(upstream, `the private key file '${auth.keyFile}' is not a PKCS#8 PEM or private JWK usable for a client assertion: ${errorMessage(err)}`)
  }
}

export async function loadClientAuthentication (
  upstream: string,
  auth: ClientAuthOptions,
  env: Env = process.env,
): Promise<ClientAuthentication> {
  if (auth.method === 'private_key_jwt') {
    return { apply: oauth.PrivateKeyJwt(await readPrivateKey(upstream, auth)), secret: undefined }
  }
  const secret = await readSecret(upstream, auth, env)
  return {
    apply: auth.method === 'client_secret_basic' ? oauth.ClientSecretBasic(secret) : oauth.ClientSecretPost(secret),
    secret,
  }
}
