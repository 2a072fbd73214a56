// In-process simulation: 50 replicas on a random connected overlay (average degree 4), real
// engines and AWSet lattices, 30% message loss, duplication and reordering while random adds
// and removes happen; then the faults stop and every replica must converge within a bounded
// number of periods, to the add-wins result computed independently from the operations.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { type AWSet, ObjectType, dotKey, operationsFor } from "../../services/crdt/index.js";
import {
  type Algorithm1Config,
  type Algorithm2Config,
  GossipSimulation,
  NO_FAULTS,
  isConnected,
  pick,
  randomConnectedTopology,
  randomInt,
  seededRandom,
} from "../../services/gossip/index.js";

const NODES = 50;
const KEYS = ["k0", "k1", "k2", "k3", "k4", "k5"];
const ELEMENTS = Array.from({ length: 12 }, (_, i) => `e${i}`);
const OP_ROUNDS = 30;
const OPS_PER_ROUND = 6;
const MAX_QUIET_ROUNDS = 300;
const FAULTS = { drop: 0.3, duplicate: 0.1, minDelay: 0, maxDelay: 2500 }; // period 1000: reordering

/**
 * Add-wins reference: an element is in the final set iff one of its add dots was never
 * observed by a later operation (a remove observing it, or a re-add superseding it).
 * Built from the deltas the operations produced, without any join.
 */
class Reference {
  private readonly adds = new Map<string, Map<string, string[]>>(); // key → element → dots
  private readonly dead = new Set<string>(); // "key dot": dots are minted per key

  record(key: string, delta: AWSet): void {
    const live = new Set<string>();
    for (const [el, dots] of delta.entries) {
      const perKey = this.adds.get(key) ?? new Map<string, string[]>();
      this.adds.set(key, perKey);
      for (const d of dots) {
        live.add(dotKey(d));
        perKey.set(el, [...(perKey.get(el) ?? []), dotKey(d)]);
      }
    }
    for (const d of delta.ctx.dots()) if (!live.has(dotKey(d))) this.dead.add(`${key} ${dotKey(d)}`);
  }

  /** Elements added at some point, present or not. */
  added(key: string): string[] {
    return [...(this.adds.get(key)?.keys() ?? [])].sort();
  }

  elements(key: string): string[] {
    const out: string[] = [];
    for (const [el, dots] of this.adds.get(key) ?? []) if (dots.some((d) => !this.dead.has(`${key} ${d}`))) out.push(el);
    return out.sort();
  }
}

interface Scenario {
  name: string;
  sync: Algorithm1Config | Algorithm2Config;
  seed: number;
  /** Restart this many random nodes (volatile engine state lost) during the faulty phase. */
  restarts?: number;
  /** Move this many random edges during the faulty phase (membership changes). */
  rewires?: number;
}

async function simulate(s: Scenario) {
  const random = seededRandom(s.seed);
  const ids = Array.from({ length: NODES }, (_, i) => `n${String(i).padStart(2, "0")}`);
  const topology = new Map(randomConnectedTopology(random, ids, 4));
  assert.ok(isConnected(topology));
  const sim = await GossipSimulation.create({ topology, sync: s.sync, partitions: 4, seed: s.seed, faults: FAULTS, period: 1000 });
  const ref = new Reference();
  const restartAt = new Set(Array.from({ length: s.restarts ?? 0 }, () => randomInt(random, OP_ROUNDS)));
  const rewireAt = new Set(Array.from({ length: s.rewires ?? 0 }, () => randomInt(random, OP_ROUNDS)));

  for (let round = 0; round < OP_ROUNDS; round++) {
    for (let i = 0; i < OPS_PER_ROUND; i++) {
      const id = pick(random, ids);
      const key = pick(random, KEYS);
      const el = Buffer.from(pick(random, ELEMENTS));
      ref.record(key, random() < 0.65 ? await sim.add(id, key, [el]) : await sim.remove(id, key, [el]));
    }
    if (restartAt.has(round)) await sim.restart(pick(random, ids));
    if (rewireAt.has(round)) rewire(topology, sim, random);
    await sim.step();
  }
  sim.setFaults(NO_FAULTS);
  const quietRounds = await sim.runUntilConverged(MAX_QUIET_ROUNDS);
  return { sim, ref, quietRounds, ids };
}

/** Move one edge (a–b becomes a–c), keeping the overlay connected; both ends learn of it. */
function rewire(topology: Map<string, readonly string[]>, sim: GossipSimulation, random: () => number): void {
  const ids = [...topology.keys()];
  for (let attempt = 0; attempt < 20; attempt++) {
    const a = pick(random, ids);
    const b = pick(random, topology.get(a)!);
    const c = pick(random, ids);
    if (c === a || topology.get(a)!.includes(c)) continue;
    const next = new Map(topology);
    next.set(a, [...next.get(a)!.filter((x) => x !== b), c].sort());
    next.set(b, next.get(b)!.filter((x) => x !== a));
    next.set(c, [...next.get(c)!, a].sort());
    if (!isConnected(next)) continue;
    for (const id of [a, b, c]) {
      topology.set(id, next.get(id)!);
      sim.setNeighbours(id, next.get(id)!);
    }
    return;
  }
}

async function assertConverged(r: Awaited<ReturnType<typeof simulate>>): Promise<void> {
  const { sim, ref, quietRounds, ids } = r;
  assert.notEqual(quietRounds, -1, `not converged after ${MAX_QUIET_ROUNDS} fault-free periods`);
  assert.ok(await sim.converged());
  for (const key of KEYS) {
    const expected = ref.elements(key);
    for (const id of ids) assert.deepEqual(await sim.elementsOf(id, key), expected, `${id} ${key}`);
  }
  assert.ok(sim.channel.stats.dropped > 0 && sim.channel.stats.duplicated > 0, "faults happened");
  // Removes mattered: some added elements are gone, some are present.
  const added = KEYS.reduce((n, k) => n + ref.added(k).length, 0);
  const present = KEYS.reduce((n, k) => n + ref.elements(k).length, 0);
  assert.ok(present > 0 && present < added, `present ${present} of ${added} added`);
  if (process.env.GOSSIP_SIM_VERBOSE) console.log({ quietRounds, present, added, traffic: sim.traffic });
}

const scenarios: Scenario[] = [
  // Algorithm 1 needs periodic state here: lost deltas are never resent (D is reset after each
  // ship), and without transitivity a node's deltas reach only its direct neighbours.
  { name: "Algorithm 1, transitive, delta + periodic state", sync: { algorithm: 1, transitive: true, choose: "delta+periodic-state", statePeriod: 8 }, seed: 11 },
  { name: "Algorithm 1, non-transitive, delta + periodic state", sync: { algorithm: 1, transitive: false, choose: "delta+periodic-state", statePeriod: 8 }, seed: 12 },
  { name: "Algorithm 2", sync: { algorithm: 2, bp: false, rr: false }, seed: 13 },
  { name: "Algorithm 2 + BP", sync: { algorithm: 2, bp: true, rr: false }, seed: 14 },
  { name: "Algorithm 2 + RR", sync: { algorithm: 2, bp: false, rr: true }, seed: 15 },
  { name: "Algorithm 2 + BP + RR", sync: { algorithm: 2, bp: true, rr: true }, seed: 16 },
  {
    name: "Algorithm 2 + BP + RR, fanout all, restarts, membership changes, small buffers",
    sync: { algorithm: 2, bp: true, rr: true, fanout: "all", maxBufferBytes: 300 },
    seed: 17,
    restarts: 5,
    rewires: 5,
  },
];

describe("simulation: 50 replicas, 30% loss, duplication, reordering", () => {
  for (const s of scenarios) {
    it(`${s.name} converges to the add-wins result`, async () => {
      const r = await simulate(s);
      await assertConverged(r);
      if (s.sync.algorithm === 2 && s.sync.maxBufferBytes !== undefined) {
        let drops = 0;
        let fallbacks = 0;
        for (const id of r.ids) {
          drops += r.sim.engine(id).counters.bufferOverflowDrops;
          fallbacks += r.sim.engine(id).counters.stateFallbacks;
        }
        assert.ok(drops > 0 && fallbacks > 0, "the buffer limit and full-state fallback were exercised");
      }
    });
  }

  it("a run is deterministic for its seed", async () => {
    const a = await simulate(scenarios[5]!);
    const b = await simulate(scenarios[5]!);
    assert.equal(a.quietRounds, b.quietRounds);
    assert.deepEqual(a.sim.traffic, b.sim.traffic);
  });
});

describe("simulation: filter keys over the same lossy network", () => {
  it("GBF, ORCF and SCGCF keys converge on 20 replicas, every add present, ORCF removes applied", async () => {
    const random = seededRandom(41);
    const ids = Array.from({ length: 20 }, (_, i) => `n${String(i).padStart(2, "0")}`);
    const topology = new Map(randomConnectedTopology(random, ids, 4));
    const sim = await GossipSimulation.create({ topology, sync: { algorithm: 2, bp: true, rr: true }, partitions: 4, seed: 41, faults: FAULTS });
    const added = new Map<string, Set<string>>([["bloom", new Set()], ["cuckoo", new Set()], ["series", new Set()]]);
    const removed = new Set<string>();
    const types = { bloom: ObjectType.GBF, cuckoo: ObjectType.ORCF, series: ObjectType.SCGCF } as const;
    const params = { capacity: 500 };
    for (let round = 0; round < 20; round++) {
      for (let i = 0; i < 6; i++) {
        const key = pick(random, ["bloom", "cuckoo", "series"] as const);
        const el = `x${randomInt(random, 40)}`;
        await sim.operate(pick(random, ids), key, types[key], { kind: "add", elements: [Buffer.from(el)], params });
        added.get(key)!.add(el);
        if (key === "cuckoo") removed.delete(el); // added again after its remove: present (deterministic run)
      }
      if (round === 10) {
        // Remove on the node that has every cuckoo add so far, once it has them (observed-remove).
        assert.notEqual(await sim.runUntilConverged(300), -1);
        for (const el of [...added.get("cuckoo")!].slice(0, 3)) {
          assert.equal(await sim.operate(ids[0]!, "cuckoo", ObjectType.ORCF, { kind: "remove", elements: [Buffer.from(el)] }), 1);
          removed.add(el);
        }
      }
      await sim.step();
    }
    sim.setFaults(NO_FAULTS);
    assert.notEqual(await sim.runUntilConverged(MAX_QUIET_ROUNDS), -1, "filters did not converge");
    for (const id of ids) {
      for (const [key, els] of added) {
        const state = (await sim.store(id).wholeState(key))!.state;
        const present = { contains: (e: Uint8Array) => operationsFor(types[key as keyof typeof types])!.contains(state, [e])[0] };
        for (const el of els) {
          const gone = key === "cuckoo" && removed.has(el);
          assert.equal(present.contains(Buffer.from(el)), !gone, `${id} ${key} ${el} should be ${gone ? "removed" : "present"}`);
        }
      }
    }
    assert.ok(sim.channel.stats.dropped > 0, "faults happened");
    await sim.close();
  });
});
