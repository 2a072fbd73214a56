// What a node's membership view says, for tests.
import { call, membershipClient } from "../../services/client/rpc.ts";
import { MemberState } from "../../services/gen/deltaset/v1/membership.ts";

/** The ids the node at address lists as ALIVE, sorted. */
export async function aliveIds(address: string): Promise<string[]> {
  const m = membershipClient(address);
  try {
    const r = await call(m, m.members, { includeDeparted: false }, { timeoutMs: 3000 });
    return r.members.filter((x) => x.state === MemberState.ALIVE).map((x) => x.nodeId).sort();
  } finally {
    m.close();
  }
}
