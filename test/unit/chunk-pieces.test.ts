// A state stored whole that is larger than a message is cut into pieces and gathered back
// (common/chunk-pieces.ts): any payload round-trips through any piece size; pieces of one key may
// not be interleaved with another's; a gathered state past the bound is refused, or skipped whole;
// pieces missing, repeated, reordered or altered are refused by their offsets and the digest of
// the whole, and pieces without either (an older sender) are still gathered in the order they come.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { PieceError, PieceGatherer, type PieceShape, PiecesTooLargeError, cutIntoPieces, sha256 } from "../../services/common/chunk-pieces.ts";

interface Chunk {
  key: string;
  continued: boolean;
  payload: Uint8Array;
  head?: string;
  offset?: number;
  digest?: Uint8Array;
}
const shape: PieceShape<Chunk> = {
  key: (c) => c.key,
  continued: (c) => c.continued,
  payload: (c) => c.payload,
  offset: (c) => c.offset,
  digest: (c) => c.digest,
  whole: (first, _last, payload) => ({ ...first, continued: false, payload, offset: undefined, digest: undefined }),
};
const piecesOf = (key: string, payload: Uint8Array, max: number): Chunk[] =>
  cutIntoPieces(Buffer.from(payload), max).map((p, i, all) => ({
    key,
    continued: i < all.length - 1,
    payload: p.payload,
    head: i === 0 ? "first" : undefined,
    offset: p.offset,
    digest: p.digest,
  }));
/** The chunks as a sender before offsets and digests cut them. */
const unmarked = (chunks: Chunk[]): Chunk[] => chunks.map((c) => ({ ...c, offset: undefined, digest: undefined }));

/** Feed chunks in turn; the gathered chunk, or the error that refused them. */
function gather(chunks: Chunk[], max = 1 << 20): Chunk | PieceError {
  const g = new PieceGatherer(shape, max);
  try {
    let out: Chunk | undefined;
    for (const c of chunks) out = g.take(c);
    return out ?? new PieceError("no chunk");
  } catch (err) {
    if (err instanceof PieceError) return err;
    throw err;
  }
}

/** Distinct payload bytes, so that pieces moved around make another payload. */
const counting = (n: number) => Uint8Array.from({ length: n }, (_, i) => i % 251);

describe("state pieces", () => {
  it("any payload cut at any size gathers back to itself, with the first piece's fields", () =>
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.integer({ min: 1, max: 40 }), fc.boolean(), (payload, max, old) => {
        const marked = piecesOf("k", payload, max);
        const pieces = old ? unmarked(marked) : marked;
        assert.ok(pieces.every((p) => p.payload.length <= max));
        assert.equal(pieces.length, Math.max(1, Math.ceil(payload.length / max)));
        const g = new PieceGatherer(shape, 1000);
        const out = pieces.map((p) => g.take(p));
        assert.ok(out.slice(0, -1).every((x) => x === undefined));
        const whole = out.at(-1)!;
        assert.deepEqual(Buffer.from(whole.payload), Buffer.from(payload));
        assert.equal(whole.head, "first");
        assert.equal(g.pending, undefined);
      }),
    ));

  it("marks the pieces of a payload cut in several: offsets, and the SHA-256 of the whole on the last", () => {
    const payload = Buffer.from(counting(100));
    const pieces = cutIntoPieces(payload, 30);
    assert.deepEqual(pieces.map((p) => p.offset), [0, 30, 60, 90]);
    assert.deepEqual(pieces.map((p) => p.digest !== undefined), [false, false, false, true]);
    assert.deepEqual(pieces.at(-1)!.digest, sha256(payload));
    // One piece: nothing to mark.
    assert.deepEqual(cutIntoPieces(payload, 100), [{ payload }]);
  });

  it("refuses pieces reordered, repeated, missing or altered, whichever the pieces are", () =>
    fc.assert(
      fc.property(fc.integer({ min: 3, max: 12 }), fc.integer({ min: 1, max: 20 }), fc.nat(), fc.nat(), (n, max, x, y) => {
        const pieces = piecesOf("k", counting(n * max), max);
        assert.equal(pieces.length, n);
        const i = x % n;
        const j = (i + 1 + (y % (n - 1))) % n;
        const swapped = [...pieces];
        [swapped[i], swapped[j]] = [swapped[j]!, swapped[i]!];
        assert.ok(gather(swapped) instanceof PieceError, `pieces ${i} and ${j} swapped`);
        const inner = 1 + (x % (n - 2));
        assert.ok(gather(pieces.filter((_, k) => k !== inner)) instanceof PieceError, `piece ${inner} dropped`);
        assert.ok(gather([...pieces.slice(0, inner + 1), ...pieces.slice(inner)]) instanceof PieceError, `piece ${inner} repeated`);
        assert.ok(gather(pieces.slice(1)) instanceof PieceError, "the first piece dropped");
        const altered = pieces.map((p, k) => (k === i ? { ...p, payload: Buffer.from(p.payload).map((b, at) => (at === 0 ? b ^ 1 : b)) } : p));
        assert.ok(gather(altered) instanceof PieceError, `piece ${i} altered`);
        assert.ok(!(gather(pieces) instanceof PieceError));
      }),
    ));

  it("says why: an offset where another was due, a missing digest, a digest that does not match", () => {
    const pieces = piecesOf("k", counting(100), 30);
    assert.match(String(gather([pieces[0]!, pieces[2]!, pieces[1]!, pieces[3]!])), /a piece of key "k" begins at byte 60 of its state where byte 30 was due: its pieces are out of order/);
    assert.match(String(gather(pieces.slice(1))), /the first piece of key "k" begins at byte 30/);
    assert.match(String(gather([...pieces.slice(0, 3), { ...pieces[3]!, digest: undefined }])), /carries no SHA-256 of the whole state/);
    assert.match(String(gather([...pieces.slice(0, 3), { ...pieces[3]!, digest: sha256(Buffer.from("other")) }])), /does not match the SHA-256 its last piece carries/);
    assert.match(String(gather([pieces[0]!, { ...pieces[1]!, offset: undefined }, pieces[2]!, pieces[3]!])), /carries no offset though its first piece did/);
    const old = unmarked(pieces);
    assert.match(String(gather([old[0]!, pieces[1]!, old[2]!, old[3]!])), /carries an offset though its first piece did not/);
    // A chunk in one piece that carries a digest has it checked too.
    const one = { key: "k", continued: false, payload: Buffer.from("abc") };
    assert.match(String(gather([{ ...one, digest: sha256(Buffer.from("abd")) }])), /does not match/);
    assert.deepEqual(Buffer.from((gather([{ ...one, digest: sha256(Buffer.from("abc")) }]) as Chunk).payload), Buffer.from("abc"));
  });

  it("takes the pieces of a sender before offsets in the order they come (nothing to check them by)", () => {
    const old = unmarked(piecesOf("k", counting(100), 30));
    const swapped = [old[0]!, old[2]!, old[1]!, old[3]!];
    const got = gather(swapped) as Chunk;
    assert.ok(!(got instanceof PieceError));
    assert.deepEqual(Buffer.from(got.payload), Buffer.concat(swapped.map((c) => c.payload)));
  });

  it("after refusing a key's pieces, gathers the next key's", () => {
    const a = piecesOf("a", counting(100), 30);
    const g = new PieceGatherer(shape, 1000);
    g.take(a[0]!);
    assert.throws(() => g.take(a[2]!), PieceError);
    assert.equal(g.pending, undefined);
    const b = piecesOf("b", counting(50), 30);
    assert.equal(g.take(b[0]!), undefined);
    assert.deepEqual(Buffer.from(g.take(b[1]!)!.payload), Buffer.from(counting(50)));
  });

  it("refuses another key's chunk before a key's last piece", () => {
    const g = new PieceGatherer(shape, 1000);
    assert.equal(g.take({ key: "a", continued: true, payload: new Uint8Array(3) }), undefined);
    assert.equal(g.pending, "a");
    assert.throws(() => g.take({ key: "b", continued: false, payload: new Uint8Array(3) }), PieceError);
  });

  it("past the bound: refused (PiecesTooLargeError), or the key's pieces dropped and the next key taken", () => {
    const big = piecesOf("a", new Uint8Array(100), 30);
    const strict = new PieceGatherer(shape, 50);
    assert.equal(strict.take(big[0]!), undefined);
    assert.throws(() => strict.take(big[1]!), (err: unknown) => err instanceof PiecesTooLargeError && /larger than this node takes \(50 bytes/.test((err as Error).message));

    const told: string[] = [];
    const skipping = new PieceGatherer(shape, 50, (key) => told.push(key));
    for (const p of big) assert.equal(skipping.take(p), undefined);
    assert.deepEqual(told, ["a"]);
    assert.equal(skipping.pending, undefined);
    const next = skipping.take({ key: "b", continued: false, payload: new Uint8Array(10) });
    assert.equal(next?.key, "b");
  });
});
