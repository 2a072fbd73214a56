// The codec of a filter key with siblings (crdt/filter-siblings.ts): one filter encodes exactly as
// the filter alone (so keys written before siblings existed read the same), several as a list in
// one canonical order, and anything else (a list of one, out of order, a repeated or empty
// sibling, more than MAX_SIBLINGS, another type's list) is refused.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import {
  type ClientOperations,
  DEFAULT_RETRY_FILTER,
  DecodeError,
  FilterSiblings,
  Gbf,
  GbfKeyLattice,
  GbfLattice,
  HASH_FAMILY,
  MAX_SIBLINGS,
  type Orcf,
  OrcfKeyLattice,
  RetryFilterConflictError,
  RetryFilterLattice,
  TooManySiblingsError,
  gbfParams,
  operationsFor,
  retryFilterParams,
  seededRandom,
} from "../../services/crdt/index.ts";
import { ByteWriter, FilterKind, writeHeader } from "../../services/crdt/filter-common.ts";
import { ObjectType } from "../../services/gen/deltaset/v1/types.ts";

const gbf = (bits: number, el: string) => {
  const g = Gbf.empty(gbfParams(bits, 3));
  g.addInPlace(Buffer.from(el));
  return g;
};

/** A siblings list of these encodings, in the given order, as the codec writes one. */
function list(type: number, parts: Uint8Array[]): Uint8Array {
  const w = new ByteWriter();
  writeHeader(w, FilterKind.SIBLINGS, HASH_FAMILY, true);
  w.varint(type).varint(parts.length);
  for (const p of parts) w.varint(p.length).bytes(p);
  return w.finish();
}

describe("filter siblings codec", () => {
  it("a key of one filter encodes as that filter; several as a list, the largest first", () => {
    const one = new FilterSiblings([gbf(64, "a")]);
    assert.deepEqual(Buffer.from(GbfKeyLattice.encode(one)), Buffer.from(GbfLattice.encode(one.filters[0]!)));
    const two = GbfKeyLattice.join(one, new FilterSiblings([gbf(128, "b")]));
    assert.deepEqual(two.filters.map((f) => f.params!.bits), [128, 64]);
    const bytes = GbfKeyLattice.encode(two);
    assert.equal(bytes[1], FilterKind.SIBLINGS);
    assert.ok(GbfKeyLattice.equals(GbfKeyLattice.decode(bytes), two));
  });

  it("refuses lists that are not canonical or not of its type", () => {
    const [a, b] = [GbfLattice.encode(gbf(128, "a")), GbfLattice.encode(gbf(64, "b"))];
    assert.ok(GbfKeyLattice.decode(list(ObjectType.GBF, [a, b])).filters.length === 2);
    const bad: Array<[string, Uint8Array, RegExp]> = [
      ["a list of one", list(ObjectType.GBF, [a]), /a list of 1/],
      ["out of order", list(ObjectType.GBF, [b, a]), /not in their order/],
      ["the same parameters twice", list(ObjectType.GBF, [a, GbfLattice.encode(gbf(128, "c"))]), /not in their order, or two with the same parameters/],
      ["an empty sibling", list(ObjectType.GBF, [a, GbfLattice.encode(Gbf.empty(gbfParams(64, 3)))]), /sibling 1 is empty/],
      ["another type's list", list(ObjectType.ORCF, [a, b]), /the list is of type/],
      ["too many", list(ObjectType.GBF, Array.from({ length: MAX_SIBLINGS + 1 }, (_, i) => GbfLattice.encode(gbf(512 - 64 * i, `e${i}`)))), /sibling count/],
    ];
    for (const [what, bytes, text] of bad) assert.throws(() => GbfKeyLattice.decode(bytes), (e: Error) => e instanceof DecodeError && text.test(e.message), what);
    assert.throws(() => OrcfKeyLattice.decode(list(ObjectType.GBF, [a, b])), DecodeError);
  });

  it("a join past MAX_SIBLINGS is refused and changes nothing", () => {
    const full = new FilterSiblings(Array.from({ length: MAX_SIBLINGS }, (_, i) => gbf(512 - 64 * i, `e${i}`)));
    const before = GbfKeyLattice.encode(full);
    assert.throws(() => GbfKeyLattice.joinInPlace(full, new FilterSiblings([gbf(8, "x")])), TooManySiblingsError);
    assert.deepEqual(Buffer.from(GbfKeyLattice.encode(full)), Buffer.from(before));
    // A sibling it already holds still joins.
    assert.equal(GbfKeyLattice.joinInPlace(full, new FilterSiblings([gbf(512, "more")])), true);
  });
});

describe("a filter key's request ids (addOnce)", () => {
  const ops = operationsFor(ObjectType.ORCF)! as ClientOperations<FilterSiblings<Orcf>>;
  const env = { replica: "r", random: seededRandom(1), randomId: () => 1n };
  const params = retryFilterParams(DEFAULT_RETRY_FILTER);
  const x = Buffer.from("x");
  const fresh = () => ops.create({ capacity: 100 });

  it("a retry adds no second copy, so one Remove takes the element", () => {
    const s = fresh();
    const first = ops.addOnce!(s, [x], env, { id: "c1:1", now: 1_000_000, params, explicit: false });
    assert.equal(first.duplicate, false);
    const retry = ops.addOnce!(s, [x], env, { id: "c1:1", now: 1_000_500, params, explicit: false });
    assert.deepEqual(retry, { duplicate: true });
    ops.remove!(s, [x], env);
    assert.deepEqual(ops.contains(s, [x]), [false]);
    // Without ids the same two Adds store two copies, and the Remove leaves one.
    const plain = fresh();
    ops.add(plain, [x], env);
    ops.add(plain, [x], env);
    ops.remove!(plain, [x], env);
    assert.deepEqual(ops.contains(plain, [x]), [true]);
  });

  it("the id travels in the add's delta: a replica that joined it takes the retry as one", () => {
    const a = fresh();
    const d = ops.addOnce!(a, [x], env, { id: "c1:2", now: 1_000_000, params, explicit: false }).delta!;
    const b = fresh();
    OrcfKeyLattice.joinInPlace(b, d);
    assert.deepEqual(ops.addOnce!(b, [x], { ...env, replica: "q" }, { id: "c1:2", now: 1_001_000, params, explicit: false }), { duplicate: true });
    assert.ok(OrcfKeyLattice.equals(OrcfKeyLattice.decode(OrcfKeyLattice.encode(a)), a), "codec round trip with a retry filter");
    assert.equal(OrcfKeyLattice.encode(a)[1], FilterKind.WITH_RETRY);
  });

  it("other retry-filter parameters named by the client are refused; unnamed, the key's are used", () => {
    const s = fresh();
    ops.addOnce!(s, [x], env, { id: "a", now: 1_000_000, params, explicit: false });
    const other = retryFilterParams({ ...DEFAULT_RETRY_FILTER, periodMs: 30_000 });
    assert.throws(() => ops.addOnce!(s, [x], env, { id: "b", now: 1_000_000, params: other, explicit: true }), RetryFilterConflictError);
    assert.equal(ops.addOnce!(s, [Buffer.from("y")], env, { id: "b", now: 1_000_000, params: other, explicit: false }).duplicate, false);
  });

  it("a key never added to with an id encodes as before; an empty retry filter behind the header is refused", () => {
    const s = fresh();
    ops.add(s, [x], env);
    assert.notEqual(OrcfKeyLattice.encode(s)[1], FilterKind.WITH_RETRY);
    const w = new ByteWriter();
    writeHeader(w, FilterKind.WITH_RETRY, HASH_FAMILY, true);
    const filters = OrcfKeyLattice.encode(s);
    const empty = RetryFilterLattice.encode(RetryFilterLattice.bottom());
    w.varint(ObjectType.ORCF).varint(filters.length).bytes(filters).varint(empty.length).bytes(empty);
    assert.throws(() => OrcfKeyLattice.decode(w.finish()), DecodeError);
  });
});
