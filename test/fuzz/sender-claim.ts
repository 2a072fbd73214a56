// The node id a peer frame claims as its sender (Gossip's `from` in Exchange, ExchangeStream, PushState,
// HandOver and Contexts, Join's self, Leave's node_id, Ping's and PingReq's `from`), read with the generated
// decoders. The fuzzer signs a mutant as the sender it names, as a cluster-key holder could, so
// mutated senders reach the handlers instead of stopping at the proof check (a frame naming no
// usable id is signed as the fake member).
import { ContextsRequest, GossipFrame, GossipService, HandOverRequest, StateChunk } from "../../services/gen/deltaset/v1/gossip.ts";
import { JoinRequest, LeaveRequest, MembershipService, PingReqRequest, PingRequest } from "../../services/gen/deltaset/v1/membership.ts";

const SENDER: Record<string, (b: Buffer) => string | undefined> = {
  [GossipService.exchange.path]: (b) => GossipFrame.decode(b).from,
  [GossipService.exchangeStream.path]: (b) => GossipFrame.decode(b).from,
  [GossipService.pushState.path]: (b) => StateChunk.decode(b).from,
  [GossipService.handOver.path]: (b) => HandOverRequest.decode(b).from,
  [GossipService.contexts.path]: (b) => ContextsRequest.decode(b).from,
  [MembershipService.join.path]: (b) => JoinRequest.decode(b).self?.nodeId,
  [MembershipService.leave.path]: (b) => LeaveRequest.decode(b).nodeId,
  [MembershipService.ping.path]: (b) => PingRequest.decode(b).from,
  [MembershipService.pingReq.path]: (b) => PingReqRequest.decode(b).from,
};

/** Ids a proof can carry (peer-proof.ts). */
const PROOF_ID = /^[A-Za-z0-9._-]{1,128}$/;

/** The id to sign this frame as: the sender it claims when a proof can name it, else `fallback`. */
export function claimedSender(path: string, frame: Buffer, fallback: string): string {
  try {
    const id = SENDER[path]?.(frame);
    return id !== undefined && PROOF_ID.test(id) ? id : fallback;
  } catch {
    return fallback;
  }
}
