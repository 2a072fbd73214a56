// The small parts of the membership core: record precedence, the retransmit-limited broadcast
// queue, the round-robin probe order and the size-scaled timeouts.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { BroadcastQueue } from "../../services/membership/broadcast-queue.ts";
import {
  detectionBoundMs,
  resolveConfig,
  retransmitLimit,
  suspicionTimeoutMs,
} from "../../services/membership/config.ts";
import { supersedes } from "../../services/membership/precedence.ts";
import { ProbeOrder } from "../../services/membership/probe-order.ts";
import { sample, seededRandom } from "../../services/common/prng.ts";
import { MemberState, type MemberInfo } from "../../services/membership/types.ts";
import { isValidAddress } from "../../services/membership/validate.ts";

const states = [MemberState.ALIVE, MemberState.SUSPECT, MemberState.DEAD, MemberState.LEFT];
const record = fc.record({ state: fc.constantFrom(...states), incarnation: fc.bigInt({ min: 0n, max: 5n }) });

describe("record precedence", () => {
  it("is a strict total order on (incarnation, severity)", () => {
    fc.assert(fc.property(record, record, (a, b) => {
      const same = a.state === b.state && a.incarnation === b.incarnation;
      assert.equal(supersedes(a, b) && supersedes(b, a), false, "antisymmetric");
      assert.equal(supersedes(a, b) || supersedes(b, a), !same, "total");
    }));
    fc.assert(fc.property(record, record, record, (a, b, c) => {
      if (supersedes(a, b) && supersedes(b, c)) assert.ok(supersedes(a, c), "transitive");
    }));
  });

  it("follows SWIM: suspicion and death need the same or a newer incarnation, ALIVE a newer one", () => {
    const r = (state: MemberState, incarnation: bigint) => ({ state, incarnation });
    assert.ok(supersedes(r(MemberState.SUSPECT, 1n), r(MemberState.ALIVE, 1n)));
    assert.ok(!supersedes(r(MemberState.SUSPECT, 0n), r(MemberState.ALIVE, 1n)));
    assert.ok(!supersedes(r(MemberState.ALIVE, 1n), r(MemberState.SUSPECT, 1n)));
    assert.ok(supersedes(r(MemberState.ALIVE, 2n), r(MemberState.SUSPECT, 1n)));
    assert.ok(supersedes(r(MemberState.DEAD, 1n), r(MemberState.SUSPECT, 1n)));
    assert.ok(supersedes(r(MemberState.ALIVE, 2n), r(MemberState.DEAD, 1n)));
    assert.ok(supersedes(r(MemberState.LEFT, 1n), r(MemberState.DEAD, 1n)));
  });
});

describe("broadcast queue", () => {
  const info = (nodeId: string, incarnation = 0n): MemberInfo =>
    ({ nodeId, address: "h:1", state: MemberState.ALIVE, incarnation, sinceUnixMs: 0n });

  it("sends each update at most `limit` times, least-sent first, and a newer update resets the budget", () => {
    const q = new BroadcastQueue();
    q.enqueue(info("a"));
    q.enqueue(info("b"));
    let sentA = 0;
    for (let i = 0; i < 10; i++) sentA += q.pick(1, 3).filter((u) => u.nodeId === "a").length;
    assert.equal(sentA, 3);
    assert.equal(q.size, 0);
    q.enqueue(info("a", 1n));
    q.pick(5, 3);
    q.enqueue(info("a", 2n));
    const next = q.pick(5, 3);
    assert.deepEqual(next.map((u) => u.incarnation), [2n]);
    q.enqueue(info("c"));
    assert.deepEqual(q.pick(5, 3, new Set(["c"])).map((u) => u.nodeId), ["a"]);
  });

  it("prefers updates sent fewer times", () => {
    const q = new BroadcastQueue();
    q.enqueue(info("old"));
    q.pick(1, 10);
    q.enqueue(info("new"));
    assert.deepEqual(q.pick(1, 10).map((u) => u.nodeId), ["new"]);
  });
});

describe("probe order", () => {
  it("probes every member once per round and reaches any member within 2(n-1) probes", () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 30 }), fc.integer(), (n, seed) => {
      const random = seededRandom(seed);
      const members = Array.from({ length: n }, (_, i) => `m${i}`);
      const order = new ProbeOrder();
      const picks: string[] = [];
      for (let i = 0; i < 5 * n; i++) picks.push(order.next(() => true, () => members.slice(), random)!);
      for (let round = 0; round < 5; round++) {
        assert.deepEqual(picks.slice(round * n, (round + 1) * n).sort(), members.slice().sort());
      }
      for (const m of members) {
        let last = -1;
        picks.forEach((p, i) => {
          if (p !== m) return;
          assert.ok(i - last <= 2 * n - 1, "gap bounded");
          last = i;
        });
      }
    }));
  });

  it("skips members that stopped being probeable and adds new ones to the current round", () => {
    const random = seededRandom(3);
    const live = new Set(["a", "b", "c"]);
    const order = new ProbeOrder();
    const first = order.next((id) => live.has(id), () => [...live], random)!;
    live.delete([...live].find((id) => id !== first)!);
    live.add("d");
    order.add("d", random);
    const rest = [order.next((id) => live.has(id), () => [...live], random), order.next((id) => live.has(id), () => [...live], random)];
    assert.deepEqual([first, ...rest].sort(), [...live].sort());
    assert.equal(new ProbeOrder().next(() => true, () => [], random), undefined);
  });
});

describe("timeouts and limits", () => {
  const config = resolveConfig();
  it("scale with log10 of the cluster size", () => {
    assert.equal(suspicionTimeoutMs(config, 1), 4000);
    assert.equal(suspicionTimeoutMs(config, 9), 4000);
    assert.equal(suspicionTimeoutMs(config, 99), 8000);
    assert.ok(suspicionTimeoutMs(config, 1000) > suspicionTimeoutMs(config, 100));
    assert.equal(retransmitLimit(config, 5), 4);
    assert.equal(retransmitLimit(config, 10), 8);
    assert.equal(retransmitLimit(config, 100), 12);
    assert.equal(detectionBoundMs(config, 10), 19_000);
  });

  it("sample and address checks behave", () => {
    const picked = sample([1, 2, 3, 4, 5], 3, seededRandom(1));
    assert.equal(new Set(picked).size, 3);
    assert.equal(sample([1, 2], 5, seededRandom(1)).length, 2);
    for (const good of ["127.0.0.1:7000", "node-0.deltaset.default.svc:7000", "[::1]:7000"]) assert.ok(isValidAddress(good), good);
    for (const bad of ["", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", "a b:1", ":80", "host:-1"]) assert.ok(!isValidAddress(bad), bad);
  });
});
