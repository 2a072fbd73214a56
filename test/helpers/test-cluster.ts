// A few real node processes on their own loopback addresses, each a seed of the others, with
// stable node ids and data directories so that a node can be killed and restarted as itself.
// Reads, writes and "wait until every node reads the same" for integration tests.
import { rmSync } from "node:fs";
import { join } from "node:path";
import type { ScanChunk } from "../../services/gen/deltaset/v1/replica.ts";
import type { CausalContext } from "../../services/gen/deltaset/v1/types.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { eventually } from "./eventually.ts";
import { type NodeProcess, startNodeProcess } from "./node-process.ts";

export class TestCluster {
  readonly nodes = new Map<number, NodeProcess>();

  /**
   * @param addresses one host:port per node (127.0.0.x)
   * @param flags node flags shared by all nodes
   */
  constructor(
    private readonly dir: string,
    readonly addresses: string[],
    private readonly flags: string[],
    readonly name = "t",
  ) {}

  dataDir(i: number): string {
    return join(this.dir, `${this.name}${i}`);
  }

  async start(i: number, extra: string[] = []): Promise<NodeProcess> {
    const seeds = this.addresses.filter((_, j) => j !== i).join(",");
    const n = await startNodeProcess(["--listen", this.addresses[i]!, "--node-id", `${this.name}${i}`, "--data-dir", this.dataDir(i), "--seeds", seeds, ...this.flags, ...extra]);
    this.nodes.set(i, n);
    return n;
  }

  async startAll(extra: string[] = []): Promise<void> {
    await Promise.all(this.addresses.map((_, i) => this.start(i, extra)));
  }

  async kill(i: number): Promise<void> {
    await this.nodes.get(i)?.kill();
    this.nodes.delete(i);
  }

  /** SIGKILL, lose the data directory, and come back at once under the same id and address. */
  async wipeAndRestart(i: number): Promise<NodeProcess> {
    await this.kill(i);
    rmSync(this.dataDir(i), { recursive: true, force: true });
    return this.start(i);
  }

  async close(): Promise<void> {
    await Promise.all([...this.nodes.keys()].map((i) => this.kill(i)));
  }

  /** Run fn with a Replica client of node i, closed afterwards. */
  async replica<T>(i: number, fn: (c: ReturnType<typeof replicaClient>) => Promise<T>): Promise<T> {
    const c = replicaClient(this.addresses[i]!);
    try {
      return await fn(c);
    } finally {
      c.close();
    }
  }

  async add(i: number, key: string, elements: string[]): Promise<void> {
    return this.replica(i, async (c) => {
      await call(c, c.add, { key, elements: elements.map((e) => Buffer.from(e)), texts: [] }, { timeoutMs: 10_000 });
    });
  }

  /** The key's context as node i reads it (for a Remove elsewhere). */
  async context(i: number, key: string): Promise<CausalContext | undefined> {
    return this.replica(i, async (c) => {
      const q = await call(c, c.query, { key, elements: [], texts: [], pageSize: 1, pageToken: Buffer.alloc(0), withText: false });
      return q.context;
    });
  }

  async remove(i: number, key: string, elements: string[], context?: CausalContext): Promise<{ removed: number; pending: number }> {
    return this.replica(i, (c) => call(c, c.remove, { key, elements: elements.map((e) => Buffer.from(e)), texts: [], context }));
  }

  async size(i: number, key: string): Promise<number> {
    return this.replica(i, async (c) => {
      const q = await call(c, c.query, { key, elements: [], texts: [], pageSize: 1, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs: 3000 });
      return Number(q.size);
    });
  }

  async read(i: number, key: string): Promise<string[]> {
    return this.replica(i, async (c) => {
      const out: string[] = [];
      for await (const ch of c.scan({ key, chunkSize: 5000, startAfter: Buffer.alloc(0), withText: false }) as AsyncIterable<ScanChunk>) {
        out.push(...ch.members.map((m) => m.element.toString()));
      }
      return out;
    });
  }

  /** Wait until nodes `on` read the same members of key (and `expected`, when given). */
  async converged(key: string, on: number[], expected?: string[], timeoutMs = 20_000): Promise<string[]> {
    const want = expected === undefined ? undefined : JSON.stringify([...expected].sort());
    let last: string[][] = [];
    // The failure message shows sizes and a few differences, not every member.
    const summary = async () => {
      last = await Promise.all(on.map((i) => this.read(i, key)));
      const all = new Set(last.flat());
      const missing = last.map((r) => [...all].filter((e) => !r.includes(e)).slice(0, 5));
      return { sizes: last.map((r) => r.length), missing, same: last.every((r) => JSON.stringify(r) === JSON.stringify(last[0])), matches: want === undefined || JSON.stringify(last[0]) === want };
    };
    await eventually(`identical reads of "${key}" on nodes ${on.join(",")}`, summary, (s) => s.same && s.matches, timeoutMs, () => this.dumpLogs());
    return last[0]!;
  }

  dumpLogs(): void {
    for (const [i, n] of this.nodes) process.stderr.write(`--- ${this.name}${i} log (last 25 lines)\n${n.logs().split("\n").slice(-25).join("\n")}\n`);
  }
}
