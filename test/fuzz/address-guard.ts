// Keeps the fuzzer's traffic on loopback: a Membership frame can make the node dial an address it
// names (Join's self, the updates of Ping and PingReq, PingReq's target), and a mutant could name
// any host. Before a Membership frame is sent it is decoded with the same generated code the node
// uses; it is sent only when every address it carries is empty or one of the fuzzer's own (a frame
// that does not decode is sent: the node cannot decode it either, so it dials nothing).
import { JoinRequest, type MemberInfo, MembershipService, PingReqRequest, PingRequest } from "../../services/gen/deltaset/v1/membership.ts";

const ADDRESSES: Record<string, (b: Buffer) => string[]> = {
  [MembershipService.join.path]: (b) => {
    const m = JoinRequest.decode(b);
    return m.self === undefined ? [] : [m.self.address];
  },
  [MembershipService.ping.path]: (b) => PingRequest.decode(b).updates.map((u: MemberInfo) => u.address),
  [MembershipService.pingReq.path]: (b) => {
    const m = PingReqRequest.decode(b);
    return [m.targetAddress, ...m.updates.map((u: MemberInfo) => u.address)];
  },
};

/** True when the frame for this method may be sent: it names no address outside `allowed`. */
export function addressesAllowed(path: string, frame: Buffer, allowed: ReadonlySet<string>): boolean {
  const read = ADDRESSES[path];
  if (read === undefined) return true;
  let addresses: string[];
  try {
    addresses = read(frame);
  } catch {
    return true;
  }
  return addresses.every((a) => a === "" || allowed.has(a));
}
