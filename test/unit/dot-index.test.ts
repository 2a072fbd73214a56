// Dot-index buckets: encoding round trips, and malformed bytes are refused, never misread.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { DOT_BUCKET, appendToBucket, bucketOf, decodeBucket, encodeBucket, offsetOf } from "../../services/store/dot-index.ts";

const bucketArb = fc
  .uniqueArray(fc.record({ offset: fc.integer({ min: 0, max: DOT_BUCKET - 1 }), el: fc.uint8Array({ maxLength: 300 }) }), {
    selector: (e) => e.offset,
    maxLength: DOT_BUCKET,
  })
  .map((entries) => new Map(entries.map((e) => [e.offset, e.el] as [number, Uint8Array])));

describe("dot-index buckets", () => {
  it("decode(encode(b)) = b, entries in offset order", () => {
    fc.assert(
      fc.property(bucketArb, (b) => {
        const back = decodeBucket(encodeBucket(b));
        assert.deepEqual([...back.keys()], [...b.keys()].sort((x, y) => x - y));
        for (const [o, el] of b) assert.deepEqual(Buffer.from(back.get(o)!), Buffer.from(el));
      }),
    );
  });

  it("appending entries above a record's offsets gives the record of their union", () => {
    fc.assert(
      fc.property(bucketArb, fc.integer({ min: 0, max: DOT_BUCKET }), (b, cut) => {
        const below = new Map([...b].filter(([o]) => o < cut));
        const above = new Map([...b].filter(([o]) => o >= cut));
        assert.deepEqual(appendToBucket(encodeBucket(below), above), encodeBucket(b));
        assert.deepEqual(appendToBucket(new Uint8Array(0), above), encodeBucket(above));
      }),
    );
  });

  it("every counter has one bucket and offset", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), (c) => {
        assert.equal(bucketOf(c) * DOT_BUCKET + offsetOf(c), c);
        assert.ok(offsetOf(c) >= 0 && offsetOf(c) < DOT_BUCKET);
      }),
    );
  });

  it("refuses truncated or out-of-range records", () => {
    const good = encodeBucket(new Map([[3, Buffer.from("element")]]));
    assert.throws(() => decodeBucket(good.subarray(0, good.length - 1)), /malformed/);
    assert.throws(() => decodeBucket(Buffer.from([3, 0x80])), /truncated/);
    assert.throws(() => decodeBucket(Buffer.from([DOT_BUCKET, 0])), /malformed/);
    assert.throws(() => decodeBucket(Buffer.from([2, 0, 1, 0])), /out of order/);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        try {
          // Only the canonical encoding decodes.
          assert.deepEqual(encodeBucket(decodeBucket(bytes)), Buffer.from(bytes));
        } catch (e) {
          assert.match((e as Error).message, /dot-index bucket/);
        }
      }),
    );
  });
});
