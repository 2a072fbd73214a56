// Unit tests of the filters reproduction's workload logic (test/bench/filters-workload.ts): the
// premise that shipping joined add-deltas gives the same state (in the lattice's equality) as a
// full-state join, ORCF's pending-delta union, interval scaling, and small runs of both workloads.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CausalContext } from "../../services/crdt/causal-context.ts";
import { makeDot } from "../../services/crdt/dot.ts";
import { seededRandom } from "../../services/crdt/filter-common.ts";
import { Gbf, GbfLattice } from "../../services/crdt/gbf.ts";
import { Gcf, GcfLattice } from "../../services/crdt/gcf.ts";
import { Orcf, OrcfLattice } from "../../services/crdt/orcf.ts";
import type { Lattice } from "../../services/crdt/lattice.ts";
import { cuckooFor, gbfFor, makePair, randomKeys, runFprCell, runInterval, runMemCell } from "../bench/filters-workload.ts";

/** Two replicas add in turns; every `every` adds, compare delta-merge against full-state join. */
function checkDeltaEqualsState<S>(L: Lattice<S>, fresh: () => S, add: (s: S, r: number, k: Uint8Array) => S, n: number, every: number): void {
  const keys = randomKeys(n, seededRandom(3));
  const random = seededRandom(4);
  const s: [S, S] = [fresh(), fresh()];
  let pending: [S, S] = [fresh(), fresh()];
  for (let i = 0; i < n; i++) {
    const r = random() < 0.7 ? 0 : 1;
    const d = add(s[r]!, r, keys[i]!);
    L.joinInPlace(pending[r]!, d);
    if ((i + 1) % every === 0) {
      const full0 = L.join(s[0], s[1]);
      const full1 = L.join(s[1], s[0]);
      L.joinInPlace(s[0], pending[1]);
      L.joinInPlace(s[1], pending[0]);
      pending = [fresh(), fresh()];
      assert.ok(L.equals(s[0], full0), `replica 0 after merge ${i + 1} differs from the full-state join`);
      assert.ok(L.equals(s[1], full1), `replica 1 after merge ${i + 1} differs from the full-state join`);
      assert.ok(L.equals(s[0], s[1]), "replicas did not converge");
    }
  }
}

describe("filters bench workload", () => {
  const n = 2048;
  it("GBF: joined add-deltas equal the full-state join", () => {
    const p = gbfFor(n);
    checkDeltaEqualsState(GbfLattice, () => Gbf.empty(p), (s, _r, k) => s.addInPlace(k), n, 97);
  });

  it("GCF: joined add-deltas equal the full-state join (by universe), also past full", () => {
    const p = cuckooFor(n / 2); // overfilled: merges overflow buckets and adds fail
    const random = seededRandom(5);
    checkDeltaEqualsState(
      GcfLattice,
      () => Gcf.empty(p),
      (s, _r, k) => {
        try {
          return s.addInPlace(k, random);
        } catch {
          return Gcf.empty(p);
        }
      },
      n,
      61,
    );
  });

  it("ORCF: joined add-deltas equal the full-state join, and their join is the union of entries and tags", () => {
    const p = cuckooFor(n);
    const random = seededRandom(6);
    // Filled past capacity too: adds that find the filter full leave it unchanged (empty delta).
    checkDeltaEqualsState(
      OrcfLattice,
      () => Orcf.empty(p),
      (s, r, k) => {
        try {
          return s.addInPlace(k, r === 0 ? "a" : "b", random);
        } catch {
          return Orcf.empty(p);
        }
      },
      n,
      113,
    );
    const o = Orcf.empty(p);
    const deltas = randomKeys(200, seededRandom(7)).map((k) => o.addInPlace(k, "a", random));
    const joined = deltas.reduce((acc, d) => OrcfLattice.join(acc, d), Orcf.empty(p));
    const entries = deltas.flatMap((d) => d.entries());
    const union = Orcf.fromParts(p, entries, CausalContext.of(entries.map((e) => makeDot(e.replica, e.t))));
    assert.ok(OrcfLattice.equals(joined, union));
    assert.ok(OrcfLattice.equals(o, union));
  });

  it("a merge of shipped deltas leaves the layout a full-state join leaves (entries where the sender holds them now)", () => {
    for (const [config, L] of [
      ["GCF_4", GcfLattice as Lattice<unknown>],
      ["ORCF_4", OrcfLattice as Lattice<unknown>],
    ] as const) {
      const n = 1024;
      const pair = makePair(config, n, seededRandom(11));
      const keys = randomKeys(n, seededRandom(12));
      const pick = seededRandom(13);
      let merges = 0;
      for (let i = 0; i < n; i++) {
        pair.add(pick() < 0.5 ? 0 : 1, keys[i]!);
        if ((i + 1) % 37 !== 0) continue;
        // The full-state joins of the two states as they are, layout included (the encoding lists
        // each bucket's entries, so equal encodings mean equal layouts).
        const [a, b] = [L.decode(pair.encoded(0)), L.decode(pair.encoded(1))];
        const want0 = L.encode(L.join(a, b));
        const want1 = L.encode(L.join(b, a));
        pair.merge();
        merges++;
        assert.deepEqual(Buffer.from(pair.encoded(0)), Buffer.from(want0), `${config}: replica 0's layout after merge ${merges}`);
        assert.deepEqual(Buffer.from(pair.encoded(1)), Buffer.from(want1), `${config}: replica 1's layout after merge ${merges}`);
      }
      assert.ok(merges > 20);
    }
  });

  it("scales the seed's merge intervals to the run's n", () => {
    assert.equal(runInterval(1e3, 2 ** 20), 1000);
    assert.equal(runInterval(1e3, 2 ** 14), 16);
    assert.equal(runInterval(1e7, 2 ** 14), 156250);
    assert.equal(runInterval(1e3, 2 ** 9), 1);
  });

  it("an FPR run merges as configured, converges, and has no false negatives", () => {
    for (const config of ["GBF_5", "GCF_4", "ORCF_4", "ScGBF_5", "ScGCF_4", "ScORCF_4"] as const) {
      const r = runFprCell({ config, n: 1024, split: 0.5, interval: 100, probes: 4096, seed: 9 });
      assert.equal(r.merges, 11, config);
      assert.equal(r.falseNegatives, 0, config);
      assert.ok(r.fpr > 0.005 && r.fpr < 0.08, `${config} fpr ${r.fpr}`);
      const local = runFprCell({ config, n: 1024, split: 1, interval: 0, probes: 1024, seed: 9 });
      assert.equal(local.merges, 0, config);
    }
    const pair = makePair("GCF_4", 512, seededRandom(1));
    for (const k of randomKeys(300, seededRandom(2))) pair.add(0, k);
    pair.merge();
    assert.ok(pair.converged());
  });

  it("a memory run stores what its workload leaves", () => {
    const g = runMemCell({ type: "GBF_5", table: "6.1", n: 4096, addShare: 1, split: true, seed: 1 });
    assert.equal(g.stored, 4096);
    const o = runMemCell({ type: "ORCF_4", table: "6.2", n: 4096, addShare: 0.8, split: false, seed: 1 });
    assert.ok(Math.abs(o.load - 0.6) < 0.05, `ORCF load ${o.load}`);
    const a = runMemCell({ type: "AWSET", table: "6.2", n: 4096, addShare: 0.8, split: true, seed: 1 });
    assert.ok(Math.abs(a.load - 0.6) < 0.05, `AWSET load ${a.load}`);
    assert.ok(a.gzip < a.raw && o.gzip < o.raw);
  });
});
