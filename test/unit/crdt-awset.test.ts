// Concrete add-wins set scenarios: the cases the semantics is about, spelled out step by step.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { AWSet, AWSetLattice, CausalContext } from "../../services/crdt/index.js";

const x = Buffer.from("x");
const y = Buffer.from("y");

/** A replica: its id and state; op() applies a delta locally and returns it for shipping. */
class Replica {
  state = AWSet.bottom();
  constructor(readonly id: string) {}
  add(...els: Uint8Array[]): AWSet {
    return this.apply(this.state.addDelta(this.id, els));
  }
  remove(els: Uint8Array[], observed?: CausalContext): AWSet {
    return this.apply(this.state.removeDelta(els, observed));
  }
  apply(delta: AWSet): AWSet {
    this.state.joinInPlace(delta);
    return delta;
  }
  receive(d: AWSet): boolean {
    return this.state.joinInPlace(d);
  }
  has(el: Uint8Array): boolean {
    return this.state.has(el);
  }
}

describe("AWSET scenarios", () => {
  it("a concurrent add and remove of the same element keeps it (add wins)", () => {
    const a = new Replica("a");
    const b = new Replica("b");
    b.receive(a.add(x));
    const rm = a.remove([x]); // a removes the x it observed
    const add = b.add(x); // b concurrently adds x again
    a.receive(add);
    b.receive(rm);
    assert.ok(a.has(x) && b.has(x));
    assert.deepEqual(a.state.dotsOf(x), [{ replica: "b", counter: 1 }], "only the unobserved add survives");
    assert.ok(AWSetLattice.equals(a.state, b.state));
  });

  it("a remove after observing the add removes it everywhere", () => {
    const a = new Replica("a");
    const b = new Replica("b");
    const c = new Replica("c");
    const add = a.add(x);
    b.receive(add);
    const rm = b.remove([x]);
    a.receive(rm);
    c.receive(rm); // c gets the remove before the add it cancels
    c.receive(add);
    for (const r of [a, b, c]) assert.ok(!r.has(x), `${r.id} still has x`);
    assert.ok(c.state.ctx.contains("a", 1), "the removed dot stays known in the context");
    assert.equal(c.state.dotCount(), 0);
  });

  it("re-adding after a remove makes the element present again with a new dot", () => {
    const a = new Replica("a");
    a.add(x);
    a.remove([x]);
    assert.ok(!a.has(x));
    a.add(x);
    assert.ok(a.has(x));
    assert.deepEqual(a.state.dotsOf(x), [{ replica: "a", counter: 2 }]);
    const b = new Replica("b");
    b.receive(a.state);
    assert.ok(b.has(x));
  });

  it("a remove carrying an old context does not remove a newer add", () => {
    const a = new Replica("a");
    const b = new Replica("b");
    a.add(x);
    const readAtA = a.state.ctx.clone(); // a client reads x at a and keeps this context
    a.receive(b.add(x)); // a newer, concurrent add of x from b arrives
    a.add(y);
    a.remove([x, y], readAtA); // the client's remove saw neither b's add of x nor y
    assert.ok(a.has(x), "b's add was not observed by the client");
    assert.ok(a.has(y), "y was added after the read");
    assert.deepEqual(a.state.dotsOf(x), [{ replica: "b", counter: 1 }]);
    // The same remove without a client context removes everything a holds.
    a.remove([x, y]);
    assert.ok(!a.has(x) && !a.has(y));
  });

  it("an add supersedes the element's older dots at the source", () => {
    const a = new Replica("a");
    const b = new Replica("b");
    const first = a.add(x);
    const second = a.add(x);
    assert.deepEqual(a.state.dotsOf(x), [{ replica: "a", counter: 2 }]);
    b.receive(second);
    assert.equal(b.receive(first), false, "the older add is already covered");
    assert.deepEqual(b.state.dotsOf(x), [{ replica: "a", counter: 2 }]);
  });

  it("duplicated and reordered deltas give the same state as in-order delivery", () => {
    const a = new Replica("a");
    const deltas = [a.add(x), a.add(y), a.remove([x]), a.add(x), a.remove([y])];
    const b = new Replica("b");
    for (const d of [deltas[4]!, deltas[2]!, deltas[0]!, deltas[4]!, deltas[3]!, deltas[1]!, deltas[0]!]) b.receive(d);
    assert.ok(AWSetLattice.equals(a.state, b.state));
    assert.deepEqual(b.state.elements(), [x]);
    assert.equal(b.receive(deltas[3]!), false, "a duplicate changes nothing");
  });

  it("a remove of an element the replica does not hold is an empty delta", () => {
    const a = new Replica("a");
    const d = a.remove([x]);
    assert.ok(d.isBottom());
    assert.equal(new Replica("b").receive(d), false);
  });

  it("clear removes what was observed, and a concurrent add survives it", () => {
    const a = new Replica("a");
    const b = new Replica("b");
    b.receive(a.add(x, y));
    const clear = a.apply(a.state.clearDelta());
    const add = b.add(Buffer.from("z"));
    a.receive(add);
    b.receive(clear);
    assert.deepEqual(a.state.elements().map(String), ["z"]);
    assert.ok(AWSetLattice.equals(a.state, b.state));
  });

  it("elements are byte strings, listed in unsigned byte order", () => {
    const a = new Replica("a");
    const els = [Buffer.from([0xff]), Buffer.from([0x00, 0x00]), Buffer.from([0x00]), Buffer.from([0x7f, 0x01]), Buffer.from("é")];
    a.add(...els);
    const expected = els.slice().sort(Buffer.compare);
    assert.deepEqual(a.state.elements(), expected);
    assert.ok(a.has(Buffer.from([0x00])));
    const back = AWSetLattice.decode(AWSetLattice.encode(a.state));
    assert.deepEqual(back.elements(), expected);
  });

  it("joining a small delta into a large set touches only the delta's dots", () => {
    const a = new Replica("a");
    const many = Array.from({ length: 2000 }, (_, k) => Buffer.from(`e${k}`));
    a.add(...many);
    const b = new Replica("b");
    b.receive(a.state);
    const rm = b.remove([many[7]!]);
    assert.equal(rm.ctx.dotCount(), 1);
    assert.ok(a.receive(rm));
    assert.equal(a.state.size, 1999);
    assert.ok(!a.has(many[7]!));
  });

  it("a remove with a client context only removes dots the context covers", () => {
    const a = new Replica("a");
    a.add(x);
    a.add(y);
    const ctx = CausalContext.of([{ replica: "a", counter: 2 }]); // saw y's add only
    a.remove([x, y], ctx);
    assert.ok(a.has(x));
    assert.ok(!a.has(y));
  });
});
