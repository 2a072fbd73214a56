// Convergence under any mix of crashes, wiped data directories and dropped partitions, over a
// lossy, duplicating, reordering network, for every sync configuration a node can run: once the
// faults stop, every replica holds the same state, and that state is the add-wins result of the
// operations whose effects cannot have been lost. An operation taken at a node that later lost
// its data (a wipe, or a drop of the key's partition) may or may not have left before; an element
// whose fate depends only on such operations is not judged, every other one is.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { type AWSet, dotKey } from "../../services/crdt/index.js";
import {
  type Algorithm1Config,
  type Algorithm2Config,
  GossipSimulation,
  NO_FAULTS,
  pick,
  randomConnectedTopology,
  seededRandom,
} from "../../services/gossip/index.js";

const KEYS = ["k0", "k1", "k2", "k3", "k4"];
const ELEMENTS = ["a", "b", "c", "d", "e", "f"];
const PARTITIONS = 4;

/** One operation's delta, who took it and when (a running count). */
interface Op {
  node: string;
  key: string;
  at: number;
  delta: AWSet;
}

/**
 * The add-wins oracle. A dot is dead once an operation that cannot have been lost observed it
 * without keeping it; live when minted by such an operation and observed by none; otherwise
 * unknown. An element is expected present when one of its dots is live, absent when all are dead.
 */
class Oracle {
  private readonly ops: Op[] = [];
  /** node → key partition → the time its data there was last lost (wipe: every partition). */
  private readonly lost = new Map<string, Map<number, number>>();

  constructor(private readonly partitionOf: (key: string) => number) {}

  record(op: Op): void {
    this.ops.push(op);
  }

  lose(node: string, at: number, partitions: readonly number[]): void {
    const m = this.lost.get(node) ?? new Map<number, number>();
    for (const p of partitions) m.set(p, at);
    this.lost.set(node, m);
  }

  private durable(op: Op): boolean {
    const at = this.lost.get(op.node)?.get(this.partitionOf(op.key));
    return at === undefined || at < op.at;
  }

  /** key → element → true (present), false (absent); elements left undecided are not listed. */
  expected(key: string): Map<string, boolean> {
    const dots = new Map<string, { element: string; minted: boolean }>(); // dot → element, minted durably
    const dead = new Map<string, boolean>(); // dot → observed by a durable op (true) or only by others
    for (const op of this.ops.filter((o) => o.key === key)) {
      const sure = this.durable(op);
      const kept = new Set<string>();
      for (const [el, ds] of op.delta.entries) {
        for (const d of ds) {
          kept.add(dotKey(d));
          dots.set(dotKey(d), { element: Buffer.from(el, "latin1").toString(), minted: sure });
        }
      }
      for (const d of op.delta.ctx.dots()) {
        const k = dotKey(d);
        if (!kept.has(k)) dead.set(k, (dead.get(k) ?? false) || sure);
      }
    }
    const verdicts = new Map<string, Array<"live" | "dead" | "unknown">>();
    for (const [d, { element, minted }] of dots) {
      const v = dead.get(d) === true ? "dead" : dead.has(d) || !minted ? "unknown" : "live";
      verdicts.set(element, [...(verdicts.get(element) ?? []), v]);
    }
    const out = new Map<string, boolean>();
    for (const [el, vs] of verdicts) {
      if (vs.includes("live")) out.set(el, true);
      else if (vs.every((v) => v === "dead")) out.set(el, false);
    }
    return out;
  }
}

const syncs: ReadonlyArray<Algorithm1Config | Algorithm2Config> = [
  { algorithm: 2, bp: true, rr: true },
  { algorithm: 2, bp: true, rr: false },
  { algorithm: 2, bp: false, rr: true },
  { algorithm: 2, bp: true, rr: true, fanout: "all", maxBufferBytes: 200 },
  { algorithm: 1, transitive: true, choose: "delta+periodic-state", statePeriod: 4 },
];

describe("convergence under crashes, wipes and partition drops (simulation, any schedule)", () => {
  it("every replica converges to the add-wins result of what could not have been lost", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 2 ** 31 }),
        fc.integer({ min: 3, max: 5 }),
        fc.constantFrom(...syncs),
        fc.constantFrom(64, 512, undefined),
        fc.boolean(),
        fc.constantFrom(undefined, 300),
        // Contexts answers of a key or two a page (catch-up.ts paging), or whole.
        fc.constantFrom(undefined, 90),
        async (seed, nodes, sync, stateStreamBytes, faulty, maxMessageBytes, contextsReplyBytes) => {
          const random = seededRandom(seed);
          const ids = Array.from({ length: nodes }, (_, i) => `n${i}`);
          const topology = new Map(randomConnectedTopology(random, ids, 2));
          const faults = faulty ? { drop: 0.2, duplicate: 0.1, minDelay: 0, maxDelay: 1500 } : NO_FAULTS;
          const sim = await GossipSimulation.create({ topology, sync, partitions: PARTITIONS, seed, faults, stateChunkEntries: 2, stateStreamBytes, maxMessageBytes, contextsReplyBytes });
          const oracle = new Oracle((k) => sim.partitionOf(k));
          let at = 0;
          try {
            for (let round = 0; round < 20; round++) {
              for (let i = 0; i < 3; i++) {
                const node = pick(random, ids);
                const key = pick(random, KEYS);
                const el = [Buffer.from(pick(random, ELEMENTS))];
                const delta = random() < 0.7 ? await sim.add(node, key, el) : await sim.remove(node, key, el);
                oracle.record({ node, key, at: at++, delta });
              }
              const fault = random();
              const victim = pick(random, ids);
              if (fault < 0.12) await sim.restart(victim);
              else if (fault < 0.22) {
                await sim.restart(victim, { wipe: true });
                oracle.lose(victim, at++, Array.from({ length: PARTITIONS }, (_, p) => p));
              } else if (fault < 0.3) {
                const p = Math.floor(random() * PARTITIONS);
                await sim.dropPartition(victim, p);
                oracle.lose(victim, at++, [p]);
              }
              await sim.step();
            }
            sim.setFaults(NO_FAULTS);
            assert.notEqual(await sim.runUntilConverged(120), -1, "replicas differ 120 fault-free periods after the faults stopped");
            let judged = 0;
            for (const key of KEYS) {
              for (const [el, present] of oracle.expected(key)) {
                judged++;
                for (const id of ids) {
                  assert.equal((await sim.elementsOf(id, key)).includes(el), present, `${id} ${key} ${el}: expected ${present ? "present" : "absent"}`);
                }
              }
            }
            assert.ok(judged > 0, "no element could be judged");
          } finally {
            await sim.close();
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
