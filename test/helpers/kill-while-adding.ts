// One round of a crash test: a node process starts, `workers` clients add single elements to key
// (one call each, in a loop), and once `atLeast` adds were acknowledged (or 30 s passed) and a
// random further delay (up to 700 ms) elapsed, the node is SIGKILLed. The acknowledged elements
// are appended to `acked`; an add whose call failed was never acknowledged and is not.
import { call, replicaClient } from "../../services/client/rpc.ts";
import { startNodeProcess } from "./node-process.ts";

export async function killWhileAdding(o: {
  args: string[];
  key: string;
  workers: number;
  atLeast: number;
  /** A number in [0, 1) for the delay before the kill. */
  random: () => number;
  /** The name of the n-th element of worker w. */
  element: (w: number, n: number) => Buffer;
  acked: Buffer[];
}): Promise<void> {
  const node = await startNodeProcess(o.args);
  const client = replicaClient(node.address);
  let killed = false;
  const worker = async (w: number) => {
    for (let n = 0; !killed && n < 100_000; n++) {
      const el = o.element(w, n);
      try {
        await call(client, client.add, { key: o.key, elements: [el], texts: [] }, { timeoutMs: 5000 });
        o.acked.push(el);
      } catch {
        return; // the node died under us: this add was never acknowledged
      }
    }
  };
  const before = o.acked.length;
  const workers = Array.from({ length: o.workers }, (_, w) => worker(w));
  // Kill at a random moment once writes are flowing (a loaded machine starts slowly).
  for (let waited = 0; o.acked.length - before < o.atLeast && waited < 30_000; waited += 50) await new Promise((r) => setTimeout(r, 50));
  await new Promise((r) => setTimeout(r, o.random() * 700));
  killed = true;
  await node.kill();
  await Promise.all(workers);
  client.close();
}
