// What the SWIM core owes the outside world: the calls, deferred replies and events produced since
// the last drain, and the calls still awaiting an answer (each with its deadline). Call ids and
// probe sequence numbers are handed out here, in one place, so the parts of the core never clash.
import type { CoreOutput } from "./types.js";

/** A call this node made that still awaits an answer, and why it was made. */
export type PendingCall =
  | { kind: "probe-ping"; seq: bigint; target: string; fallback: boolean; deadline: number }
  | { kind: "probe-pingReq"; seq: bigint; deadline: number }
  | { kind: "notice-ping"; deadline: number }
  | {
    kind: "relay-ping"; inboundId: number; originSeq: bigint; origin: string; target: string; seq: bigint;
    corrections: string[]; deadline: number;
  }
  | { kind: "join"; deadline: number }
  | { kind: "leave"; deadline: number };

export type RelayCall = Extract<PendingCall, { kind: "relay-ping" }>;

export class Outbox {
  /** Output since the last drain. */
  out: CoreOutput = emptyOutput();
  readonly pending = new Map<number, PendingCall>();
  private lastId = 0;
  private lastSeq = 0n;

  /** A fresh id for an outbound call or an inbound request answered later. */
  nextId(): number {
    return ++this.lastId;
  }

  /** A fresh ping sequence number. */
  nextSeq(): bigint {
    return ++this.lastSeq;
  }

  drain(): CoreOutput {
    const out = this.out;
    this.out = emptyOutput();
    return out;
  }
}

function emptyOutput(): CoreOutput {
  return { calls: [], replies: [], events: [] };
}
