// ReadPull (node/read-pull.ts) over real stores and the real Export and Import code: a read of a
// partition this node came to own lately fetches the key from the members that held it before and
// joins what they have, once per key and gain; what a holder sends is joined only once all of it
// arrived (a fetch cut part-way leaves nothing); a holder that is unreachable or too slow is passed
// over for the timeout, a refusal that is not the holder's fault is not; a key is remembered as
// fetched only when every holder answered; a fetch asks one hop further at most.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { Ownership } from "../../services/gossip/ownership.ts";
import { READ_PULL, ReadPull, type PullOutcome } from "../../services/node/read-pull.ts";
import type { ExportChunk, ExportRequest } from "../../services/gen/deltaset/v1/replica.ts";
import { type AWSet, contextFromProto } from "../../services/crdt/index.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import { exportChunks } from "../../services/replica/export-stream.ts";
import { applyImport } from "../../services/replica/import-apply.ts";
import { Store } from "../../services/store/store.ts";
import { testLimits } from "../helpers/limits.ts";

const P = 16;
const quiet = { debug() {}, info() {}, warn() {}, error() {}, child() { return quiet; } } as never;
const live = (...ids: string[]) => new Map(ids.map((id) => [id, `${id}:1`]));
const LIMITS = testLimits({ defaultExportChunk: 2, maxExportChunk: 100 });
let stores = 0;
const open = () => Store.open({ dir: "memory", nodeId: `r${stores++}`, partitions: P, partitionOf, sync: "buffered" });
const b = (s: string) => Buffer.from(s);
async function members(s: Store, key: string): Promise<number> {
  return ((await s.readState(key))?.state as AWSet | undefined)?.entries.size ?? 0;
}
function keyIn(p: number, tag: string): string {
  for (let i = 0; ; i++) if (partitionOf(`${tag}${i}`, P) === p) return `${tag}${i}`;
}

/** How a holder answers one export: whole, cut after its first chunk, or an error code. */
type Behaviour = "ok" | "cut" | grpc.status | { until: Promise<void> };

/**
 * c came to own a partition at t = 50 s: after its first view with peers n1, n2, n3 at R = 2
 * (holders: the two owners the others give it), or when n3 went (one holder). Holders are real
 * stores; `behave` decides each export.
 */
async function harness(opts: { holders: 1 | 2; behave?: (address: string) => Behaviour; maxBytes?: number }) {
  const o = new Ownership("c", "c:1", P, 2);
  let p = -1;
  if (opts.holders === 2) {
    o.setLive(live("n1", "n2", "n3"), "c:1", 50_000);
    p = o.owned().find((q) => o.pullFrom(q, 0).length === 2)!;
  } else {
    o.setLive(live("n1", "n2", "n3"), "c:1", 1_000);
    for (let q = 0; q < P && p < 0; q++) {
      const after = new Ownership("c", "c:1", P, 2);
      after.setLive(live("n1", "n2"));
      if (!o.owns(q) && after.owns(q) && o.ownersOf(q).includes("n3")) p = q;
    }
    o.setLive(live("n1", "n2"), "c:1", 50_000);
  }
  assert.ok(p >= 0 && o.pullFrom(p, 0).length === opts.holders);
  const holders = new Map<string, Store>();
  for (const h of o.pullFrom(p, 0)) holders.set(h.address, await open());
  const here = await open();
  const calls: Array<{ address: string; req: ExportRequest; metadata: grpc.Metadata; options: Partial<grpc.CallOptions> }> = [];
  const outcomes: PullOutcome[] = [];
  const clock = { now: 60_000 };
  const pull = new ReadPull({
    ownership: o,
    windowMs: 30_000,
    timeoutMs: 2_000,
    maxBytes: opts.maxBytes ?? 1 << 20,
    describe: (key) => here.describe(key),
    exportFrom: (address, req, metadata, options) => {
      calls.push({ address, req, metadata, options });
      const how = opts.behave?.(address) ?? "ok";
      const from = holders.get(address)!;
      return (async function* () {
        if (typeof how === "number") throw Object.assign(new Error(`status ${how}`), { code: how });
        if (typeof how === "object") await how.until;
        if ((await from.typeOf(req.key)) === undefined) throw Object.assign(new Error("absent"), { code: grpc.status.NOT_FOUND });
        let sent = 0;
        const since = req.since === undefined ? undefined : contextFromProto(req.since);
        for await (const c of exportChunks(from, req.key, { maxEntries: 2, maxBytes: 1 << 16, since })) {
          if (how === "cut" && sent === 1) throw Object.assign(new Error("deadline"), { code: grpc.status.DEADLINE_EXCEEDED });
          sent++;
          yield c as ExportChunk;
        }
      })();
    },
    apply: async (chunks) => (await applyImport({ store: here, limits: LIMITS, notify: () => {}, clockSkewBoundMs: 0 }, chunks)).changed,
    log: quiet,
    onPull: (x) => outcomes.push(x),
    now: () => clock.now,
  });
  const stores = [...holders.values()];
  return { o, p, here, stores, pull, calls, outcomes, clock, addresses: [...holders.keys()] };
}

/** A member joins that takes partition p from c (at 55 s): c keeps what it holds until hand-off. */
function joinTaking(o: Ownership, p: number): void {
  const joiner = ["n4", "n5", "n6", "n7", "n8", "n9"].find((id) => {
    const t = new Ownership("c", "c:1", P, 2);
    t.setLive(live("n1", "n2", id));
    return !t.owns(p);
  })!;
  o.setLive(live("n1", "n2", joiner), "c:1", 55_000);
}

describe("ReadPull", () => {
  it("joins what the former holder has of the key, asked with the caller's token, its own deadline and hop 1, once", async () => {
    const h = await harness({ holders: 1 });
    const key = keyIn(h.p, "k");
    await h.stores[0]!.add(key, ["a", "b", "c", "d", "e", "f"].map(b));
    await h.here.add(key, [b("fresh")]);
    await h.pull.before(key, ["Bearer t"]);
    assert.equal(await members(h.here, key), 7, "the holder's 6 and the one taken here");
    assert.equal(h.calls.length, 1);
    assert.ok(h.calls[0]!.req.since !== undefined, "a set's delta since what is here");
    assert.deepEqual(h.calls[0]!.metadata.get("authorization"), ["Bearer t"]);
    assert.deepEqual(h.calls[0]!.metadata.get(READ_PULL), ["1"]);
    assert.equal(h.calls[0]!.options.deadline, 62_000, "the fetch's own deadline (--forward-timeout-ms), not the caller's");
    assert.deepEqual(h.outcomes, ["joined"]);
    await h.pull.before(key, []);
    assert.equal(h.calls.length, 1, "fetched: not asked again for this gain");
  });

  it("a fetch cut part-way joins nothing", async () => {
    const h = await harness({ holders: 1, behave: () => "cut" });
    const key = keyIn(h.p, "k");
    await h.stores[0]!.add(key, ["a", "b", "c", "d", "e", "f"].map(b));
    await h.here.add(key, [b("fresh")]);
    await h.pull.before(key, []);
    assert.deepEqual(h.outcomes, ["failed"]);
    assert.equal(await members(h.here, key), 1, "nothing of the cut answer was joined");
    // A holder too slow for the fetch's own deadline is passed over for the timeout, then asked again.
    await h.pull.before(key, []);
    assert.equal(h.calls.length, 1);
    h.clock.now += 2_000;
    await h.pull.before(key, []);
    assert.equal(h.calls.length, 2);
  });

  it("an answer larger than the bound is not joined, and the holder is not passed over for it", async () => {
    const h = await harness({ holders: 1, maxBytes: 40 });
    const key = keyIn(h.p, "k");
    await h.stores[0]!.add(key, Array.from({ length: 20 }, (_, i) => b(`element-${i}`)));
    await h.here.add(key, [b("fresh")]);
    await h.pull.before(key, []);
    assert.deepEqual(h.outcomes, ["failed"]);
    assert.equal(await members(h.here, key), 1);
    await h.pull.before(key, []);
    assert.equal(h.calls.length, 2, "asked again at once");
  });

  it("a refusal that is not the holder's fault (a token) does not pass it over; unreachable does", async () => {
    let code: Behaviour = grpc.status.PERMISSION_DENIED;
    const h = await harness({ holders: 1, behave: () => code });
    const key = keyIn(h.p, "k");
    const other = keyIn(h.p, "other");
    for (const k of [key, other]) await h.here.add(k, [b("fresh")]);
    await h.pull.before(key, []);
    await h.pull.before(key, []);
    assert.equal(h.calls.length, 2, "a refused token: asked again at the next read");
    code = grpc.status.UNAVAILABLE;
    await h.pull.before(key, []);
    await h.pull.before(other, []);
    assert.equal(h.calls.length, 3, "unreachable: passed over for every key of it");
    assert.deepEqual(h.outcomes, ["failed", "failed", "failed"]);
  });

  it("with two holders, one unreachable: joins the other's, and asks the first again once it is back, the key not remembered as fetched meanwhile", async () => {
    let down = true;
    let first = "";
    const h = await harness({ holders: 2, behave: (a) => (a === first && down ? grpc.status.UNAVAILABLE : "ok") });
    first = h.addresses[0]!;
    const [A, B] = h.stores as [Store, Store];
    const k1 = keyIn(h.p, "x");
    const k2 = keyIn(h.p, "y");
    await A.add(k2, ["a1", "a2", "a3"].map(b));
    await B.add(k2, [b("b1")]);
    for (const k of [k1, k2]) await h.here.add(k, [b("fresh")]);
    await h.pull.before(k1, []); // the first holder fails: passed over
    await h.pull.before(k2, []); // only the second asked
    assert.equal(await members(h.here, k2), 2);
    down = false;
    await h.pull.before(k2, []);
    assert.equal(await members(h.here, k2), 2, "still passed over within the timeout");
    h.clock.now += 2_000;
    await h.pull.before(k2, []);
    assert.equal(await members(h.here, k2), 5, "asked again once back: not remembered as fetched from the second alone");
  });

  it("reads at once share one fetch", async () => {
    const h = await harness({ holders: 1 });
    const key = keyIn(h.p, "k");
    await h.stores[0]!.add(key, [b("a")]);
    await h.here.add(key, [b("fresh")]);
    await Promise.all([h.pull.before(key, []), h.pull.before(key, []), h.pull.before(key, [])]);
    assert.equal(h.calls.length, 1);
  });

  it("a client's read of a key absent here fetches nothing (it moves on to the next owner); a fetch asking this node fetches it whole", async () => {
    const h = await harness({ holders: 1 });
    const key = keyIn(h.p, "k");
    await h.stores[0]!.add(key, ["a", "b", "c"].map(b));
    await h.pull.before(key, []);
    assert.equal(h.calls.length, 0);
    assert.equal(await h.here.typeOf(key), undefined);
    await h.pull.before(key, [], 1);
    assert.equal(h.calls.length, 1);
    assert.equal(await members(h.here, key), 3);
  });

  it("a write acting on what this node observed (absentToo) fetches a key absent here, also after a read skipped it; never onto a node that does not own it", async () => {
    const h = await harness({ holders: 1 });
    const key = keyIn(h.p, "k");
    await h.stores[0]!.add(key, ["a", "b", "c"].map(b));
    // A read first (skips the absent key), and a Delete at the same time: the Delete still fetches.
    await Promise.all([h.pull.before(key, []), h.pull.before(key, [], 0, true)]);
    assert.equal(h.calls.length, 1);
    assert.equal(await members(h.here, key), 3);
    // Not onto a node that lost the partition since.
    const other = keyIn(h.p, "other");
    await h.stores[0]!.add(other, [b("x")]);
    joinTaking(h.o, h.p);
    await h.pull.before(other, [], 0, true);
    assert.equal(await h.here.typeOf(other), undefined);
  });

  it("a fetch asking this node while its own fetch of the key runs is answered at once (two new owners read at once would wait on each other)", async () => {
    let release!: () => void;
    const until = new Promise<void>((r) => (release = r));
    const h = await harness({ holders: 1, behave: () => ({ until }) });
    const key = keyIn(h.p, "k");
    await h.stores[0]!.add(key, ["a", "b"].map(b));
    await h.here.add(key, [b("fresh")]);
    // This node's own fetch hangs on the holder, which is itself asking this node (hop 1).
    const own = h.pull.before(key, []);
    const asked = await Promise.race([h.pull.before(key, [], 1).then(() => "answered"), new Promise((r) => setTimeout(() => r("waited"), 500))]);
    assert.equal(asked, "answered");
    release();
    await own;
    assert.equal(await members(h.here, key), 3);
  });

  it("a node that lost the partition again since still fetches for a fetch asking it (two moves in a row), if it holds part of the key", async () => {
    const h = await harness({ holders: 1 });
    const key = keyIn(h.p, "k");
    await h.stores[0]!.add(key, ["a", "b"].map(b));
    // A member joins that takes the partition from c: c keeps what it holds until hand-off.
    joinTaking(h.o, h.p);
    assert.equal(h.o.owns(h.p), false);
    // Holding nothing of the key, it takes no copy of a partition it does not own.
    await h.pull.before(key, [], 1);
    assert.equal(h.calls.length, 0);
    assert.equal(await h.here.typeOf(key), undefined);
    // Holding part of it (the transfer that had begun), it fetches through.
    await h.here.add(key, [b("part")]);
    await h.pull.before(key, [], 1);
    assert.equal(await members(h.here, key), 3, "fetched from its own former holder for the new owner's fetch");
  });

  it("a fetch asked at hop 1 asks one hop further; at hop 2 nothing", async () => {
    const h = await harness({ holders: 1 });
    const key = keyIn(h.p, "k");
    await h.pull.before(key, [], 2);
    assert.equal(h.calls.length, 0);
    await h.pull.before(key, [], 1);
    assert.deepEqual(h.calls[0]!.metadata.get(READ_PULL), ["2"]);
    const md = new grpc.Metadata();
    assert.equal(ReadPull.hopOf(md), 0);
    md.set(READ_PULL, "1");
    assert.equal(ReadPull.hopOf(md), 1);
    md.set(READ_PULL, "c");
    assert.equal(ReadPull.hopOf(md), 2, "a value that is not a hop counts as the last");
  });

  it("fetches nothing outside the window, once the holder sent the partition whole, or for a partition owned from before the window", async () => {
    const late = await harness({ holders: 1 });
    late.clock.now = 80_001; // the gain at 50,000 is older than the 30 s window
    await late.pull.before(keyIn(late.p, "k"), []);
    assert.equal(late.calls.length, 0);

    const whole = await harness({ holders: 1 });
    whole.o.receivedWhole(whole.p, whole.o.pullFrom(whole.p, 0)[0]!.nodeId, 50_500);
    await whole.pull.before(keyIn(whole.p, "k"), []);
    assert.equal(whole.calls.length, 0);

    // A partition owned since the first view (t = 1 s), which the later change left with c.
    const s = await harness({ holders: 1 });
    const old = s.o.owned().find((q) => s.o.gainedAt(q) === 1_000);
    assert.ok(old !== undefined);
    await s.pull.before(keyIn(old, "o"), []);
    assert.equal(s.calls.length, 0);
  });
});
