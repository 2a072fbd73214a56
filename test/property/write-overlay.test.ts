// The group commit's overlay of queued records: whatever the order of writes, flushes taking part
// of the queue and flushes ending, a read through the overlay and then the database sees each
// key's latest write; once every write is durable the overlay holds nothing and one generation.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import type { BatchOp } from "../../services/store/db.ts";
import { type OverlayGeneration, WriteOverlay } from "../../services/store/write-overlay.ts";

const KEYS = ["a", "b", "c", "d", "e"];
const step = fc.oneof(
  // One operation's records: puts and deletes of a few keys (a key may repeat within it).
  fc.record({ kind: fc.constant("write" as const), records: fc.array(fc.record({ key: fc.constantFrom(...KEYS), del: fc.boolean() }), { minLength: 1, maxLength: 4 }) }),
  // A flush takes up to n queued operations (sealing the overlay first, as GroupCommit does).
  fc.record({ kind: fc.constant("take" as const), n: fc.integer({ min: 1, max: 4 }) }),
  // The oldest batch in flight becomes durable.
  fc.record({ kind: fc.constant("durable" as const) }),
);

interface Op {
  keys: string[];
  ops: BatchOp[];
  generation: OverlayGeneration;
}

describe("WriteOverlay", () => {
  it("a read through the overlay, then the database, sees each key's latest write; all durable leaves it empty", () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 80 }), (steps) => {
        const overlay = new WriteOverlay();
        const db = new Map<string, Buffer>();
        /** Each key's latest write: a value, or null for a delete. */
        const latest = new Map<string, Buffer | null>();
        const queued: Op[] = [];
        const inFlight: Op[][] = [];
        let n = 0;
        const read = (k: string): Buffer | null => {
          const o = overlay.get(k);
          if (o !== undefined) return o.type === "put" ? o.value : null;
          return db.get(k) ?? null;
        };
        const land = (batch: Op[]) => {
          for (const op of batch) {
            for (const r of op.ops) {
              if (r.type === "put") db.set(r.key.toString("latin1"), r.value);
              else db.delete(r.key.toString("latin1"));
            }
          }
          for (const op of batch) overlay.durable(op.generation);
        };
        for (const s of steps) {
          if (s.kind === "write") {
            const ops: BatchOp[] = s.records.map((r) => (r.del ? { type: "del", key: Buffer.from(r.key, "latin1") } : { type: "put", key: Buffer.from(r.key, "latin1"), value: Buffer.from(`v${n++}`) }));
            const keys = ops.map((o) => o.key.toString("latin1"));
            queued.push({ keys, ops, generation: overlay.add(keys, ops) });
            ops.forEach((o, i) => latest.set(keys[i]!, o.type === "put" ? o.value : null));
          } else if (s.kind === "take") {
            if (queued.length === 0) continue;
            overlay.seal();
            inFlight.push(queued.splice(0, s.n));
          } else if (inFlight.length > 0) {
            land(inFlight.shift()!);
          }
          for (const k of KEYS) assert.deepEqual(read(k), latest.get(k) ?? null, `key ${k}`);
        }
        // Everything queued is taken and lands, in order.
        while (queued.length > 0) {
          overlay.seal();
          inFlight.push(queued.splice(0, 3));
        }
        while (inFlight.length > 0) land(inFlight.shift()!);
        for (const k of KEYS) {
          assert.equal(overlay.get(k), undefined);
          assert.deepEqual(db.get(k) ?? null, latest.get(k) ?? null);
        }
        assert.equal(overlay.generationCount, 1);
      }),
    );
  });
});
