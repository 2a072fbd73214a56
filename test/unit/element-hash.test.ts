import assert from "node:assert/strict";
import { test } from "node:test";
import { bloomIndexes, hash32, hashPair } from "../../services/crdt/element-hash.js";

const utf8 = (s: string) => new TextEncoder().encode(s);

test("hash32 gives the published MurmurHash3 x86 32-bit values", () => {
  assert.equal(hash32(utf8(""), 0), 0);
  assert.equal(hash32(utf8(""), 1), 0x514e28b7);
  assert.equal(hash32(utf8("hello"), 0), 0x248bfa47);
  assert.equal(hash32(utf8("hello"), 1), 0xbb4abcad);
  assert.equal(hash32(utf8("The quick brown fox jumps over the lazy dog"), 0), 0x2e4ff723);
});

test("bloomIndexes are in range, deterministic, and spread over the bits", () => {
  const m = 1000;
  const hits = new Array<number>(m).fill(0);
  for (let i = 0; i < 20_000; i++) {
    const idx = bloomIndexes(utf8(`e${i}`), 5, m);
    assert.deepEqual(idx, bloomIndexes(utf8(`e${i}`), 5, m));
    for (const j of idx) {
      assert.ok(j >= 0 && j < m && Number.isInteger(j));
      hits[j]!++;
    }
  }
  // 100 000 draws over 1000 bits: every bit is hit, none wildly more than the mean of 100.
  assert.ok(Math.min(...hits) > 40, `least-hit bit ${Math.min(...hits)}`);
  assert.ok(Math.max(...hits) < 170, `most-hit bit ${Math.max(...hits)}`);
  assert.equal(hashPair(utf8("x"))[1] % 2, 1, "the step hash is odd");
});
