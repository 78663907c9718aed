import { settled } from '../observability/ignored.ts'

/** The part of an MCP transport (client or server side, SDK v2) that writes messages. */
interface Sender<Message, Options> {
  send (message: Message, options?: Options): Promise<void>
}

/**
 * Makes a stdio transport write one message at a time. The SDK's stdio transports write each message at
 * once and, when the pipe is full, wait for its 'drain' with a listener of their own: a burst of messages
 * (the answers to many relayed requests, large results) piles up one 'drain' and one 'error' listener per
 * waiting message on the pipe's socket, and Node warns of a leak past ten. Here a message waits for the one
 * before it instead, so at most one listener waits on the socket; the order of messages is unchanged.
 */
export function oneSendAtATime<Message, Options> (transport: Sender<Message, Options>): void {
  const send = transport.send.bind(transport)
  let previous: Promise<void> = Promise.resolve()
  transport.send = (message, options) => {
    const sent = previous.then(() => send(message, options))
    // The next send waits for this one either way; this one's failure reaches its caller, who gets `sent`.
    previous = settled(sent)
    return sent
  }
}
