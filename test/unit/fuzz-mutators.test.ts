// The fuzzer's building blocks (test/fuzz/): the wire walker reads the fields of a generated
// encoding, every mutator is deterministic for a seed and changes the frame, a nested mutation
// keeps the outer framing valid, and the address guard lets through only the fuzzer's addresses.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { seededRandom } from "../../services/common/prng.ts";
import { JoinRequest, MemberState, MembershipService } from "../../services/gen/deltaset/v1/membership.ts";
import { AddRequest } from "../../services/gen/deltaset/v1/replica.ts";
import { addressesAllowed } from "../fuzz/address-guard.ts";
import { MUTATORS, mutate } from "../fuzz/mutators.ts";
import { fieldSpans } from "../fuzz/wire.ts";

const add = Buffer.from(AddRequest.encode({ key: "fz-1", elements: [Buffer.from("a"), Buffer.from("b")], texts: ["pear"] }).finish());

describe("fuzz mutators", () => {
  it("the wire walker finds every top-level field", () => {
    assert.deepEqual(fieldSpans(add).map((s) => [s.field, s.wire]), [[1, 2], [2, 2], [2, 2], [3, 2]]);
    assert.deepEqual(fieldSpans(Buffer.from([0x0a, 0x05, 0x61])), [], "a length past the end stops the walk");
  });

  it("every mutator is deterministic for a seed and changes the frame", () => {
    for (const [name, m] of Object.entries(MUTATORS)) {
      const a = m(add, seededRandom(7));
      assert.deepEqual(a, m(add, seededRandom(7)), name);
      let changed = 0;
      for (let s = 0; s < 20; s++) if (!m(add, seededRandom(s)).equals(add)) changed++;
      assert.ok(changed >= 15, `${name} changed only ${changed} of 20`);
    }
    assert.deepEqual(mutate(add, seededRandom(3)), mutate(add, seededRandom(3)));
  });

  it("a nested mutation keeps the outer fields well framed", () => {
    for (let s = 0; s < 50; s++) {
      const out = MUTATORS.nested!(add, seededRandom(s));
      const spans = fieldSpans(out);
      assert.equal(spans.at(-1)?.end, out.length, `seed ${s}`);
    }
  });

  it("the address guard passes only the fuzzer's own addresses", () => {
    const allowed = new Set(["127.0.0.214:5000"]);
    const join = (address: string) => Buffer.from(JoinRequest.encode({ cluster: "c", self: { nodeId: "n", address, state: MemberState.ALIVE, incarnation: 0n, sinceUnixMs: 0n } }).finish());
    assert.ok(addressesAllowed(MembershipService.join.path, join("127.0.0.214:5000"), allowed));
    assert.ok(!addressesAllowed(MembershipService.join.path, join("126.0.0.214:5000"), allowed));
    assert.ok(!addressesAllowed(MembershipService.join.path, join("example.com:80"), allowed));
    assert.ok(addressesAllowed(MembershipService.members.path, Buffer.from([1, 2, 3]), allowed), "methods without addresses pass");
  });
});
