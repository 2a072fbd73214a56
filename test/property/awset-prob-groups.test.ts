// Property test: a delta-group of AWSET_PROB deltas keeps every dot its sender kept.
//
// A node's gossip joins the deltas it made or took in (a received state's new part, the refusal
// it answered with) into delta-groups: Algorithm 2's interval of its buffer, Algorithm 1's group,
// the received parts of one frame (keyed-states.ts). The node's own state took each delta in turn
// with its own filter; the group takes them with the filters the deltas carry. If the group
// refused a later add because an earlier delta's filter reports it (a false positive, or a remove
// the node's partial union never learned), the dot would stay on the sender alone: no other
// replica holds it, none has tombstoned it, and nothing the sender sends again carries it.
//
// Filters here are tiny (k = 2, m = 64: 22 insertions a generation), so false positives and
// shifts are common; the sender takes whole states of two other replicas with their own histories.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { UnionStrategy } from "../../services/crdt/apbf.js";
import { type ApbfParams, checkParams, strategyName } from "../../services/crdt/apbf-params.js";
import { AWSetProb, type ProbDot, makeAWSetProbLattice } from "../../services/crdt/awset-prob.js";
import { ObjectType } from "../../services/crdt/lattice.js";
import { type KeyedState, keyedStatesOps } from "../../services/gossip/keyed-states.js";
import "../../services/crdt/awset-prob-operations.js"; // registers the AWSET_PROB lattice
import { SplitMix64 } from "../helpers/splitmix64.js";

const el = (n: number): Uint8Array => Uint8Array.of(n);

type Ev = { t: "add"; e: number } | { t: "rm"; e: number } | { t: "take"; q: number } | { t: "churn"; q: number; n: number };

const ev: fc.Arbitrary<Ev> = fc.oneof(
  fc.record({ t: fc.constant("add" as const), e: fc.nat(7) }),
  fc.record({ t: fc.constant("rm" as const), e: fc.nat(7) }),
  fc.record({ t: fc.constant("take" as const), q: fc.nat(1) }),
  // Another replica adds and removes n times: its filter fills and shifts on its own.
  fc.record({ t: fc.constant("churn" as const), q: fc.nat(1), n: fc.integer({ min: 1, max: 30 }) }),
);

const STRATEGIES = [UnionStrategy.WholeFilter, UnionStrategy.ActiveSlices, UnionStrategy.CurrentGeneration];

/** A fresh dot for replica s (the store draws again while the filter reports one). */
function freshDot(s: AWSetProb, rng: SplitMix64): ProbDot {
  let d = rng.next();
  while (!s.isFreshDot(d)) d = rng.next();
  return d;
}

/**
 * Play the events; the sender takes each delta as its store does (a received state with its new
 * part kept for the buffer, the refusal reply joined after it). Returns the sender's state and
 * the deltas its buffer holds, in order.
 */
function play(params: ApbfParams, seed: number, events: Ev[]): { sender: AWSetProb; buffer: AWSetProb[] } {
  const L = makeAWSetProbLattice(params);
  const rng = new SplitMix64(seed);
  const sender = L.bottom();
  const others = [L.bottom(), L.bottom()];
  const buffer: AWSetProb[] = [];
  for (const x of events) {
    if (x.t === "add" || x.t === "rm") {
      const delta = x.t === "add" ? sender.addDelta(el(x.e), freshDot(sender, rng)) : sender.removeDelta(el(x.e));
      sender.joinInPlace(delta);
      buffer.push(delta);
    } else if (x.t === "churn") {
      const q = others[x.q]!;
      for (let i = 0; i < x.n; i++) {
        q.joinInPlace(q.addDelta(el(i % 8), freshDot(q, rng)));
        if (i % 2 === 1) q.joinInPlace(q.removeDelta(el(i % 8)));
      }
    } else {
      const received = others[x.q]!.clone();
      const reply = sender.refusalOf(received);
      const { changed, newPart } = L.joinInPlaceWithNewPart!(sender, received);
      if (changed) buffer.push(newPart);
      if (reply !== undefined) {
        sender.joinInPlace(reply);
        buffer.push(reply);
      }
    }
  }
  return { sender, buffer };
}

const keyed = (s: AWSetProb): ReadonlyMap<string, KeyedState> => new Map([["k", { type: ObjectType.AWSET_PROB, state: s }]]);

function liveDots(s: AWSetProb): ProbDot[] {
  const out: ProbDot[] = [];
  for (const dots of s.entries.values()) for (const d of dots) out.push(d);
  return out;
}

describe("AWSET_PROB delta-groups (property)", () => {
  for (const strategy of STRATEGIES) {
    it(`a group of the sender's deltas holds every dot the sender holds (${strategyName(strategy)})`, () => {
      const params = checkParams({ k: 2, l: 3, m: 64, strategy });
      fc.assert(
        fc.property(fc.integer(), fc.array(ev, { minLength: 5, maxLength: 60 }), (seed, events) => {
          const { sender, buffer } = play(params, seed, events);
          if (buffer.length === 0) return;
          // Algorithm 2 sends a neighbour the interval of the buffer from its ack on: every start.
          for (let from = 0; from < buffer.length; from++) {
            const part = buffer.slice(from);
            const interval = keyedStatesOps.joinAll!(part.map(keyed)).get("k")!.state as AWSetProb;
            // Algorithm 1's group, built one delta at a time.
            let group = keyed(part[0]!);
            for (const d of part.slice(1)) group = keyedStatesOps.join(group, keyed(d));
            // The dots the sender holds that came in with these deltas.
            const carried = new Set(part.flatMap(liveDots));
            const expected = liveDots(sender).filter((d) => carried.has(d));
            for (const g of [interval, group.get("k")!.state as AWSetProb]) {
              for (const d of expected) assert.ok(g.holds(d), `the group from delta ${from} lost dot ${d.toString(16)} the sender holds`);
            }
          }
          // The deltas handed to the group are not changed by it.
          const again = play(params, seed, events);
          buffer.forEach((d, i) => assert.ok(d.equals(again.buffer[i]!), `buffer delta ${i} changed`));
        }),
        { numRuns: 300 },
      );
    });
  }

  it("a group drops what a later delta removes, as the sender's state does", () => {
    const params = checkParams({ k: 2, l: 3, m: 64, strategy: UnionStrategy.ActiveSlices });
    const L = makeAWSetProbLattice(params);
    const s = L.bottom();
    const add = s.addDelta(el(1), 5n);
    s.joinInPlace(add);
    const rm = s.removeDelta(el(1));
    s.joinInPlace(rm);
    const group = keyedStatesOps.joinAll!([keyed(add), keyed(rm)]).get("k")!.state as AWSetProb;
    assert.equal(s.has(el(1)), false);
    assert.equal(group.has(el(1)), false, "the remove later in the group drops the add");
    assert.ok(group.tombstones.query(new Uint8Array(new BigUint64Array([5n]).buffer)), "and the group carries its tombstone");
  });
});
