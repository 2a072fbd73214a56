// Two live processes under one node id (each with its own data directory here; a copied directory
// started beside its original is the same case, with the same replica id too): they refute each
// other for ever, so each notices, logs an error naming the other's address, counts it, and draws
// a new replica id, so the dots they mint from then on differ. Three real node processes. And the
// one left when the other stops ends with every write acknowledged through the other, without a
// restart: a peer that heard last from the other process credited the id with what it took.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { eventually } from "../helpers/eventually.ts";
import { type NodeProcess, startNodeProcess } from "../helpers/node-process.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-dup-id-"));
const nodes: NodeProcess[] = [];
after(async () => {
  for (const n of nodes) await n.stop();
  rmSync(dir, { recursive: true, force: true });
});

const FLAGS = ["--probe-interval-ms", "200", "--probe-timeout-ms", "150", "--gossip-interval-ms", "200"];
const start = async (host: string, id: string, seeds: string) => {
  const n = await startNodeProcess(["--listen", `${host}:7851`, "--node-id", id, "--data-dir", join(dir, `${id}-${host}`), "--seeds", seeds, "--metrics-listen", `${host}:9465`, ...FLAGS]);
  nodes.push(n);
  return n;
};

describe("two live processes with one node id", () => {
  it("each logs an error naming the other and draws a new replica id", { timeout: 60_000 }, async () => {
    const solo = await start("127.0.5.81", "solo", "127.0.5.82:7851");
    const first = await start("127.0.5.82", "twin", "127.0.5.81:7851");
    const second = await start("127.0.5.83", "twin", "127.0.5.81:7851");
    const conflict = /another live process runs with this node's id/;
    await eventually("both twins report the other", async () => [first.logs(), second.logs()], ([a, b]) => conflict.test(a!) && conflict.test(b!), 30_000);
    assert.match(first.logs(), /"address":"127\.0\.5\.83:7851"/);
    assert.match(second.logs(), /"address":"127\.0\.5\.82:7851"/);
    assert.doesNotMatch(solo.logs(), conflict);
    const contests = async (host: string) => Number(/^deltaset_membership_identity_contests_total\S* (\d+)/m.exec(await (await fetch(`http://${host}:9465/metrics`)).text())?.[1] ?? -1);
    await eventually("the twins count the contests", async () => [await contests("127.0.5.82"), await contests("127.0.5.83"), await contests("127.0.5.81")], ([a, b, c]) => a! >= 1 && b! >= 1 && c === 0, 10_000);
    await eventually("both drew a new replica id", async () => [first.logs(), second.logs()], ([a, b]) => /new replica id after an identity conflict/.test(a!) && /new replica id after an identity conflict/.test(b!), 10_000);
  });

  it("the process left ends with every write made through the other, without a restart", { timeout: 90_000 }, async () => {
    const peer = await start("127.0.5.84", "peer", "127.0.5.85:7851");
    const original = await start("127.0.5.85", "dup", "127.0.5.84:7851");
    const clientOf = (n: NodeProcess) => replicaClient(n.address);
    const add = (n: NodeProcess, text: string) => {
      const c = clientOf(n);
      return call(c, c.add, { key: "dup/k", elements: [], texts: [text] }).finally(() => c.close());
    };
    const members = async (n: NodeProcess) => {
      const c = clientOf(n);
      try {
        const r = await call(c, c.query, { key: "dup/k", elements: [], texts: [], pageSize: 10_000, pageToken: Buffer.alloc(0), withText: true });
        return new Set(r.members.map((m) => m.text));
      } finally {
        c.close();
      }
    };
    const acked: string[] = [];
    for (let i = 0; i < 10; i++) acked.push((await add(original, `o${i}`), `o${i}`));
    await eventually("the peer holds the original's adds", () => members(peer), (m) => acked.every((e) => m.has(e)));
    // The second process writes until it is killed; the original stays quiet meanwhile.
    const second = await start("127.0.5.86", "dup", "127.0.5.84:7851");
    await eventually("the contest is seen", async () => original.logs(), (l) => /another live process runs with this node's id/.test(l), 30_000);
    for (let i = 0; i < 60; i++) {
      acked.push((await add(second, `s${i}`), `s${i}`));
      await new Promise((r) => setTimeout(r, 30));
    }
    // Every add has reached the peer (an add the killed process alone held would stay on its disk).
    await eventually("the peer holds every acknowledged add", () => members(peer), (m) => acked.every((e) => m.has(e)));
    await second.kill();
    const missing = async () => {
      const m = await members(original);
      return acked.filter((e) => !m.has(e));
    };
    await eventually("the original holds every acknowledged add", missing, (m) => m.length === 0, 30_000);
    assert.deepEqual(await missing(), []);
  });
});
