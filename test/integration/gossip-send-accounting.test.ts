// Under load, a node builds and counts only the gossip it sends. Three real node processes
// (Algorithm 2 + BP + RR, 50 ms periods) take batch Adds through every node as fast as they answer,
// which keeps exchanges running longer than a period; then the cluster settles. Every delta byte a
// node counts as sent must have been received by a peer (no loss here): the bytes sent and received
// over the cluster agree, and every node reads the same set.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { call } from "../../services/client/rpc.ts";
import { eventually } from "../helpers/eventually.ts";
import { TestCluster } from "../helpers/test-cluster.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-send-accounting-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const METRICS = [1, 2, 3].map((i) => `127.0.0.${190 + i}:7772`);

async function gossipTotals(): Promise<{ sent: number; received: number; lagging: number; busySkips: number; alive: number; oldestAge: number }> {
  const out = { sent: 0, received: 0, lagging: 0, busySkips: 0, alive: 0, oldestAge: 0 };
  for (const m of METRICS) {
    const text = await (await fetch(`http://${m}/metrics`)).text();
    const value = (re: RegExp) => Number(re.exec(text)?.[1] ?? 0);
    out.sent += value(/^deltaset_gossip_sent_bytes_total\{kind="delta"\} (\S+)$/m);
    out.received += value(/^deltaset_gossip_received_bytes_total\{kind="delta"\} (\S+)$/m);
    out.lagging += value(/^deltaset_gossip_lagging_partitions (\S+)$/m);
    out.busySkips += value(/^deltaset_gossip_transport_events_total\{event="busy_skips"\} (\S+)$/m);
    out.alive += value(/^deltaset_members\{state="alive"\} (\S+)$/m);
    const age = /^deltaset_gossip_oldest_unacked_seconds (\S+)$/m.exec(text)?.[1];
    assert.ok(age !== undefined, `no deltaset_gossip_oldest_unacked_seconds on ${m}`);
    out.oldestAge = Math.max(out.oldestAge, age === "+Inf" ? Infinity : Number(age));
  }
  return out;
}

describe("gossip sends are counted only when sent (3 real nodes under batch load)", () => {
  it("bytes sent = bytes received once settled, with periods that found a peer busy", { timeout: 120_000 }, async () => {
    const c = new TestCluster(dir, [1, 2, 3].map((i) => `127.0.0.${190 + i}:7771`), ["--gossip-interval-ms", "50", "--probe-interval-ms", "300", "--probe-timeout-ms", "150"], "g");
    try {
      await Promise.all([0, 1, 2].map((i) => c.start(i, ["--metrics-listen", METRICS[i]!])));
      await eventually("every node sees 3 alive members", gossipTotals, (t) => t.alive === 9);
      const clients = [0, 1, 2];
      let n = 0;
      const end = Date.now() + 6000;
      // Under load the cluster has lagging partitions; the age of the oldest unacknowledged change
      // says how far back that lag goes (sampled while the writers run).
      const samples: Array<{ lagging: number; oldestAge: number }> = [];
      const sampling = (async () => {
        while (Date.now() < end) {
          const t = await gossipTotals();
          samples.push({ lagging: t.lagging, oldestAge: t.oldestAge });
          await new Promise((r) => setTimeout(r, 200));
        }
      })();
      await Promise.all(
        Array.from({ length: 12 }, async (_, w) => {
          for (let i = 0; Date.now() < end && i < 400; i++) {
            const node = clients[(w + i) % 3]!;
            const elements = Array.from({ length: 200 }, (_, e) => Buffer.from(`w${w}-${i}-${e}`));
            await c.replica(node, (r) => call(r, r.add, { key: `s${(w + i) % 8}`, elements, texts: [] }, { timeoutMs: 20_000 }));
            n++;
          }
        }),
      );
      await sampling;
      assert.ok(n > 30, `${n} batch adds`);
      assert.ok(
        samples.some((s) => s.lagging > 0 && s.oldestAge > 0),
        `some sample under load saw lag and its age: ${JSON.stringify(samples)}`,
      );
      const settled = await eventually("every partition acknowledged by every neighbour", gossipTotals, (t) => t.lagging === 0, 60_000, () => c.dumpLogs());
      assert.equal(settled.oldestAge, 0, "nothing unacknowledged: no age");
      // Give the last replies a moment: received is counted when a frame is decoded, sent when built.
      const t = await eventually("sent and received agree", gossipTotals, (x) => x.sent === x.received, 10_000);
      assert.equal(t.sent, t.received, JSON.stringify({ settled, t }));
      assert.ok(t.sent > 0);
      for (let k = 0; k < 8; k++) await c.converged(`s${k}`, [0, 1, 2], undefined, 30_000);

      // Full-state bytes, counted on both sides: a node that lost its data gets every partition
      // back by state streams, and what the others count as sent it counts as received.
      const stateBytes = async (i: number, dir: "sent" | "received") =>
        Number(new RegExp(`^deltaset_gossip_${dir}_bytes_total\\{kind="state"\\} (\\S+)$`, "m").exec(await (await fetch(`http://${METRICS[i]}/metrics`)).text())?.[1] ?? 0);
      const sentBefore = (await stateBytes(0, "sent")) + (await stateBytes(1, "sent"));
      await c.kill(2);
      rmSync(c.dataDir(2), { recursive: true, force: true });
      await c.start(2, ["--metrics-listen", METRICS[2]!]);
      for (let k = 0; k < 8; k++) await c.converged(`s${k}`, [0, 1, 2], undefined, 30_000);
      const state = await eventually(
        "state bytes received = sent",
        async () => ({ sent: (await stateBytes(0, "sent")) + (await stateBytes(1, "sent")) - sentBefore, received: await stateBytes(2, "received") }),
        (x) => x.received > 0 && x.received === x.sent,
        20_000,
      );
      assert.ok(state.received > 0, JSON.stringify(state));
    } finally {
      await c.close();
    }
  });
});
