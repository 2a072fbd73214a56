// Page tokens round-trip and are tamper-evident: any cut, changed byte, made-up token or token of
// another key fails the check.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { PAGE_TOKEN_OVERHEAD, decodePageToken, encodePageToken } from "../../services/replica/page-token.ts";

const key = fc.string({ minLength: 1, maxLength: 20 });
const element = fc.uint8Array({ minLength: 1, maxLength: 64 }).map((a) => Buffer.from(a));

describe("page tokens", () => {
  it("round-trip for the key they were issued for, and only for it", () =>
    fc.assert(
      fc.property(key, key, element, (k, other, e) => {
        const t = encodePageToken(k, e);
        assert.deepEqual(decodePageToken(k, t), e);
        if (other !== k) assert.equal(decodePageToken(other, t), undefined);
      }),
    ));

  it("refuse any single changed byte and any truncation", () =>
    fc.assert(
      fc.property(key, element, fc.nat(), fc.integer({ min: 1, max: 255 }), (k, e, at, flip) => {
        const t = encodePageToken(k, e);
        const changed = Buffer.from(t);
        changed[at % t.length]! ^= flip;
        assert.equal(decodePageToken(k, changed), undefined);
        assert.equal(decodePageToken(k, t.subarray(0, at % t.length)), undefined);
      }),
    ));

  it("refuse short garbage and random bytes", () => {
    for (const t of [Buffer.from("x"), Buffer.alloc(PAGE_TOKEN_OVERHEAD), Buffer.from([1, 0x61])]) assert.equal(decodePageToken("k", t), undefined);
    fc.assert(fc.property(fc.uint8Array({ maxLength: 80 }), (b) => assert.equal(decodePageToken("k", b), undefined)));
  });
});
