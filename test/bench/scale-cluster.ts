// The real-cluster part of bench:scale: node processes on loopback with --replication-factor 3.
//  - Hand-off on a join: 8 nodes hold KEYS sets of equal size; a ninth joins; once every key is
//    held by exactly its owners again, the share of key copies that moved to the new node (ideal:
//    1/9) and the bytes the displaced owners dropped (deltaset_handoff_events).
//  - Throughput: batch Adds from concurrent callers spread over the 9 nodes (each call to any
//    node; a non-owner forwards it), against the same client on a single node, in the same run,
//    with the CPU every node process used per acknowledged element: on one host all 9 nodes share
//    its cores, so the throughput ratio is bounded by the CPU ratio; the CPU per element says what
//    9 hosts would carry.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { call, membershipClient, replicaClient } from "../../services/client/rpc.ts";
import { MemberState } from "../../services/gen/deltaset/v1/membership.ts";
import { cpuSecondsOf } from "../../services/chaos/eval/counters.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { eventually } from "../helpers/eventually.ts";
import { localKeys, placedOnOwners } from "../helpers/placement.ts";

const NODES = 9;
const ADDRS = Array.from({ length: NODES }, (_, i) => `127.0.5.${31 + i}:7810`);
const METRICS = Array.from({ length: NODES }, (_, i) => `127.0.5.${31 + i}:7812`);
const SINGLE = "127.0.5.40:7811";
const FLAGS = ["--partitions", "256", "--gossip-interval-ms", "200", "--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--log-level", "warn"];

export interface JoinMove {
  nodesBefore: number;
  keys: number;
  elementsPerKey: number;
  copiesBefore: number;
  /** Key copies the new node holds once placement settled (what moved to it). */
  copiesMoved: number;
  /** copiesMoved / total copies; ideal 1/(N+1). */
  movedShare: number;
  ideal: number;
  /** Keys and bytes the displaced owners dropped after the new node acknowledged them. */
  keysDropped: number;
  bytesDropped: number;
  /** ms from the join until every key was held by exactly its owners. */
  settleMs: number;
}

export interface Throughput {
  setup: string;
  nodes: number;
  callers: number;
  batch: number;
  seconds: number;
  calls: number;
  failed: number;
  elementsPerSecond: number;
  /** CPU the node processes used over the load (all of them, user + system), ms per second. */
  nodeCpuMsPerSecond: number;
  /** CPU of the load generator (this process) over the load, ms per second. */
  clientCpuMsPerSecond: number;
  /** Node CPU per acknowledged element (µs), summed over every node that stored or forwarded it. */
  nodeCpuUsPerElement: number;
}

/** CPU seconds used so far by the node processes of c. */
async function nodesCpu(c: TestCluster, nodes: number[]): Promise<number> {
  let total = 0;
  for (const i of nodes) total += (await cpuSecondsOf(c.nodes.get(i)?.child.pid)) ?? Number.NaN;
  return total;
}

async function handOffCounter(metrics: string, event: string): Promise<number> {
  const text = await (await fetch(`http://${metrics}/metrics`)).text();
  const m = new RegExp(`^deltaset_handoff_events_total\\{[^}]*event="${event}"[^}]*\\} ([0-9.e+]+)`, "m").exec(text);
  return m === null ? 0 : Number(m[1]);
}

/** Wait until every node of `nodes` sees exactly `size` live members (itself included). */
export async function membersAgree(c: TestCluster, nodes: number[], size: number): Promise<void> {
  await eventually(
    `${size} live members seen by every node`,
    async () =>
      Promise.all(
        nodes.map(async (i) => {
          const m = membershipClient(c.addresses[i]!);
          try {
            const res = await call(m, m.members, { includeDeparted: false }, { timeoutMs: 3000 });
            return res.members.filter((x) => x.state === MemberState.ALIVE || x.state === MemberState.SUSPECT).length;
          } finally {
            m.close();
          }
        }),
      ),
    (v) => v.every((n) => n === size),
    30_000,
  );
}

/** Concurrent callers each sending batch Adds round-robin over the addresses for `seconds`. */
async function load(c: TestCluster, nodes: number[], callers: number, batch: number, seconds: number, setup: string): Promise<Throughput> {
  const clients = nodes.map((i) => replicaClient(c.addresses[i]!));
  const end = Date.now() + seconds * 1000;
  let calls = 0;
  let failed = 0;
  let seq = 0;
  const cpu0 = await nodesCpu(c, nodes);
  const client0 = process.cpuUsage();
  const started = performance.now();
  try {
    await Promise.all(
      Array.from({ length: callers }, async (_, w) => {
        for (let n = 0; Date.now() < end && n < 1_000_000; n++) {
          const r = clients[(w + n) % clients.length]!;
          const s = seq++;
          const elements = Array.from({ length: batch }, (_, e) => Buffer.from(`w${w}-${n}-${e}`));
          try {
            await call(r, r.add, { key: `tp${s % 512}`, elements, texts: [] }, { timeoutMs: 10_000 });
            calls++;
          } catch {
            failed++;
          }
        }
      }),
    );
  } finally {
    for (const r of clients) r.close();
  }
  const elapsed = (performance.now() - started) / 1000;
  const nodeCpu = (await nodesCpu(c, nodes)) - cpu0;
  const client = process.cpuUsage(client0);
  return {
    setup,
    nodes: nodes.length,
    callers,
    batch,
    seconds,
    calls,
    failed,
    elementsPerSecond: (calls * batch) / seconds,
    nodeCpuMsPerSecond: (nodeCpu * 1000) / elapsed,
    clientCpuMsPerSecond: (client.user + client.system) / 1000 / elapsed,
    nodeCpuUsPerElement: (nodeCpu * 1e6) / Math.max(1, calls * batch),
  };
}

export async function runScaleCluster(opts: { keys: number; elementsPerKey: number; seconds: number; callers: number; batch: number }): Promise<{ join: JoinMove; throughput: Throughput[] }> {
  const dir = mkdtempSync(join(tmpdir(), "deltaset-scale-cluster-"));
  const c = new TestCluster(dir, ADDRS, [...FLAGS, "--replication-factor", "3"], "s");
  const single = new TestCluster(dir, [SINGLE], [...FLAGS, "--replication-factor", "3"], "one");
  try {
    const first = Array.from({ length: NODES - 1 }, (_, i) => i);
    await Promise.all(first.map((i) => c.start(i, ["--metrics-listen", METRICS[i]!])));
    await membersAgree(c, first, NODES - 1);
    const keys = Array.from({ length: opts.keys }, (_, k) => `m${k}`);
    for (const [k, key] of keys.entries()) {
      const elements = Array.from({ length: opts.elementsPerKey }, (_, e) => Buffer.from(`${key}-element-${e}`));
      await c.replica(k % first.length, (r) => call(r, r.add, { key, elements, texts: [] }, { timeoutMs: 10_000 }));
    }
    await placedOnOwners(c, first, keys, 3, 120_000);
    const copiesBefore = (await Promise.all(first.map((i) => localKeys(c, i)))).reduce((n, s) => n + [...s].filter((k) => k.startsWith("m")).length, 0);
    const droppedBefore = { keys: 0, bytes: 0 };
    for (const i of first) {
      droppedBefore.keys += await handOffCounter(METRICS[i]!, "keys_dropped");
      droppedBefore.bytes += await handOffCounter(METRICS[i]!, "bytes_dropped");
    }
    const joinedAt = Date.now();
    await c.start(NODES - 1, ["--metrics-listen", METRICS[NODES - 1]!]);
    const all = [...first, NODES - 1];
    await placedOnOwners(c, all, keys, 3, 180_000);
    const settleMs = Date.now() - joinedAt;
    const moved = [...(await localKeys(c, NODES - 1))].filter((k) => k.startsWith("m")).length;
    let keysDropped = -droppedBefore.keys;
    let bytesDropped = -droppedBefore.bytes;
    for (const i of first) {
      keysDropped += await handOffCounter(METRICS[i]!, "keys_dropped");
      bytesDropped += await handOffCounter(METRICS[i]!, "bytes_dropped");
    }
    const joinMove: JoinMove = {
      nodesBefore: NODES - 1,
      keys: opts.keys,
      elementsPerKey: opts.elementsPerKey,
      copiesBefore,
      copiesMoved: moved,
      movedShare: moved / copiesBefore,
      ideal: 1 / NODES,
      keysDropped,
      bytesDropped,
      settleMs,
    };
    console.log(JSON.stringify({ join: joinMove }));
    const throughput: Throughput[] = [];
    throughput.push(await load(c, all, opts.callers, opts.batch, opts.seconds, `${NODES} nodes, R = 3, calls spread over every node`));
    console.log(JSON.stringify(throughput.at(-1)));
    await c.close();
    await single.start(0);
    throughput.push(await load(single, [0], opts.callers, opts.batch, opts.seconds, "a single node"));
    console.log(JSON.stringify(throughput.at(-1)));
    return { join: joinMove, throughput };
  } finally {
    await c.close();
    await single.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
