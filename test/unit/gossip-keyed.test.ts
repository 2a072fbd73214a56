// Partition hashing and keyed partition payloads (join per key, sizes, codec, receive contract).
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { AWSet, AWSetLattice, ObjectType, PNCounter } from "../../services/crdt/index.js";
import { PartitionPayload, PayloadKind } from "../../services/gen/deltaset/v1/gossip.js";
import {
  KeyTypeConflictError,
  type KeyedState,
  type KeyedStates,
  fnv1a32,
  joinKeyedInto,
  keyedDifference,
  keyedFromProto,
  keyedLeq,
  keyedStatesOps,
  keyedToProto,
  partitionOf,
  receivedPart,
} from "../../services/gossip/index.js";

const enc = (s: string) => Buffer.from(s);
const aw = (state: AWSet): KeyedState => ({ type: ObjectType.AWSET, state });

describe("partitionOf", () => {
  it("is FNV-1a 32-bit over the UTF-8 bytes", () => {
    // Published FNV-1a test vectors.
    assert.equal(fnv1a32(enc("")), 0x811c9dc5);
    assert.equal(fnv1a32(enc("a")), 0xe40c292c);
    assert.equal(fnv1a32(enc("foobar")), 0xbf9cf968);
    assert.equal(partitionOf("foobar", 64), 0xbf9cf968 % 64);
    assert.equal(partitionOf("héllo", 64), partitionOf(enc("héllo"), 64));
  });

  it("hashes a string as its UTF-8 bytes, ASCII or not (the string path skips the encoder for ASCII)", () => {
    const P = 2 ** 31 - 1; // a modulus that keeps nearly all of the hash
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: "grapheme" }), fc.string({ unit: "binary" })), (s) => {
        assert.equal(partitionOf(s, P), fnv1a32(new TextEncoder().encode(s)) % P);
      }),
      { numRuns: 2000 },
    );
  });

  it("maps into range and spreads keys over partitions", () => {
    const counts = new Array(64).fill(0);
    for (let i = 0; i < 6400; i++) counts[partitionOf(`user:${i}`, 64)]++;
    assert.ok(Math.min(...counts) > 50 && Math.max(...counts) < 150, `uneven: ${counts}`);
    assert.throws(() => partitionOf("k", 0), RangeError);
  });
});

describe("keyed states", () => {
  const s1 = AWSet.bottom().add("r1", [enc("a"), enc("b")]);
  const s2 = AWSet.bottom().add("r2", [enc("c")]);
  const s3 = s1.remove([enc("a")]);

  it("joins per key with the key's lattice and never mutates its inputs", () => {
    const p: KeyedStates = new Map([["k", aw(s1)], ["only-p", aw(s2)]]);
    const q: KeyedStates = new Map([["k", aw(s3.add("r1", [enc("d")]))]]);
    const before = [AWSetLattice.encode(s1), AWSetLattice.encode(q.get("k")!.state as AWSet)];
    const j = keyedStatesOps.join(p, q);
    assert.deepEqual((j.get("k")!.state as AWSet).sortedKeys(), ["b", "d"]);
    assert.deepEqual((j.get("only-p")!.state as AWSet).sortedKeys(), ["c"]);
    assert.deepEqual([AWSetLattice.encode(s1), AWSetLattice.encode(q.get("k")!.state as AWSet)], before);
    const all = keyedStatesOps.joinAll!([p, q, p]);
    assert.ok(AWSetLattice.equals(all.get("k")!.state as AWSet, j.get("k")!.state as AWSet));
    assert.deepEqual(AWSetLattice.encode(s1), before[0]);
  });

  it("is bottom only when every key is", () => {
    assert.ok(keyedStatesOps.isBottom(new Map()));
    assert.ok(keyedStatesOps.isBottom(new Map([["k", aw(AWSet.bottom())]])));
    assert.ok(!keyedStatesOps.isBottom(new Map([["k", aw(s1)]])));
  });

  it("sizeBytes is the exact size of the keys inside an encoded PartitionPayload", () => {
    const p: KeyedStates = new Map([
      ["k", aw(s1)],
      ["ключ", aw(s3)],
      ["n", { type: ObjectType.COUNTER, state: PNCounter.bottom().increment("r1", 5n) }],
    ]);
    const encoded = PartitionPayload.encode({ partition: 0, kind: PayloadKind.PAYLOAD_KIND_UNSPECIFIED, seq: 0n, keys: keyedToProto(p, 0) }).finish();
    assert.equal(keyedStatesOps.sizeBytes(p), encoded.length);
  });

  it("refuses to join two types under one key", () => {
    const p: KeyedStates = new Map([["k", aw(s1)]]);
    const q: KeyedStates = new Map([["k", { type: ObjectType.COUNTER, state: PNCounter.bottom() }]]);
    assert.throws(() => keyedStatesOps.join(p, q), KeyTypeConflictError);
  });

  it("round-trips through the proto form and refuses duplicate keys", () => {
    const p: KeyedStates = new Map([["k", aw(s1)], ["j", aw(s2)]]);
    const back = keyedFromProto(keyedToProto(p, 0), 0);
    assert.ok(keyedLeq(p, back) && keyedLeq(back, p));
    const keys = keyedToProto(p, 0);
    assert.throws(() => keyedFromProto([...keys, keys[0]!], 0), RangeError);
    assert.throws(() => keyedFromProto([{ key: "x", state: undefined }], 0), RangeError);
  });

  it("difference, leq and the receive contract agree with the join", () => {
    const local: KeyedStates = new Map([["k", aw(s1)]]);
    const received: KeyedStates = new Map([["k", aw(s3)], ["new", aw(s2)]]);
    const diff = keyedDifference(received, local);
    // Δ(d, X) ⊔ X = d ⊔ X
    const viaDiff = keyedStatesOps.join(local, diff);
    const direct = keyedStatesOps.join(local, received);
    assert.ok(keyedLeq(viaDiff, direct) && keyedLeq(direct, viaDiff));
    assert.ok(keyedLeq(local, direct) && !keyedLeq(received, local));
    assert.equal(receivedPart(received, received, true), undefined);
    assert.equal(receivedPart(received, local, false), received);
  });

  it("joinKeyedInto mutates only the target (property)", () => {
    const el = fc.constantFrom("a", "b", "c", "d");
    fc.assert(
      fc.property(fc.array(el, { maxLength: 4 }), fc.array(el, { maxLength: 4 }), fc.array(el, { maxLength: 2 }), (xs, ys, rs) => {
        const a = AWSet.bottom().add("r1", xs.map(enc));
        const b = AWSet.bottom().add("r2", ys.map(enc)).remove(rs.map(enc));
        const target = new Map([["k", aw(a.clone())]]);
        const other: KeyedStates = new Map([["k", aw(b)], ["k2", aw(b)]]);
        const bBytes = AWSetLattice.encode(b);
        joinKeyedInto(target, other);
        assert.deepEqual(AWSetLattice.encode(b), bBytes);
        assert.ok(AWSetLattice.equals(target.get("k")!.state as AWSet, AWSetLattice.join(a, b)));
        // A new key gets its own copy (independent of the payload's object); ⊥ is not stored.
        if (b.isBottom()) assert.equal(target.has("k2"), false);
        else assert.notEqual(target.get("k2")!.state, b);
      }),
      { numRuns: 100 },
    );
  });
});
