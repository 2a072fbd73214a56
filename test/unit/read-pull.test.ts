// ReadPull (node/read-pull.ts): a read of a partition this node came to own lately fetches the key
// from the members that held it before, once per key and gain, from all of them at once, with the
// caller's token and a bounded deadline; a holder that fails is passed over (the read goes on) and
// the key is fetched again next time; outside the window or for a partition owned from before the window
// nothing is fetched.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { Ownership } from "../../services/gossip/ownership.ts";
import { READ_PULL, ReadPull, type PullOutcome } from "../../services/node/read-pull.ts";
import type { ExportChunk, ExportRequest } from "../../services/gen/deltaset/v1/replica.ts";
import { ObjectType } from "../../services/crdt/index.ts";
import { CausalContext } from "../../services/crdt/causal-context.ts";
import { partitionOf } from "../../services/gossip/partition.ts";

const quiet = { debug() {}, info() {}, warn() {}, error() {}, child() { return quiet; } } as never;
const live = (...ids: string[]) => new Map(ids.map((id) => [id, `${id}:1`]));

/** c came to own partition p at t = 50 s when n3 went; its holder is the owner that stayed. */
function setup(opts: { fail?: Set<string>; notFound?: boolean } = {}) {
  const o = new Ownership("c", "c:1", 16, 2);
  o.setLive(live("n1", "n2", "n3"), "c:1", 1_000);
  let p = -1;
  for (let q = 0; q < 16 && p < 0; q++) {
    const after = new Ownership("c", "c:1", 16, 2);
    after.setLive(live("n1", "n2"));
    if (!o.owns(q) && after.owns(q) && o.ownersOf(q).includes("n3")) p = q;
  }
  assert.ok(p >= 0);
  o.setLive(live("n1", "n2"), "c:1", 50_000);
  let key = "";
  for (let i = 0; key === ""; i++) if (partitionOf(`k${i}`, 16) === p) key = `k${i}`;
  const calls: Array<{ address: string; req: ExportRequest; metadata: grpc.Metadata; options: Partial<grpc.CallOptions> }> = [];
  const outcomes: PullOutcome[] = [];
  let now = 60_000;
  const pull = new ReadPull({
    ownership: o,
    windowMs: 30_000,
    timeoutMs: 2_000,
    describe: async () => ({ type: ObjectType.AWSET, ctx: new CausalContext() }),
    exportFrom: (address, req, metadata, options) => {
      calls.push({ address, req, metadata, options });
      return (async function* () {
        if (opts.fail?.has(address)) throw Object.assign(new Error("down"), { code: grpc.status.UNAVAILABLE });
        if (opts.notFound) throw Object.assign(new Error("absent"), { code: grpc.status.NOT_FOUND });
        yield { key } as ExportChunk;
      })();
    },
    apply: async (chunks) => {
      let n = 0;
      for await (const _ of chunks) n++;
      return n > 0;
    },
    log: quiet,
    onPull: (x) => outcomes.push(x),
    now: () => now,
  });
  return { o, p, key, pull, calls, outcomes, advance: (ms: number) => (now += ms), holder: o.ownersOf(p).find((id) => id !== "c")! };
}

describe("ReadPull", () => {
  it("fetches a key of a partition gained lately from its former holder, with the caller's token, once", async () => {
    const s = setup();
    await s.pull.before(s.key, ["Bearer t"], 61_000);
    assert.equal(s.calls.length, 1);
    assert.equal(s.calls[0]!.address, `${s.holder}:1`);
    assert.equal(s.calls[0]!.req.key, s.key);
    assert.ok(s.calls[0]!.req.since !== undefined, "a set's delta since what is here");
    assert.deepEqual(s.calls[0]!.metadata.get("authorization"), ["Bearer t"]);
    assert.equal(s.calls[0]!.metadata.get(READ_PULL).length, 1, "marked: the holder answers from what it holds");
    assert.equal(s.calls[0]!.options.deadline, 61_000, "the caller's deadline when sooner than the timeout");
    assert.deepEqual(s.outcomes, ["joined"]);
    // Fetched: the next read of the key does not fetch again.
    await s.pull.before(s.key, [], Infinity);
    assert.equal(s.calls.length, 1);
  });

  it("reads at once fetch once", async () => {
    const s = setup();
    await Promise.all([s.pull.before(s.key, []), s.pull.before(s.key, []), s.pull.before(s.key, [])]);
    assert.equal(s.calls.length, 1);
    assert.equal(s.calls[0]!.options.deadline, 62_000, "bounded by the timeout");
  });

  it("a holder that has nothing counts none; one that fails is passed over for a while, then asked again", async () => {
    const none = setup({ notFound: true });
    await none.pull.before(none.key, []);
    assert.deepEqual(none.outcomes, ["none"]);
    await none.pull.before(none.key, []);
    assert.equal(none.calls.length, 1);

    const down = setup();
    const failing = setup({ fail: new Set([`${down.holder}:1`]) });
    await failing.pull.before(failing.key, []);
    assert.deepEqual(failing.outcomes, ["failed"]);
    // Passed over for the timeout after it failed (a hung member must not hold every read), then asked again.
    await failing.pull.before(failing.key, []);
    assert.equal(failing.calls.length, 1, "passed over right after it failed");
    failing.advance(2_001);
    await failing.pull.before(failing.key, []);
    assert.equal(failing.calls.length, 2, "not remembered as fetched: asked again");
  });

  it("fetches nothing outside the window, once the holder sent the partition whole, or for a partition owned from before the window", async () => {
    const late = setup();
    late.advance(30_001 - 10_000); // now 80,001: the gain at 50,000 is older than the window
    await late.pull.before(late.key, []);
    assert.equal(late.calls.length, 0);

    const whole = setup();
    whole.o.receivedWhole(whole.p, whole.holder);
    await whole.pull.before(whole.key, []);
    assert.equal(whole.calls.length, 0);

    // A partition owned since the first view (t = 1 s), which a later change left with c.
    const s = setup();
    const old = s.o.owned().find((q) => s.o.gainedAt(q) === 1_000);
    assert.ok(old !== undefined);
    let key = "";
    for (let i = 0; key === ""; i++) if (partitionOf(`o${i}`, 16) === old) key = `o${i}`;
    await s.pull.before(key, []);
    assert.equal(s.calls.length, 0);
  });

  it("a fetch is itself never fetched for nor forwarded", () => {
    const md = new grpc.Metadata();
    assert.equal(ReadPull.isPull(md), false);
    md.set(READ_PULL, "c");
    assert.equal(ReadPull.isPull(md), true);
  });
});
