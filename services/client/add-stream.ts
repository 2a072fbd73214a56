// The client side of AddStream: send batches of elements for one key, at most `window` batches
// unacknowledged at a time (and never faster than the transport drains), and collect the node's
// in-order acks. Resolves when the node has acknowledged the last batch; rejects with the node's
// error (naming the failed batch's seq) or the transport's, or (with stallMs) when batches wait
// that long with no acknowledgement: a stream has no deadline, and must not hang its caller.
import type * as grpc from "@grpc/grpc-js";
import type { AddStreamAck, ReplicaClient } from "../gen/deltaset/v1/replica.js";

export interface AddStreamResult {
  batches: number;
  elements: number;
  added: number;
}

export async function addStream(
  client: ReplicaClient,
  key: string,
  batches: AsyncIterable<Buffer[]> | Iterable<Buffer[]>,
  opts: {
    window?: number;
    metadata?: grpc.Metadata;
    onAck?: (acked: AddStreamResult) => void;
    ttlMs?: number;
    /** Each batch is acknowledged once this many nodes hold it durably (AddStreamRequest.copies). */
    copies?: number;
    /** Cancel the stream, and reject, when batches wait this long (ms) with no acknowledgement. */
    stallMs?: number;
  } = {},
): Promise<AddStreamResult> {
  const window = opts.window ?? 64;
  const call = opts.metadata ? client.addStream(opts.metadata) : client.addStream();
  const acked: AddStreamResult = { batches: 0, elements: 0, added: 0 };
  let sentSeq = 0n;
  let ackedSeq = 0n;
  let wake: (() => void) | undefined;
  /** The call is over (ended or failed): nothing more can be sent on it. */
  let over = false;
  /** When the stream last moved: an ack, or a batch sent with none outstanding before it. */
  let movedAt = performance.now();
  /** Why this side cancelled the call (no ack in time, or copies not confirmed): what the caller gets. */
  let cancelledFor: Error | undefined;
  const stallMs = opts.stallMs;
  const watchdog =
    stallMs === undefined
      ? undefined
      : setInterval(() => {
          if (over || sentSeq === ackedSeq || performance.now() - movedAt < stallMs) return;
          cancelledFor = new Error(`no acknowledgement for ${stallMs} ms with ${sentSeq - ackedSeq} batch(es) outstanding (after batch ${ackedSeq}): the stream was cancelled`);
          call.cancel();
        }, Math.max(10, Math.min(1000, stallMs / 4)));
  const done = new Promise<void>((resolve, reject) => {
    call.on("data", (ack: AddStreamAck) => {
      movedAt = performance.now();
      // A node of an earlier version ignores copies: its acks say 0, and its batches are on it alone.
      if (opts.copies !== undefined && opts.copies > 1 && ack.copies < opts.copies && cancelledFor === undefined) {
        cancelledFor = new Error(`batches up to seq ${ack.seq} were acknowledged with ${ack.copies} of the ${opts.copies} copies asked (a node of an earlier version, which ignores copies?): the stream was cancelled; they are made on that node`);
        call.cancel();
        return;
      }
      ackedSeq = ack.seq;
      acked.batches += ack.batches;
      acked.elements += Number(ack.elements);
      acked.added += Number(ack.added);
      opts.onAck?.({ ...acked });
      wake?.();
    });
    call.on("error", (err) => {
      over = true;
      wake?.();
      reject(cancelledFor ?? err);
    });
    call.on("end", () => {
      over = true;
      wake?.();
      resolve();
    });
  });
  done.catch(() => {}); // observed below; a send loop that fails first must not leave it unhandled
  const waitFor = (ready: () => boolean) =>
    new Promise<void>((resolve) => {
      if (ready() || over) return resolve();
      wake = () => {
        if (ready() || over) {
          wake = undefined;
          resolve();
        }
      };
    });
  // The transport took the batch but asks to wait: until it drains, or the call ends or fails (a
  // call that fails meanwhile never drains, and waiting on it alone would hang the caller).
  const drained = () =>
    Promise.race([
      new Promise<void>((resolve) => call.once("drain", () => resolve())),
      done.then(
        () => undefined,
        () => undefined,
      ),
    ]);
  try {
    for await (const elements of batches) {
      if (over) break;
      if (elements.length === 0) continue;
      await waitFor(() => sentSeq - ackedSeq < BigInt(window));
      if (over) break;
      if (sentSeq === ackedSeq) movedAt = performance.now();
      sentSeq++;
      if (!call.write({ key, elements, texts: [], seq: sentSeq, ttlMs: opts.ttlMs === undefined ? undefined : BigInt(opts.ttlMs), copies: opts.copies })) await drained();
    }
  } finally {
    call.end();
  }
  try {
    await done;
  } finally {
    clearInterval(watchdog);
  }
  if (ackedSeq !== sentSeq) throw new Error(`the stream ended after batch ${ackedSeq} of ${sentSeq} was acknowledged`);
  return acked;
}
