// A message of a bidirectional stream that an interceptor refuses. A server interceptor must not
// end such a call itself: the handler may be writing the answer to an earlier message at that
// moment, and grpc-js can then lose the status (the caller waits until its deadline). So the
// refusing interceptor marks the message and passes it on, and the handler ends the stream with
// the refusal once the earlier answers are out (gossip/node-gossip.ts serveFrameStream,
// replica/add-stream.ts).
export interface StreamRefusal {
  code: number;
  details: string;
}

/** The methods whose handler ends the stream with a marked refusal (every other one is refused by the interceptor). */
const REFUSED_BY_HANDLER = new Set(["/deltaset.v1.Gossip/ExchangeStream", "/deltaset.v1.Replica/AddStream"]);

/** True when refusals of this method's messages go on marked to its handler. */
export function refusedByHandler(path: string): boolean {
  return REFUSED_BY_HANDLER.has(path);
}

const refusals = new WeakMap<object, StreamRefusal>();

/** Mark a stream message as refused; returns it for passing on. */
export function markStreamRefused<T extends object>(message: T, refusal: StreamRefusal): T {
  refusals.set(message, refusal);
  return message;
}

/** The refusal an interceptor marked on this message, if any. */
export function streamRefusalOf(message: unknown): StreamRefusal | undefined {
  return typeof message === "object" && message !== null ? refusals.get(message) : undefined;
}
