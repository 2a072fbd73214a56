// Codecs: round trips, and hostile input. Any byte string given to decode either fails with
// DecodeError (never another error type) or yields a state that satisfies the invariants and
// survives a second round trip.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  AWSet,
  AWSetLattice,
  CausalContext,
  CounterLattice,
  DecodeError,
  type Lattice,
  type Dot,
  contextEncodedSize,
  contextFromProto,
  encodeContext,
  contextToProto,
  elementKey,
} from "../../services/crdt/index.js";
import {
  AWSetState,
  CausalContext as CausalContextMsg,
  CounterState,
} from "../../services/gen/deltaset/v1/types.js";
import { RUNS, awUniverse, counterUniverse, pickFrom, withPicks, type Universe } from "./universe.js";
import { awsetProblems, contextProblems, counterProblems } from "./invariants.js";

const run = (p: fc.IPropertyWithHooks<unknown>) => fc.assert(p, { numRuns: RUNS });

/** decode must throw DecodeError or give a valid state that round-trips. Returns true if accepted. */
function decodeSafely<S>(L: Lattice<S>, bytes: Uint8Array, problems: (s: S) => string[]): boolean {
  let s: S;
  try {
    s = L.decode(bytes);
  } catch (err) {
    if (err instanceof DecodeError) {
      assert.ok(err.message.length > 0);
      return false;
    }
    throw err;
  }
  assert.deepEqual(problems(s), []);
  const again = L.decode(L.encode(s));
  assert.ok(L.equals(again, s));
  return true;
}

// Small random protobuf messages: valid wire format, arbitrary (often inconsistent) content.
const replicaId = fc.oneof({ arbitrary: fc.constantFrom("a", "b"), weight: 9 }, { arbitrary: fc.constantFrom("", "x".repeat(257)), weight: 1 });
const counter = fc.oneof(
  { arbitrary: fc.bigInt({ min: 1n, max: 6n }), weight: 12 },
  { arbitrary: fc.constantFrom(0n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 64n - 1n), weight: 1 },
);
const dotMsg = fc.record({ replica: replicaId, counter, ttlMs: fc.constant(0n) });
const contextMsg: fc.Arbitrary<CausalContextMsg> = fc.record({
  vv: fc.array(fc.record({ replica: replicaId, counter }), { maxLength: 3 }),
  cloud: fc.array(
    fc.record({ replica: replicaId, ranges: fc.array(fc.record({ first: counter, last: counter }), { maxLength: 3 }) }),
    { maxLength: 3 },
  ),
});
const awsetMsg = fc
  .record({
    entries: fc.array(
      fc.record({
        element: fc.uint8Array({ maxLength: 2, max: 3 }).map((b) => Buffer.from(b)),
        dots: fc.array(dotMsg, { maxLength: 3 }),
      }),
      { maxLength: 4 },
    ),
    context: fc.option(contextMsg, { nil: undefined }),
    // Half the messages get sorted, de-duplicated entries and a context covering 1..6: mostly
    // valid, so that acceptance of non-trivial states is exercised too.
    tidy: fc.boolean(),
  })
  .map(({ entries, context, tidy }) => {
    if (!tidy) return { entries, context };
    const byElement = new Map<string, (typeof entries)[number]>();
    for (const e of entries) byElement.set(e.element.toString("hex"), e);
    const sorted = [...byElement.values()].sort((x, y) => Buffer.compare(x.element, y.element));
    return { entries: sorted, context: { vv: [{ replica: "a", counter: 6n }, { replica: "b", counter: 6n }], cloud: [] } };
  });
const counterMsg = fc.record({
  entries: fc.array(
    fc.record({
      dot: fc.option(dotMsg, { nil: undefined }),
      positive: fc.bigInt({ min: 0n, max: 9n }),
      negative: fc.bigInt({ min: 0n, max: 9n }),
    }),
    { maxLength: 4 },
  ),
  context: fc.option(contextMsg, { nil: undefined }),
});

/** A valid encoding damaged by one edit: flip a byte, truncate, insert or delete bytes. */
const damage = fc.record({
  kind: fc.constantFrom("flip", "truncate", "insert", "delete"),
  pos: fc.nat(),
  bytes: fc.uint8Array({ minLength: 1, maxLength: 4 }),
});
function applyDamage(b: Uint8Array, d: { kind: string; pos: number; bytes: Uint8Array }): Uint8Array {
  const p = b.length === 0 ? 0 : d.pos % b.length;
  const x = Buffer.from(b);
  switch (d.kind) {
    case "flip":
      if (x.length > 0) x[p] = x[p]! ^ (d.bytes[0]! || 1);
      return x;
    case "truncate":
      return x.subarray(0, p);
    case "insert":
      return Buffer.concat([x.subarray(0, p), d.bytes, x.subarray(p)]);
    default:
      return Buffer.concat([x.subarray(0, p), x.subarray(p + d.bytes.length)]);
  }
}

function hostile<S>(
  L: Lattice<S>,
  universe: fc.Arbitrary<Universe<S>>,
  message: fc.Arbitrary<Uint8Array>,
  problems: (s: S) => string[],
): void {
  describe(`${L.name} decode of hostile input`, () => {
    it("random bytes: DecodeError or a valid state", () =>
      run(fc.property(fc.uint8Array({ maxLength: 256 }), (b) => void decodeSafely(L, b, problems))));

    it("random well-formed messages with arbitrary content: DecodeError or a valid state", () => {
      let accepted = 0;
      run(
        fc.property(message, (b) => {
          if (decodeSafely(L, b, problems)) accepted++;
        }),
      );
      // Both outcomes must actually occur, or the generator tests nothing.
      if (RUNS >= 100) assert.ok(accepted > 0 && accepted < RUNS, `accepted ${accepted} of ${RUNS}`);
    });

    it("damaged valid encodings: DecodeError or a valid state", () =>
      run(
        fc.property(withPicks(universe, 1), damage, ([u, [i]], d) => {
          decodeSafely(L, applyDamage(L.encode(pickFrom(u, i!)), d), problems);
        }),
      ));
  });
}

hostile(
  AWSetLattice,
  awUniverse,
  awsetMsg.map((m) => AWSetState.encode(m).finish()),
  awsetProblems,
);
hostile(
  CounterLattice,
  counterUniverse,
  counterMsg.map((m) => CounterState.encode(m).finish()),
  counterProblems,
);

describe("CausalContext codec", () => {
  const contexts = fc
    .array(
      fc.record({ r: fc.constantFrom("a", "b", "c"), first: fc.integer({ min: 1, max: 40 }), len: fc.nat({ max: 5 }) }),
      { maxLength: 12 },
    )
    .map((xs) => {
      const c = new CausalContext();
      for (const x of xs) c.addRange(x.r, x.first, x.first + x.len);
      return c;
    });

  it("contextFromProto(contextToProto(c)) equals c, also through protobuf bytes", () =>
    run(
      fc.property(contexts, (c) => {
        const msg = contextToProto(c);
        assert.ok(contextFromProto(msg).equals(c));
        const bytes = CausalContextMsg.encode(msg).finish();
        const back = contextFromProto(CausalContextMsg.decode(bytes));
        assert.ok(back.equals(c));
        assert.deepEqual(contextProblems(back), []);
        assert.deepEqual(Buffer.from(CausalContextMsg.encode(contextToProto(back)).finish()), Buffer.from(bytes));
      }),
    ));

  it("contextFromProto of an arbitrary message: DecodeError or a canonical context", () =>
    run(
      fc.property(contextMsg, (m) => {
        let c: CausalContext;
        try {
          c = contextFromProto(m);
        } catch (err) {
          if (err instanceof DecodeError) return;
          throw err;
        }
        assert.deepEqual(contextProblems(c), []);
        assert.ok(contextFromProto(contextToProto(c)).equals(c));
      }),
    ));

  it("round-trips every state's context in the AWSET pool", () =>
    run(
      fc.property(awUniverse, (u) => {
        for (const s of u.pool) assert.ok(contextFromProto(contextToProto(s.ctx)).equals(s.ctx));
      }),
    ));
});

describe("encodedSize", () => {
  // States beyond the universe's one-byte elements: empty and long elements, non-ASCII replica
  // ids, counters whose varints take 1 to 8 bytes.
  const awset = fc
    .uniqueArray(
      fc.record({
        element: fc.uint8Array({ maxLength: 300 }),
        dots: fc.array(
          fc.record({ replica: fc.string({ unit: "grapheme", minLength: 1, maxLength: 20 }), counter: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }) }),
          { minLength: 1, maxLength: 3 },
        ),
      }),
      { selector: (e) => Buffer.from(e.element).toString("latin1"), maxLength: 12 },
    )
    .map((entries) => {
      const ctx = new CausalContext();
      const map = new Map<string, Dot[]>();
      for (const e of entries) {
        map.set(elementKey(e.element), e.dots);
        for (const d of e.dots) ctx.addDot(d);
      }
      return AWSet.fromParts(map, ctx);
    });

  it("a causal context: equals the length of its encoding (version vector and cloud entries), which encodeContext writes", () =>
    run(
      fc.property(
        fc.array(fc.record({ replica: fc.string({ unit: "grapheme", maxLength: 20 }), counter: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }) }), { maxLength: 30 }),
        fc.array(fc.record({ replica: fc.constantFrom("a", "b", "é"), counter: fc.integer({ min: 1, max: 40 }) }), { maxLength: 60 }),
        (wide, dense) => {
          const ctx = new CausalContext();
          for (const d of [...wide, ...dense]) ctx.addDot(d);
          assert.equal(contextEncodedSize(ctx), CausalContextMsg.encode(contextToProto(ctx)).finish().length);
          // The direct encoder (stored headers) writes the generated codec's bytes exactly.
          assert.deepEqual(encodeContext(ctx), Buffer.from(CausalContextMsg.encode(contextToProto(ctx)).finish()));
        },
      ),
    ));

  it("AWSET: equals the length of the encoding", () =>
    run(fc.property(awset, (s) => assert.equal(AWSetLattice.encodedSize(s), AWSetLattice.encode(s).length))));

  it("every state of the universes: equals the length of the encoding", () => {
    run(fc.property(awUniverse, (u) => u.pool.every((s) => AWSetLattice.encodedSize(s) === AWSetLattice.encode(s).length)));
    run(fc.property(counterUniverse, (u) => u.pool.every((s) => CounterLattice.encodedSize(s) === CounterLattice.encode(s).length)));
  });
});
