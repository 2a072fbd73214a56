// What a store hands out, and what it is handed, must not change afterwards. A node buffers the
// delta of each operation and the new part of each join for gossip, and a received delta may be
// joined into the store's cached state: if a later operation changed one of those objects in place,
// a buffered delta could carry ids or context it did not have, and a context covering a dot
// without its entry makes every receiver drop that dot's increment or add for good. Three in-memory
// stores, random operations (counters: increments with and without request ids, retries included,
// at moving times; sets: adds of new and present elements, removes), deltas and whole states
// merged between them in any order; every delta, new part and merged input is encoded when it
// appears and compared with its encoding at the end, and the stores must hold the deltas' join.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { type AWSet, AWSetLattice, CounterLattice, type PNCounter, ObjectType, retryFilterParams } from "../../services/crdt/index.ts";
import { partitionOf } from "../../services/gossip/index.ts";
import { Store } from "../../services/store/store.ts";

const P = 1000;
const params = retryFilterParams({ idsPerPeriod: 8, falsePositiveRate: 0.05, periodMs: P, pastEpochs: 2 });

type Op =
  | { kind: "inc"; on: number; amount: number; id: number | null; dt: number }
  | { kind: "delta"; from: number; to: number; pick: number }
  | { kind: "state"; from: number; to: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("inc" as const), on: fc.nat(2), amount: fc.integer({ min: -3, max: 5 }).filter((n) => n !== 0), id: fc.option(fc.nat(6)), dt: fc.nat(300) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("delta" as const), from: fc.nat(2), to: fc.nat(2), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("state" as const), from: fc.nat(2), to: fc.nat(2) }) },
);

let opened = 0;

describe("a store never changes a counter delta after handing it out, nor what it was handed", () => {
  it("increments, retries and merges in any order", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 40 }), async (ops) => {
        let now = 10_000;
        const stores = await Promise.all([0, 1, 2].map(() => Store.open({ dir: "memory", nodeId: `c${opened++}`, partitions: 1, partitionOf, sync: "buffered", clock: () => now })));
        /** Every object handed out or in, with its encoding then. */
        const seen: Array<{ what: string; state: PNCounter; bytes: Buffer }> = [];
        const note = (what: string, state: PNCounter | undefined) => {
          if (state !== undefined) seen.push({ what, state, bytes: Buffer.from(CounterLattice.encode(state)) });
        };
        /** Deltas each store made, for the others to receive. */
        const made: PNCounter[][] = [[], [], []];
        try {
          for (const [i, op] of ops.entries()) {
            if (op.kind === "inc") {
              now += op.dt;
              const s = stores[op.on]!;
              const r =
                op.id === null
                  ? await s.increment("k", BigInt(op.amount))
                  : await s.incrementOnce("k", BigInt(op.amount), { id: `id-${op.id}`, now, params, explicit: false });
              if (r.delta !== undefined) {
                note(`op ${i}: delta of an increment`, r.delta);
                made[op.on]!.push(r.delta);
              }
            } else if (op.from !== op.to) {
              let incoming: PNCounter | undefined;
              if (op.kind === "delta") incoming = made[op.from]![op.pick % Math.max(1, made[op.from]!.length)];
              else incoming = await stores[op.from]!.counter("k");
              if (incoming === undefined) continue;
              // A whole state read from a store is that store's own: merge a copy, as the wire would.
              if (op.kind === "state") incoming = CounterLattice.decode(CounterLattice.encode(incoming));
              note(`op ${i}: merged ${op.kind}`, incoming);
              const r = await stores[op.to]!.merge("k", ObjectType.COUNTER, incoming);
              note(`op ${i}: new part of a merge`, r.newPart as PNCounter);
              made[op.to]!.push(r.newPart as PNCounter);
            }
          }
          for (const x of seen) assert.ok(Buffer.from(CounterLattice.encode(x.state)).equals(x.bytes), `${x.what} changed after it was handed over`);
          // Deliver everything everywhere: the stores agree, and on the value of the deltas joined.
          for (const to of [0, 1, 2]) for (const from of [0, 1, 2]) for (const d of made[from]!) if (to !== from) await stores[to]!.merge("k", ObjectType.COUNTER, CounterLattice.decode(CounterLattice.encode(d)));
          const finals = await Promise.all(stores.map((s) => s.counter("k")));
          const values = finals.map((c) => c?.value() ?? 0n);
          assert.ok(values.every((v) => v === values[0]), `stores disagree: ${values.join(", ")}`);
          let joined = CounterLattice.bottom();
          for (const list of made) for (const d of list) joined = CounterLattice.join(joined, d);
          assert.equal(values[0], joined.value(), "the stores hold exactly what their deltas carried");
        } finally {
          for (const s of stores) await s.close();
        }
      }),
      { numRuns: Number(process.env.FC_RUNS ?? 60), ...(process.env.FC_SEED ? { seed: Number(process.env.FC_SEED), path: process.env.FC_PATH } : {}) },
    );
  });
});

type SetOp =
  | { kind: "add"; on: number; els: number[] }
  | { kind: "remove"; on: number; els: number[] }
  | { kind: "delta"; from: number; to: number; pick: number }
  | { kind: "state"; from: number; to: number };

const els = fc.array(fc.nat(7), { minLength: 1, maxLength: 4 });
const setOpArb: fc.Arbitrary<SetOp> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("add" as const), on: fc.nat(2), els }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("remove" as const), on: fc.nat(2), els }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("delta" as const), from: fc.nat(2), to: fc.nat(2), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("state" as const), from: fc.nat(2), to: fc.nat(2) }) },
);
const el = (n: number) => Buffer.from([n]);
const copy = (s: AWSet) => AWSetLattice.decode(AWSetLattice.encode(s));

describe("a store never changes an add-wins set delta after handing it out, nor what it was handed", () => {
  it("adds of new and present elements, removes and merges in any order", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(setOpArb, { minLength: 1, maxLength: 30 }), async (ops) => {
        const stores = await Promise.all([0, 1, 2].map(() => Store.open({ dir: "memory", nodeId: `s${opened++}`, partitions: 1, partitionOf, sync: "buffered" })));
        const seen: Array<{ what: string; state: AWSet; bytes: Buffer }> = [];
        const note = (what: string, state: AWSet) => seen.push({ what, state, bytes: Buffer.from(AWSetLattice.encode(state)) });
        const made: AWSet[][] = [[], [], []];
        try {
          for (const [i, op] of ops.entries()) {
            if (op.kind === "add" || op.kind === "remove") {
              const s = stores[op.on]!;
              const r = op.kind === "add" ? await s.add("k", op.els.map(el)) : await s.remove("k", op.els.map(el));
              note(`op ${i}: delta of an ${op.kind}`, r.delta);
              made[op.on]!.push(r.delta);
            } else if (op.from !== op.to) {
              let incoming: AWSet | undefined;
              if (op.kind === "delta") incoming = made[op.from]![op.pick % Math.max(1, made[op.from]!.length)];
              else incoming = (await stores[op.from]!.readState("k"))?.state as AWSet | undefined;
              if (incoming === undefined) continue;
              if (op.kind === "state") incoming = copy(incoming);
              note(`op ${i}: merged ${op.kind}`, incoming);
              const r = await stores[op.to]!.merge("k", ObjectType.AWSET, incoming);
              note(`op ${i}: new part of a merge`, r.newPart as AWSet);
              made[op.to]!.push(r.newPart as AWSet);
            }
          }
          for (const x of seen) assert.ok(Buffer.from(AWSetLattice.encode(x.state)).equals(x.bytes), `${x.what} changed after it was handed over`);
          for (const to of [0, 1, 2]) for (const from of [0, 1, 2]) for (const d of made[from]!) if (to !== from) await stores[to]!.merge("k", ObjectType.AWSET, copy(d));
          let joined = AWSetLattice.bottom();
          for (const list of made) for (const d of list) joined = AWSetLattice.join(joined, d);
          for (const s of stores) {
            const got = ((await s.readState("k"))?.state as AWSet | undefined) ?? AWSetLattice.bottom();
            assert.ok(AWSetLattice.equals(got, joined), "every store holds exactly the join of the deltas");
          }
        } finally {
          for (const s of stores) await s.close();
        }
      }),
      { numRuns: Number(process.env.FC_RUNS ?? 60), ...(process.env.FC_SEED ? { seed: Number(process.env.FC_SEED), path: process.env.FC_PATH } : {}) },
    );
  });
});
