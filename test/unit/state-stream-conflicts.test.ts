// A key whose type differs between nodes (two nodes created it at once as different types) is left
// out of a full-state stream, counted as a conflict, and the stream goes on: the other keys of its
// partition still arrive, and no stream is refused. Before, the key's chunk was dropped but its
// chunk sequence stayed open, so the partition's end was refused ("ended before the last chunk")
// and the stream with it, at every period.
import { strict as assert } from "node:assert";
import { it } from "node:test";
import { ObjectType } from "../../services/crdt/index.js";
import { GossipSimulation, NO_FAULTS } from "../../services/gossip/index.js";
import { ALG2_BP_RR, RING3 } from "./gossip-helpers.js";

const b = (s: string) => Buffer.from(s);

it("a full-state stream skips a key of another type at the receiver and delivers the rest of its partition", async () => {
  const sim = await GossipSimulation.create({ topology: RING3, sync: ALG2_BP_RR, partitions: 1, seed: 3, faults: NO_FAULTS });
  try {
    // c apart: it creates the key as a GCF while a creates it as a GBF.
    sim.setNeighbours("a", ["b"]);
    sim.setNeighbours("b", ["a"]);
    sim.setNeighbours("c", []);
    await sim.operate("a", "clash", ObjectType.GBF, { kind: "add", elements: [b("x")], params: { capacity: 100 } });
    await sim.operate("c", "clash", ObjectType.GCF, { kind: "add", elements: [b("y")], params: { capacity: 100 } });
    for (const k of ["d1", "d2", "d3"]) await sim.operate("a", k, ObjectType.GBF, { kind: "add", elements: [b(k)], params: { capacity: 100 } });
    await sim.operate("c", "from-c", ObjectType.GBF, { kind: "add", elements: [b("c")], params: { capacity: 100 } });
    for (let i = 0; i < 5; i++) await sim.step();
    // c comes back from a restart: its neighbours push it the partition's full state.
    await sim.restart("c");
    for (const [id, n] of RING3) sim.setNeighbours(id, n);
    for (let i = 0; i < 20; i++) await sim.step();

    for (const id of sim.nodeIds) {
      for (const k of ["d1", "d2", "d3", "from-c"]) assert.ok((await sim.store(id).wholeState(k)) !== undefined, `${id} lacks ${k}`);
      const t = sim.transport(id);
      assert.equal(t.chunksRejected + t.framesRejected, 0, `${id} refused a stream or frame`);
    }
    assert.ok(sim.nodeIds.some((id) => sim.transport(id).typeConflicts > 0), "the conflict was counted");
    assert.equal((await sim.store("c").wholeState("clash"))!.type, ObjectType.GCF, "each node keeps its own type");
  } finally {
    await sim.close();
  }
});
