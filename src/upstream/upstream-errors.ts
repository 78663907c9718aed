import { ProtocolError, SdkError, SdkErrorCode } from '@modelcontextprotocol/client'
import { GatewayError, RpcError, errorMessage } from '../errors.ts'

/**
 * Turns whatever an upstream request threw into the error the client sees: a JSON-RPC error from the
 * upstream keeps its code, message and data; transport failures and timeouts become gateway errors
 * that name the upstream and keep the cause.
 */
export function mapUpstreamError (err: unknown, upstream: string, what: string, timeoutMs: number, signal?: AbortSignal): Error {
  if (err instanceof GatewayError || err instanceof RpcError) return err
  if (signal?.aborted) {
    return new GatewayError('GW_ERR_REQUEST_CANCELLED', [errorMessage(signal.reason)], { cause: err })
  }
  if (err instanceof ProtocolError) return new RpcError(err.code, err.message.replace(/^MCP error -?\d+: /, ''), err.data)
  if (err instanceof SdkError) {
    switch (err.code) {
      case SdkErrorCode.RequestTimeout:
        return new GatewayError('GW_ERR_UPSTREAM_TIMEOUT', [upstream, what, `${timeoutMs}ms`], { cause: err })
      case SdkErrorCode.ConnectionClosed:
      case SdkErrorCode.NotConnected:
      case SdkErrorCode.SendFailed:
        return new GatewayError('GW_ERR_UPSTREAM_CONNECTION_LOST', [upstream, what, err.message], { cause: err })
      default:
        return new GatewayError('GW_ERR_UPSTREAM_FAILED', [upstream, what, err.message], { cause: err })
    }
  }
  return new GatewayError('GW_ERR_UPSTREAM_FAILED', [upstream, what, errorMessage(err)], { cause: err })
}
