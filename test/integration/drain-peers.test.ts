// A node that drains on SIGTERM keeps answering its peers: while a client call still runs, new
// client calls are refused with UNAVAILABLE, the other node never suspects it (its pings are
// answered), and once the drain time runs out the running call is cut with UNAVAILABLE and the
// node leaves and exits 0, even when it got SIGTERM twice. Before, the drain stopped every call, peers' pings included, and the
// cluster flapped the node between suspect and alive for the whole drain.
import { strict as assert } from "node:assert";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { MemberState } from "../../services/gen/deltaset/v1/membership.ts";
import { call, membershipClient, replicaClient } from "../../services/client/rpc.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { eventually } from "../helpers/eventually.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-drain-peers-"));
// Probe timeouts loose enough that a loaded machine does not suspect a node that answers (a 400 ms
// timeout once expired under CI's load), yet a node that answers nothing is suspected within
// interval + timeout + indirect timeout = 2.2 s, well inside the 3.5 s watched below.
const FAST = [
  "--probe-interval-ms", "1000", "--probe-timeout-ms", "900", "--indirect-timeout-ms", "300",
  "--gossip-interval-ms", "100", "--drain-timeout-ms", "6000",
];
const c = new TestCluster(dir, ["127.0.2.71:7971", "127.0.2.72:7972"], FAST, "dp");

after(async () => {
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

/** How node 0 sees node dp1 now. */
async function seenByOther(): Promise<string> {
  const m = membershipClient(c.addresses[0]!);
  try {
    const r = await call(m, m.members, { includeDeparted: true }, { timeoutMs: 2000 });
    const x = r.members.find((mm) => mm.nodeId === "dp1");
    return x === undefined ? "absent" : MemberState[x.state]!;
  } finally {
    m.close();
  }
}

describe("draining on SIGTERM", () => {
  it("answers peers while client calls finish, refuses new client calls, then cuts what still runs and leaves", { timeout: 60_000 }, async () => {
    await c.startAll();
    await eventually("both alive", () => seenByOther(), (s) => s === "ALIVE", 20_000);
    const node = c.nodes.get(1)!;
    // A client call that does not end by itself: an AddStream with one batch sent, never closed.
    const r = replicaClient(c.addresses[1]!);
    const stream = r.addStream();
    const streamEnded = new Promise<grpc.ServiceError | undefined>((resolve) => {
      stream.on("error", (e: grpc.ServiceError) => resolve(e));
      stream.on("end", () => resolve(undefined));
      stream.on("data", () => {});
    });
    stream.write({ key: "drain", elements: [Buffer.from("a")], texts: [], seq: 1n });
    await eventually("the batch is acknowledged", async () => (await call(r, r.query, { key: "drain", elements: [Buffer.from("a")], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false })).presence[0]?.present, (p) => p === true, 10_000);

    const exited = once(node.child, "exit");
    node.child.kill("SIGTERM");
    // A second SIGTERM (an impatient supervisor) does not cut the drain or the leave short.
    setTimeout(() => node.child.kill("SIGTERM"), 300);
    // During the drain: new client calls are refused, and the other node keeps seeing it alive.
    const states = new Set<string>();
    let refused: grpc.ServiceError | undefined;
    const until = Date.now() + 3500;
    while (Date.now() < until) {
      states.add(await seenByOther());
      if (refused === undefined) {
        const q = replicaClient(c.addresses[1]!);
        refused = await call(q, q.query, { key: "drain", elements: [Buffer.from("a")], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs: 2000 }).then(
          () => undefined,
          (e: grpc.ServiceError) => e,
        );
        q.close();
      }
      await new Promise((res) => setTimeout(res, 100));
    }
    assert.deepEqual([...states], ["ALIVE"], "the node was suspected while it drained");
    assert.equal(refused?.code, grpc.status.UNAVAILABLE, `${refused?.code} ${refused?.details}`);
    assert.match(refused!.details, /node is stopping/);

    // The drain time runs out: the call still running is cut with UNAVAILABLE, and the node leaves.
    const cut = await streamEnded;
    assert.equal(cut?.code, grpc.status.UNAVAILABLE, `${cut?.code} ${cut?.details}`);
    assert.match(cut!.details, /drain time \(--drain-timeout-ms\) ran out/);
    const [code] = (await exited) as [number | null];
    assert.equal(code, 0);
    assert.match(node.logs(), /"drain":"forced"/);
    await eventually("the other node saw it leave", () => seenByOther(), (s) => s === "LEFT", 10_000);
    c.nodes.delete(1);
    r.close();
  });
});
