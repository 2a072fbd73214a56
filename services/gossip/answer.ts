// What the exchange's receive paths answer a peer call with: a reply (with the acknowledgements it
// carries), or a refusal.
import type { status } from "@grpc/grpc-js";
import type { Ack } from "./engine.js";

/** A refused call: the gRPC status to answer with, and why. Nothing of it was applied. */
export interface Refusal {
  code: status;
  details: string;
}

export type Answer<T> = { reply: T } | { refused: Refusal };

/** An acknowledgement as a reply carries it. */
export function ackToProto(a: Ack): { partition: number; seq: bigint } {
  return { partition: a.partition, seq: BigInt(a.seq) };
}
