// The seed's serialised filter layout used by bench:filters to compare Tables 6.1 / 6.2 layout for
// layout (test/bench/filters-seed-layout.ts): Java's serialisation records byte for byte, and the
// sizes the slot array and the overflow map come to.
import { strict as assert } from "node:assert";
import { test } from "node:test";
import { cuckooParams } from "../../services/crdt/cuckoo-table.js";
import { JavaObjectStream, gcfSeedLayout, orcfSeedLayout, orcfSeedWord } from "../bench/filters-seed-layout.js";

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

test("a byte[] is written as ObjectOutputStream writes new byte[]{1, 2}", () => {
  const b = new JavaObjectStream().byteArray(Uint8Array.of(1, 2)).finish();
  // magic, version, TC_ARRAY, class descriptor of [B (its serialVersionUID), length 2, the bytes
  assert.equal(hex(b), "aced0005" + "75" + "7200025b42acf317f8060854e0020000" + "7870" + "00000002" + "0102");
});

test("a HashMap<Integer, byte[]> of one entry matches the JDK's serialised form", () => {
  const s = new JavaObjectStream();
  s.hashMap([[5, Uint8Array.of(7)]], (v) => s.byteArray(v));
  const expected =
    "aced0005" +
    "737200116a6176612e7574696c2e486173684d61700507dac1c31660d103000246000a6c6f6164466163746f724900097468726573686f6c647870" +
    "3f4000000000000c" + // loadFactor 0.75, threshold 12
    "770800000010" + "00000001" + // block data: capacity 16, size 1
    "737200116a6176612e6c616e672e496e746567657212e2a0a4f781873802000149000576616c7565787200106a6176612e6c616e672e4e756d62657286ac951d0b94e08b020000787000000005" +
    "757200025b42acf317f8060854e002000078700000000107" +
    "78";
  assert.equal(hex(s.finish()), expected);
});

test("later records reuse class descriptors: an Integer then costs 10 bytes and a byte[] 10 plus its length", () => {
  const one = new JavaObjectStream();
  one.hashMap([[1, Uint8Array.of(1)]], (v) => one.byteArray(v));
  const three = new JavaObjectStream();
  three.hashMap(
    [
      [1, Uint8Array.of(1)],
      [2, Uint8Array.of(2, 3)],
      [3, Uint8Array.of(4, 5, 6)],
    ],
    (v) => three.byteArray(v),
  );
  assert.equal(three.finish().length - one.finish().length, 2 * 20 + 2 + 3);
});

test("GCF layout: one byte per slot, overflow entries in the map, nothing else grows with the table", () => {
  const p = cuckooParams(8, 8, { bucketSize: 4 });
  const empty = gcfSeedLayout(p, []);
  const full: Array<[number, number]> = [];
  for (let i = 0; i < 8; i++) for (let k = 0; k < 4; k++) full.push([i, 16 * i + k + 1]);
  // A full table without overflow is the same size as an empty one: fixed-width slots.
  assert.equal(gcfSeedLayout(p, full).length, empty.length);
  const slots = gcfSeedLayout(p, full);
  const arrayStart = 4 + 1 + 16 + 2 + 4; // magic/version, TC_ARRAY, [B descriptor, TC_ENDBLOCKDATA TC_NULL, length
  assert.deepEqual([...slots.subarray(arrayStart, arrayStart + 4)], [1, 2, 3, 4]);
  // Two buckets overflowing by 1 and 2 entries: the map holds three entries in two arrays.
  const over = gcfSeedLayout(p, [...full, [3, 200], [5, 201], [5, 202]]);
  const oneBucket = gcfSeedLayout(p, [...full, [3, 200]]);
  assert.equal(over.length - oneBucket.length, 20 + 2);
  assert.ok(oneBucket.length > empty.length + 20, "the first entry also writes the Integer class descriptors");
});

test("ORCF layout: eight bytes per slot, fingerprint, replica and timestamp from the high bits", () => {
  assert.equal(orcfSeedWord({ bucket: 0, fp: 0xab, replica: 1, t: 7 }), 0x00ab_0001_0000_0007n);
  const p = cuckooParams(4, 8, { bucketSize: 4 });
  const base = orcfSeedLayout(p, []);
  const arrayStart = 4 + 1 + 16 + 2 + 4;
  assert.deepEqual([...base.subarray(arrayStart - 4, arrayStart)], [0, 0, 0, 16], "16 slots");
  const entries = Array.from({ length: 16 }, (_, k) => ({ bucket: k >> 2, fp: k + 1, replica: k & 1, t: k + 1 }));
  assert.equal(orcfSeedLayout(p, entries).length, base.length);
  const withOverflow = orcfSeedLayout(p, [...entries, { bucket: 2, fp: 9, replica: 0, t: 99 }, { bucket: 2, fp: 9, replica: 1, t: 98 }]);
  // One overflowing bucket of two extra longs: an Integer with its class descriptors (the first one
  // in the stream), then a long[] whose descriptor the slot array already wrote, and 2 x 8 bytes.
  const integerRecords = 1 + 1 + 2 + 17 + 8 + 1 + 2 + 1 + 2 + 5 + 1 + 1 + 2 + 16 + 8 + 1 + 2 + 1 + 1 + 4;
  assert.equal(withOverflow.length - base.length, integerRecords + 1 + 5 + 4 + 16);
});
