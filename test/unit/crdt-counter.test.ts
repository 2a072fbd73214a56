// PN-counter scenarios: increments and decrements across replicas, with deltas duplicated,
// reordered and partly lost.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { CounterLattice as L, PNCounter } from "../../services/crdt/index.js";

class Replica {
  state = PNCounter.bottom();
  constructor(readonly id: string) {}
  inc(n: number): PNCounter {
    const d = this.state.incrementDelta(this.id, BigInt(n));
    this.state = L.join(this.state, d);
    return d;
  }
  receive(d: PNCounter): boolean {
    return L.joinInPlace(this.state, d);
  }
}

describe("COUNTER scenarios", () => {
  it("three replicas converge to the sum of all increments and decrements, whatever the delivery", () => {
    const rs = ["a", "b", "c"].map((id) => new Replica(id));
    const deltas: Array<{ from: number; d: PNCounter }> = [];
    const amounts = [5, -2, 7, 1, -10, 3, 4, -1, 2];
    amounts.forEach((n, k) => deltas.push({ from: k % 3, d: rs[k % 3]!.inc(n) }));
    // Each replica gets every other replica's deltas reversed, and each one twice.
    for (const [to, r] of rs.entries()) {
      const incoming = deltas.filter((x) => x.from !== to).reverse();
      for (const { d } of [...incoming, ...incoming]) r.receive(d);
    }
    const total = BigInt(amounts.reduce((s, n) => s + n, 0));
    for (const r of rs) assert.equal(r.state.value(), total);
    assert.ok(L.equals(rs[0]!.state, rs[1]!.state) && L.equals(rs[1]!.state, rs[2]!.state));
  });

  it("a receiver missing an intermediate delta counts the latest one once, not twice", () => {
    const a = new Replica("a");
    const d1 = a.inc(10);
    a.inc(5); // delta 2 is lost
    const d3 = a.inc(1);
    const b = new Replica("b");
    b.receive(d1);
    b.receive(d3);
    assert.equal(b.state.value(), 16n, "delta 3 carries a's totals and supersedes delta 1");
    assert.equal(b.state.entries.size, 1);
    const c = new Replica("c");
    c.receive(d3);
    assert.equal(c.receive(d1), false, "an older delta arriving late changes nothing");
    assert.equal(c.state.value(), 16n);
  });

  it("an increment delta's context is the single range 1..n of its replica", () => {
    const a = new Replica("a");
    for (let k = 0; k < 50; k++) a.inc(1);
    const d = a.inc(1);
    assert.deepEqual(d.ctx.replicas(), ["a"]);
    assert.deepEqual(d.ctx.rangesOf("a"), [[1, 51]]);
    // Δ(d, b) for a receiver holding an older entry: the new entry plus the removal of b's entry.
    const b = new Replica("b");
    b.receive(a.state);
    a.inc(1);
    const d2 = a.inc(2);
    const diff = L.difference(d2, b.state);
    assert.deepEqual([...diff.entries.values()].map((e) => e.dot), [{ replica: "a", counter: 53 }]);
    assert.ok(diff.ctx.contains("a", 51), "b's entry a:51 is superseded");
    assert.ok(!diff.ctx.contains("a", 50), "dots b already knows are left out");
    assert.ok(L.equals(L.join(b.state, diff), L.join(b.state, d2)));
  });

  it("decrements below zero give negative values; totals stay non-negative", () => {
    const a = new Replica("a");
    a.inc(2);
    a.inc(-5);
    assert.equal(a.state.value(), -3n);
    const e = a.state.entryOf("a")!;
    assert.deepEqual(e.value, { positive: 2n, negative: 5n });
  });

  it("a duplicate delta is reported as no change", () => {
    const a = new Replica("a");
    const d = a.inc(3);
    const b = new Replica("b");
    assert.equal(b.receive(d), true);
    assert.equal(b.receive(d), false);
    assert.equal(b.state.value(), 3n);
  });

  it("the encoding round-trips the value", () => {
    const a = new Replica("a");
    const b = new Replica("b");
    a.inc(2 ** 40);
    b.inc(-7);
    a.receive(b.state);
    const back = L.decode(L.encode(a.state));
    assert.equal(back.value(), 2n ** 40n - 7n);
    assert.ok(L.equals(back, a.state));
  });
});
