// A state stored whole that is larger than a message is cut into pieces and gathered back
// (common/chunk-pieces.ts): any payload round-trips through any piece size; pieces of one key may
// not be interleaved with another's; a gathered state past the bound is refused, or skipped whole.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { PieceError, PieceGatherer, type PieceShape, cutIntoPieces } from "../../services/common/chunk-pieces.ts";

interface Piece {
  key: string;
  continued: boolean;
  payload: Uint8Array;
  head?: string;
}
const shape: PieceShape<Piece> = {
  key: (c) => c.key,
  continued: (c) => c.continued,
  payload: (c) => c.payload,
  whole: (first, _last, payload) => ({ ...first, continued: false, payload }),
};
const piecesOf = (key: string, payload: Uint8Array, max: number): Piece[] =>
  cutIntoPieces(Buffer.from(payload), max).map((p, i, all) => ({ key, continued: i < all.length - 1, payload: p, head: i === 0 ? "first" : undefined }));

describe("state pieces", () => {
  it("any payload cut at any size gathers back to itself, with the first piece's fields", () =>
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.integer({ min: 1, max: 40 }), (payload, max) => {
        const pieces = piecesOf("k", payload, max);
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

  it("refuses another key's chunk before a key's last piece", () => {
    const g = new PieceGatherer(shape, 1000);
    assert.equal(g.take({ key: "a", continued: true, payload: new Uint8Array(3) }), undefined);
    assert.equal(g.pending, "a");
    assert.throws(() => g.take({ key: "b", continued: false, payload: new Uint8Array(3) }), PieceError);
  });

  it("past the bound: refused (PieceError), or the key's pieces dropped and the next key taken", () => {
    const big = piecesOf("a", new Uint8Array(100), 30);
    const strict = new PieceGatherer(shape, 50);
    assert.equal(strict.take(big[0]!), undefined);
    assert.throws(() => strict.take(big[1]!), /larger than this node takes \(50 bytes/);

    const told: string[] = [];
    const skipping = new PieceGatherer(shape, 50, (key) => told.push(key));
    for (const p of big) assert.equal(skipping.take(p), undefined);
    assert.deepEqual(told, ["a"]);
    assert.equal(skipping.pending, undefined);
    const next = skipping.take({ key: "b", continued: false, payload: new Uint8Array(10) });
    assert.equal(next?.key, "b");
  });
});
