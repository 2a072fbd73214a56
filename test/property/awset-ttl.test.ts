// Property tests of time to live in the add-wins set (awset.ts header): adds that expire, copies
// that travel with their remaining TTL through the real codec (time stops in transit), replicas
// whose clocks disagree by seconds, messages delayed, duplicated and reordered.
//
// Against an oracle run of the same operations and messages without TTL:
//   - an add is never lost before its original expiry (in true time): until then a replica holds
//     it exactly when the oracle does (copies expire at or after the original, whatever the clocks);
//   - a replica never holds more than the oracle (expiry only removes);
//   - nothing a replica once held and lost comes back: not after a remove that observed it (the
//     theorem's hazard, an add outliving its remove), not after its own expiry, not from a stale
//     copy still in flight;
//   - once every message has arrived and every copy's time has run out, no replica holds an add
//     with a TTL, and the adds without one are exactly the oracle's.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { AWSet } from "../../services/crdt/awset.js";
import { AWSetLattice as L } from "../../services/crdt/awset-lattice.js";
import { dotKey } from "../../services/crdt/dot.js";

const REPLICAS = 3;
const names = ["a", "b", "c"];
/** The TTL of each element (one function for all replicas); element 3 does not expire. */
const ttlOf = (e: number): number | undefined => (e === 3 ? undefined : 40 * (e + 1));

type Op =
  | { t: "add"; r: number; e: number }
  | { t: "rm"; r: number; e: number }
  | { t: "send"; from: number; to: number }
  | { t: "deliver"; pick: number; dup: boolean }
  | { t: "tick"; ms: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ t: fc.constant("add" as const), r: fc.nat(REPLICAS - 1), e: fc.nat(3) }),
  fc.record({ t: fc.constant("rm" as const), r: fc.nat(REPLICAS - 1), e: fc.nat(3) }),
  fc.record({ t: fc.constant("send" as const), from: fc.nat(REPLICAS - 1), to: fc.nat(REPLICAS - 1) }),
  fc.record({ t: fc.constant("deliver" as const), pick: fc.nat(), dup: fc.boolean() }),
  fc.record({ t: fc.constant("tick" as const), ms: fc.integer({ min: 0, max: 60 }) }),
);
const script = fc.record({
  offsets: fc.array(fc.integer({ min: -5000, max: 5000 }), { minLength: REPLICAS, maxLength: REPLICAS }),
  ops: fc.array(op, { minLength: 5, maxLength: 60 }),
});

interface Msg {
  to: number;
  bytes: Uint8Array;
  oracle: AWSet;
}

const held = (s: AWSet): Set<string> => {
  const out = new Set<string>();
  for (const dots of s.entries.values()) for (const d of dots) out.add(dotKey(d));
  return out;
};

describe("AWSET time to live", () => {
  it("never loses an add before its original expiry, never brings back what expired or was removed, and clears every expired add", () =>
    fc.assert(
      fc.property(script, ({ offsets, ops }) => {
        let T = 1_000_000; // true time
        const now = (r: number) => T + offsets[r]!;
        const real = Array.from({ length: REPLICAS }, () => AWSet.bottom());
        const oracle = Array.from({ length: REPLICAS }, () => AWSet.bottom());
        const inFlight: Msg[] = [];
        const originalExpiry = new Map<string, number>(); // dot → true time it expires at its origin
        const lost = Array.from({ length: REPLICAS }, () => new Set<string>());

        const check = () => {
          for (let r = 0; r < REPLICAS; r++) {
            real[r]!.expire(now(r));
            const mine = held(real[r]!);
            const theirs = held(oracle[r]!);
            for (const d of mine) {
              assert.ok(theirs.has(d), `replica ${r} holds ${d}, which the oracle does not`);
              assert.ok(!lost[r]!.has(d), `replica ${r} holds ${d} again after losing it`);
            }
            for (const d of theirs) {
              const exp = originalExpiry.get(d);
              if (exp === undefined || T < exp) assert.ok(mine.has(d), `replica ${r} lost ${d} before its expiry`);
            }
            for (const d of lost[r]!) mine.delete(d);
          }
        };
        const snapshot = () => real.map(held);

        for (const o of ops) {
          const before = snapshot();
          if (o.t === "add") {
            const ttl = ttlOf(o.e);
            const el = [Uint8Array.of(o.e)];
            const delta = real[o.r]!.addDelta(names[o.r]!, el, ttl === undefined ? undefined : now(o.r) + ttl);
            real[o.r]!.joinInPlace(delta);
            oracle[o.r]!.joinInPlace(oracle[o.r]!.addDelta(names[o.r]!, el));
            if (ttl !== undefined) for (const dots of delta.entries.values()) for (const d of dots) originalExpiry.set(dotKey(d), T + ttl);
          } else if (o.t === "rm") {
            real[o.r]!.joinInPlace(real[o.r]!.removeDelta([Uint8Array.of(o.e)]));
            oracle[o.r]!.joinInPlace(oracle[o.r]!.removeDelta([Uint8Array.of(o.e)]));
          } else if (o.t === "send") {
            // The whole state, encoded at the sender's time: remaining TTLs.
            inFlight.push({ to: o.to, bytes: L.encode(real[o.from]!, now(o.from)), oracle: oracle[o.from]!.clone() });
          } else if (o.t === "deliver") {
            if (inFlight.length === 0) continue;
            const i = o.pick % inFlight.length;
            const m = inFlight[i]!;
            if (!o.dup) inFlight.splice(i, 1);
            real[m.to]!.joinInPlace(L.decode(m.bytes, now(m.to)));
            oracle[m.to]!.joinInPlace(m.oracle);
          } else {
            T += o.ms;
          }
          check();
          const after = snapshot();
          for (let r = 0; r < REPLICAS; r++) for (const d of before[r]!) if (!after[r]!.has(d)) lost[r]!.add(d);
        }
        // Deliver everything, let every TTL run out (the longest is 160 ms), then look again.
        for (const m of inFlight) {
          real[m.to]!.joinInPlace(L.decode(m.bytes, now(m.to)));
          oracle[m.to]!.joinInPlace(m.oracle);
        }
        T += 1000;
        check();
        for (let r = 0; r < REPLICAS; r++) {
          for (const dots of real[r]!.entries.values()) for (const d of dots) assert.equal(d.expiresAt, undefined, `replica ${r} still holds ${dotKey(d)}`);
          const permanent = [...held(oracle[r]!)].filter((d) => !originalExpiry.has(d));
          assert.deepEqual([...held(real[r]!)].sort(), permanent.sort(), `replica ${r}: the adds without TTL`);
        }
      }),
      { numRuns: 400 },
    ));

  it("carries the remaining TTL on the wire: the receiver's clock and the time in transit do not shorten it", () => {
    const a = AWSet.bottom();
    a.joinInPlace(a.addDelta("a", [Uint8Array.of(1)], 10_000 + 500)); // a's clock: 10,000; TTL 500 ms
    const bytes = L.encode(a, 10_100); // sent with 400 ms left
    const b = L.decode(bytes, 99_000); // b's clock is far ahead; the copy arrives later still
    assert.equal([...b.entries.values()][0]![0]!.expiresAt, 99_400);
    assert.equal(L.encodedSize(a), bytes.length);
    assert.throws(() => L.encode(a), /local time/);
    assert.throws(() => L.decode(bytes), /local time/);
    assert.equal(b.expire(99_399).ctx.isEmpty(), true, "not yet");
    assert.equal(b.has(Uint8Array.of(1)), true);
    assert.equal(b.expire(99_400).ctx.dotCount(), 1);
    assert.equal(b.has(Uint8Array.of(1)), false);
    // The context keeps the expired dot: the original, arriving again, does not bring it back.
    b.joinInPlace(a);
    assert.equal(b.has(Uint8Array.of(1)), false);
  });
});
