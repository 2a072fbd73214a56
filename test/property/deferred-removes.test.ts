// Deferred removes on the real LevelDB store: three replicas of one set take adds, and Removes
// whose context was read on any replica are sent to any replica (often one that has not yet
// received the adds the context covers). Deltas travel in any order, duplicated or lost, the
// new part of each join is forwarded as a node's gossip does, full states move in chunks, and
// replicas restart. In the end, after full-state sync, every replica must hold exactly what it
// would if each remove had been applied where its context was read.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import fc from "fast-check";
import { AWSet, CausalContext, ObjectType, dotKey } from "../../services/crdt/index.ts";
import { PendingRemovesFullError } from "../../services/store/pending-removes.ts";
import { Store } from "../../services/store/store.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-deferred-"));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const partitionOf = () => 0;
const open = (dir: string, nodeId: string, maxPendingRemoves?: number, maxRemoveUnseenDots?: number) =>
  Store.open({ dir, nodeId, partitions: 1, partitionOf, sync: "buffered", maxPendingRemoves, maxRemoveUnseenDots });
const KEY = "k";
const R = 3;
const el = (n: number) => Buffer.from(`e${n}`);

type Op =
  | { kind: "add"; at: number; e: number }
  | { kind: "remove"; readAt: number; sendTo: number; e: number }
  | { kind: "deliver"; pick: number; dup: boolean; lose: boolean }
  | { kind: "chunks"; from: number; to: number; size: number }
  | { kind: "restart"; at: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant("add" as const), at: fc.nat(R - 1), e: fc.nat(3) }),
  fc.record({ kind: fc.constant("remove" as const), readAt: fc.nat(R - 1), sendTo: fc.nat(R - 1), e: fc.nat(3) }),
  fc.record({ kind: fc.constant("deliver" as const), pick: fc.nat(), dup: fc.boolean(), lose: fc.boolean() }),
  fc.record({ kind: fc.constant("deliver" as const), pick: fc.nat(), dup: fc.constant(false), lose: fc.constant(false) }),
  fc.record({ kind: fc.constant("chunks" as const), from: fc.nat(R - 1), to: fc.nat(R - 1), size: fc.integer({ min: 1, max: 3 }) }),
  fc.record({ kind: fc.constant("restart" as const), at: fc.nat(R - 1) }),
);

/** The intended result: an element stays iff one of its add dots was never observed by a remove or re-add. */
class Reference {
  readonly adds = new Map<number, string[]>();
  readonly dead = new Set<string>();

  /** A local operation's delta: its new dots are adds, the rest of its context dies. */
  record(e: number | undefined, delta: AWSet): void {
    const live = new Set<string>();
    for (const dots of delta.entries.values()) for (const d of dots) live.add(dotKey(d));
    if (e !== undefined) this.adds.set(e, [...(this.adds.get(e) ?? []), ...live]);
    for (const d of delta.ctx.dots()) if (!live.has(dotKey(d))) this.dead.add(dotKey(d));
  }

  /** A remove of e with a context read elsewhere: every add of e that context covers dies. */
  removeSeen(e: number, ctx: CausalContext): void {
    for (const d of ctx.dots()) if ((this.adds.get(e) ?? []).includes(dotKey(d))) this.dead.add(dotKey(d));
  }

  elements(): string[] {
    return [...this.adds].filter(([, dots]) => dots.some((d) => !this.dead.has(d))).map(([e]) => `e${e}`).sort();
  }
}

async function elementsOf(s: Store): Promise<string[]> {
  const st = await s.readState(KEY);
  return st === undefined ? [] : (st.state as AWSet).elements().map((b) => b.toString()).sort();
}

async function transfer(from: Store, to: Store, size: number): Promise<AWSet[]> {
  const parts: AWSet[] = [];
  let ctx: CausalContext | undefined;
  for await (const c of from.stateChunks(KEY, { maxEntries: size, maxBytes: Number.MAX_SAFE_INTEGER })) {
    ctx = c.ctx ?? ctx;
    const r = await to.applyChunk(KEY, { type: c.type, senderCtx: ctx!, rangeStart: c.rangeStart, rangeEnd: c.rangeEnd, rangeOpen: c.rangeOpen, slice: c.slice });
    if (r.changed) parts.push(r.newPart as AWSet);
    if (r.settled !== undefined) parts.push(r.settled.delta as AWSet);
    if (c.keyDone) {
      const f = await to.finishKey(KEY, c.type, ctx!);
      if (f.changed) parts.push(f.newPart as AWSet);
      if (f.settled !== undefined) parts.push(f.settled.delta as AWSet);
    }
  }
  return parts;
}

describe("deferred removes (LevelDB store)", () => {
  it("any interleaving ends as if each remove had been applied where its context was read", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 5, maxLength: 40 }), async (ops) => {
        const dirsOf = Array.from({ length: R }, () => join(root, `p${dirs++}`));
        const stores = await Promise.all(dirsOf.map((d, i) => open(d, `r${i}`)));
        const ref = new Reference();
        const inFlight: Array<{ to: number; delta: AWSet }> = [];
        const spread = (from: number, delta: AWSet) => {
          for (let to = 0; to < R; to++) if (to !== from) inFlight.push({ to, delta });
        };
        try {
          for (const op of ops) {
            switch (op.kind) {
              case "add": {
                const r = await stores[op.at]!.add(KEY, [el(op.e)]);
                ref.record(op.e, r.delta);
                spread(op.at, r.delta);
                break;
              }
              case "remove": {
                const ctx = (await stores[op.readAt]!.describe(KEY))?.ctx;
                if (ctx === undefined) break;
                ref.removeSeen(op.e, ctx);
                const r = await stores[op.sendTo]!.remove(KEY, [el(op.e)], ctx);
                ref.record(undefined, r.delta);
                if (!r.delta.ctx.isEmpty()) spread(op.sendTo, r.delta);
                break;
              }
              case "deliver": {
                if (inFlight.length === 0) break;
                const i = op.pick % inFlight.length;
                const m = inFlight[i]!;
                if (!op.dup) inFlight.splice(i, 1);
                if (op.lose) break;
                const r = await stores[m.to]!.merge(KEY, ObjectType.AWSET, m.delta);
                if (r.changed) spread(m.to, r.newPart as AWSet); // forwarded, as gossip buffers Δ(d, X)
                if (r.settled !== undefined) spread(m.to, r.settled.delta as AWSet); // a remove of its own, as gossip spreads it
                break;
              }
              case "chunks": {
                if (op.from === op.to) break;
                for (const p of await transfer(stores[op.from]!, stores[op.to]!, op.size)) spread(op.to, p);
                break;
              }
              case "restart": {
                await stores[op.at]!.close();
                stores[op.at] = await open(dirsOf[op.at]!, `r${op.at}`);
                break;
              }
            }
          }
          // Anti-entropy until quiet: full states both ways between every pair, twice.
          for (let round = 0; round < 2; round++) {
            for (let a = 0; a < R; a++) for (let b = 0; b < R; b++) if (a !== b) await transfer(stores[a]!, stores[b]!, 2);
          }
          const want = ref.elements();
          for (let i = 0; i < R; i++) assert.deepEqual(await elementsOf(stores[i]!), want, `replica r${i}`);
          for (const s of stores) assert.equal(s.pendingRemoves(KEY), 0, "every deferred remove settled once all adds arrived");
          for (const s of stores) assert.deepEqual(await s.verify(KEY), []);
        } finally {
          await Promise.all(stores.map((s) => s.close()));
        }
      }),
      { numRuns: Number(process.env.FC_DEFERRED_RUNS ?? 40) },
    );
  });

  it("keeps a deferred remove across a restart and applies it when the add arrives by Merge", async () => {
    const a = await open(join(root, `u${dirs++}`), "a");
    const bDir = join(root, `u${dirs++}`);
    let b = await open(bDir, "b");
    try {
      const add = await a.add(KEY, [el(1), el(2)]);
      const ctx = (await a.describe(KEY))!.ctx;
      const r = await b.remove(KEY, [el(1)], ctx);
      assert.deepEqual([r.removed, r.pending, r.unseenDots], [0, 1, 2]);
      await b.close();
      b = await open(bDir, "b");
      assert.equal(b.pendingRemoves(KEY), 1, "durable");
      const m = await b.merge(KEY, ObjectType.AWSET, add.delta);
      assert.deepEqual(await elementsOf(b), ["e2"], "e1 removed on arrival, e2 kept");
      assert.equal(b.pendingRemoves(KEY), 0, "settled: every covered add arrived");
      // The join made a remove delta of b's own: whoever receives it drops e1 as well.
      assert.ok(m.settled !== undefined);
      const c = AWSet.bottom().add("a~x", [el(9)]);
      c.joinInPlace(add.delta);
      c.joinInPlace(m.settled.delta as AWSet);
      assert.equal(c.has(el(1)), false);
      assert.equal(c.has(el(2)), true);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it("refuses, changing nothing, a Remove whose context names more unseen dots than the limit", async () => {
    const b = await open(join(root, `u${dirs++}`), "b", 100, 10);
    try {
      await b.add(KEY, [el(1)]);
      const own = (await b.describe(KEY))!.ctx;
      // Far ahead of anything made: a replica's dots 1..2^53 (a forged or mistaken context).
      const forged = own.clone().joinInPlace(CausalContext.fromVector([["x~1", 2 ** 53]]));
      const before = await b.describe(KEY);
      await assert.rejects(b.remove(KEY, [el(1)], forged), (err: Error) => err instanceof PendingRemovesFullError && /names 9007199254740992 dots.*--max-remove-unseen-dots/.test(err.message));
      assert.equal(b.pendingRemoves(KEY), 0);
      assert.deepEqual(await b.describe(KEY), before);
      // Up to the limit, the remove waits for those dots as before.
      const lagging = own.clone().joinInPlace(CausalContext.fromVector([["x~1", 10]]));
      assert.equal((await b.remove(KEY, [el(1)], lagging)).pending, 1);
    } finally {
      await b.close();
    }
  });

  it("refuses, changing nothing, past the pending-remove limit", async () => {
    const a = await open(join(root, `u${dirs++}`), "a");
    const b = await open(join(root, `u${dirs++}`), "b", 2);
    try {
      await a.add(KEY, [el(1), el(2), el(3)]);
      await b.add(KEY, [el(1)]);
      const ctx = (await a.describe(KEY))!.ctx;
      assert.equal((await b.remove(KEY, [el(1), el(2)], ctx)).pending, 2);
      const before = await b.describe(KEY);
      await assert.rejects(b.remove(KEY, [el(3)], ctx), PendingRemovesFullError);
      assert.equal(b.pendingRemoves(KEY), 2);
      assert.deepEqual(await b.describe(KEY), before);
      // The same elements again fit: their records are joined, not added.
      assert.equal((await b.remove(KEY, [el(2)], ctx)).pending, 1);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});
