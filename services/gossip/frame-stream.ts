// One long-lived ExchangeStream to a neighbour: frames are written on it and each is settled by the
// reply the neighbour writes for it (replies come in frame order, each echoing its frame_id).
// Opened at the first frame and again after it ends; any failure (the stream breaks, a reply does
// not come within the deadline, a refusal) rejects every frame waiting on it and closes it, as a
// failed Exchange call would reject its one frame: gossip resends what is not acknowledged.
// A neighbour that does not serve the method (UNIMPLEMENTED: an older version) is remembered, and
// the caller uses unary Exchange for it.
import * as grpc from "@grpc/grpc-js";
import type { GossipFrame, GossipReply } from "../gen/deltaset/v1/gossip.js";
import { replyRefused } from "../client/peer-clients.js";

interface Waiting {
  frameId: bigint;
  resolve: (r: GossipReply) => void;
  reject: (e: Error) => void;
  deadline: NodeJS.Timeout;
}

export class FrameStream {
  private call: grpc.ClientDuplexStream<GossipFrame, GossipReply> | undefined;
  private waiting: Waiting[] = [];
  /** The neighbour answered UNIMPLEMENTED: use unary Exchange. */
  unsupported = false;
  /** The caller has reported the fallback to unary calls (once per neighbour). */
  fallbackReported = false;
  /** Streams opened so far. */
  opened = 0;

  constructor(
    private readonly open: () => grpc.ClientDuplexStream<GossipFrame, GossipReply>,
    /** Longest wait for one frame's reply (ms); past it the stream is given up. */
    private readonly timeoutMs: number,
  ) {}

  /** Send a frame; settles with its reply, or rejects when the stream fails first. */
  send(frame: GossipFrame): Promise<GossipReply> {
    const call = this.call ?? this.start();
    return new Promise((resolve, reject) => {
      const deadline = setTimeout(() => this.fail(call, deadlineError(this.timeoutMs)), this.timeoutMs);
      this.waiting.push({ frameId: frame.frameId, resolve, reject, deadline });
      call.write(frame);
    });
  }

  /** Close the stream; frames still waiting are rejected. */
  close(): void {
    if (this.call !== undefined) this.fail(this.call, Object.assign(new Error("exchange stream closed"), { code: grpc.status.CANCELLED }));
  }

  private start(): grpc.ClientDuplexStream<GossipFrame, GossipReply> {
    const call = this.open();
    this.call = call;
    this.opened++;
    call.on("data", (reply: GossipReply) => {
      if (this.call !== call) return;
      // A reply without a valid MAC (cluster key): nothing of it is used.
      if (replyRefused(reply)) {
        return this.fail(call, Object.assign(new Error("a peer's reply on the stream carries no valid cluster key MAC"), { code: grpc.status.UNAUTHENTICATED, details: "a peer's reply on the stream carries no valid cluster key MAC" }));
      }
      const w = this.waiting.shift();
      if (w === undefined || w.frameId !== reply.frameId) {
        const why = w === undefined ? "a reply for no frame" : `a reply for frame ${reply.frameId} where ${w.frameId} was next`;
        if (w !== undefined) this.waiting.unshift(w);
        return this.fail(call, Object.assign(new Error(`exchange stream: ${why}`), { code: grpc.status.INTERNAL }));
      }
      clearTimeout(w.deadline);
      w.resolve(reply);
    });
    call.on("error", (err: grpc.ServiceError) => {
      if (err.code === grpc.status.UNIMPLEMENTED) this.unsupported = true;
      this.fail(call, err);
    });
    // The neighbour ended the stream (it is shutting down): frames still waiting get no reply.
    call.on("end", () => this.fail(call, Object.assign(new Error("exchange stream ended by the peer"), { code: grpc.status.UNAVAILABLE })));
    return call;
  }

  private fail(call: grpc.ClientDuplexStream<GossipFrame, GossipReply>, err: Error): void {
    if (this.call !== call) return;
    this.call = undefined;
    const waiting = this.waiting;
    this.waiting = [];
    for (const w of waiting) {
      clearTimeout(w.deadline);
      w.reject(err);
    }
    call.cancel();
  }
}

function deadlineError(ms: number): Error {
  return Object.assign(new Error(`no reply on the exchange stream within ${ms} ms`), { code: grpc.status.DEADLINE_EXCEEDED });
}
