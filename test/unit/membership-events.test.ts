// Watch events: what the core reports becomes a MemberEvent, a reaped member with state REAPED.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { MemberState } from "../../services/gen/deltaset/v1/membership.ts";
import { toMemberEvent } from "../../services/membership/grpc-service.ts";

const member = (state: MemberState) => ({ nodeId: "b", address: "127.0.0.2:7070", state, incarnation: 3n, sinceUnixMs: 1000n });

describe("membership Watch events", () => {
  it("carries the member after the change and its state before", () => {
    assert.deepEqual(toMemberEvent({ kind: "suspect", member: member(MemberState.SUSPECT), previous: MemberState.ALIVE }), {
      member: member(MemberState.SUSPECT),
      previous: MemberState.ALIVE,
    });
  });

  it("reports a reaped member as REAPED, with DEAD or LEFT before", () => {
    for (const previous of [MemberState.DEAD, MemberState.LEFT]) {
      const e = toMemberEvent({ kind: "reaped", member: member(previous), previous });
      assert.equal(e.member!.state, MemberState.REAPED);
      assert.equal(e.previous, previous);
      assert.equal(e.member!.nodeId, "b");
    }
  });
});
