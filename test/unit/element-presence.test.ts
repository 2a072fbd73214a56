// Presence filters (store/element-presence.ts): a trusted filter never calls an added element
// absent, across the growth of its segments; an untrusted one (a scan running) calls nothing
// absent; a filter that outgrows the memory budget is dropped and gives its memory back.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { ElementPresence, presenceHash } from "../../services/store/element-presence.ts";

const el = (i: number) => Buffer.from(`element-${i}`);

describe("element presence filters", () => {
  it("never call an added element absent, and call few others present", () => {
    const p = new ElementPresence(64 * 1024 * 1024);
    const f = p.startEmpty("k")!;
    for (let i = 0; i < 100_000; i++) f.add(presenceHash(el(i)));
    for (let i = 0; i < 100_000; i++) assert.ok(f.mayHold(presenceHash(el(i))), `element ${i}`);
    let maybe = 0;
    for (let i = 100_000; i < 200_000; i++) if (f.mayHold(presenceHash(el(i)))) maybe++;
    // Seven segments (1k .. 64k capacity), each about 0.8% at capacity: a few percent at most.
    assert.ok(maybe < 5_000, `${maybe} of 100000 absent elements called present`);
    assert.ok(maybe > 0, "a Bloom filter calls some absent elements present");
    const { bytes, filters } = p.stats();
    assert.equal(filters, 1);
    assert.ok(bytes > 100_000 && bytes < 512 * 1024, `${bytes} bytes for 100k elements`);
  });

  it("call every element present while the scan that fills them runs", () => {
    const p = new ElementPresence(1024 * 1024);
    const f = p.startScan("k", 10)!;
    assert.ok(f.mayHold(presenceHash(el(1))));
    f.add(presenceHash(el(2)));
    assert.ok(f.mayHold(presenceHash(el(1))));
    p.finishScan(f);
    assert.equal(f.mayHold(presenceHash(el(1))), false);
    assert.ok(f.mayHold(presenceHash(el(2))));
    assert.equal(p.stats().scans, 1);
  });

  it("refuse a scan whose filter would not fit the budget", () => {
    const p = new ElementPresence(64 * 1024);
    assert.equal(p.startScan("k", 1_000_000), undefined);
    assert.equal(p.stats().filters, 0);
  });

  it("drop a filter that outgrows the budget, which then calls everything present", () => {
    const p = new ElementPresence(64 * 1024);
    const f = p.startEmpty("k")!;
    let i = 0;
    while (!f.dropped && i < 1_000_000) f.add(presenceHash(el(i++)));
    assert.ok(f.dropped, "dropped once past the budget");
    assert.ok(i > 1024, `took ${i} elements`);
    assert.ok(f.mayHold(presenceHash(el(5_000_000))));
    assert.equal(p.get("k"), undefined);
    assert.deepEqual({ filters: p.stats().filters, bytes: p.stats().bytes }, { filters: 0, bytes: 0 });
    // A new set starts again within the budget.
    assert.ok(p.startEmpty("other") !== undefined);
  });

  it("are off with a budget of 0", () => {
    const p = new ElementPresence(0);
    assert.equal(p.startEmpty("k"), undefined);
  });
});
