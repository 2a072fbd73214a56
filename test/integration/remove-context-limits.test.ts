// A real node process: what deferred removes keep is bounded. A Remove whose context names adds
// of more replica ids than --max-remove-unseen-replicas that the node has not received, or whose
// records would pass --max-pending-remove-bytes, answers RESOURCE_EXHAUSTED naming the setting and
// changes nothing; the node keeps serving, and a deferred remove within the limits still waits and
// applies when its add arrives, however many large ones wait beside it.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { AWSet, AWSetLattice, CausalContext, ObjectType, contextFromProto, contextToProto } from "../../services/crdt/index.ts";
import type { ReplicaClient } from "../../services/gen/deltaset/v1/replica.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { type NodeProcess, startNodeProcess } from "../helpers/node-process.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-remove-limits-"));
let node: NodeProcess;
let client: ReplicaClient;
const BYTES = 300_000;

const b = (s: string) => Buffer.from(s);
/** Counter 1 of n replica ids no node ever had. */
const never = (prefix: string, n: number) => CausalContext.of(Array.from({ length: n }, (_, i) => ({ replica: `${prefix}-${String(i).padStart(6, "0")}~0badc0de`, counter: 1 })));
const remove = (key: string, elements: string[], context: CausalContext) => call(client, client.remove, { key, elements: elements.map(b), texts: [], context: contextToProto(context) });
const query = (key: string) => call(client, client.query, { key, elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: true });
const texts = async (key: string) => (await query(key)).members.map((m) => m.text).sort();

async function exhausted(p: Promise<unknown>, pattern: RegExp): Promise<void> {
  await assert.rejects(p, (e: grpc.ServiceError) => {
    assert.equal(e.code, grpc.status.RESOURCE_EXHAUSTED, `${grpc.status[e.code]}: ${e.details}`);
    assert.match(e.details, pattern);
    return true;
  });
}

before(async () => {
  node = await startNodeProcess(["--listen", "127.0.18.1:0", "--data-dir", join(dir, "data"), "--node-id", "solo", "--max-pending-remove-bytes", String(BYTES)]);
  client = replicaClient(node.address);
});

after(async () => {
  client?.close();
  await node?.kill();
  rmSync(dir, { recursive: true, force: true });
});

describe("bounds on what a deferred remove keeps (node process)", () => {
  it("refuses contexts of too many unseen replica ids or too many bytes, and still defers and applies the others", async () => {
    // An ordinary deferred remove: y was added on another node too, whose add has not come yet.
    await call(client, client.add, { key: "fruit", elements: [], texts: ["x", "y"] });
    const elsewhere = AWSet.bottom().add("elsewhere~1", [b("y")]);
    const read = contextFromProto((await query("fruit")).context).join(elsewhere.ctx);
    const ordinary = await remove("fruit", ["y"], read);
    assert.deepEqual([ordinary.removed, ordinary.pending], [1, 1]);

    // More replica ids than the default 4096: refused before anything is kept, x's seen add included.
    const seen = contextFromProto((await query("fruit")).context);
    await exhausted(remove("fruit", ["x"], seen.join(never("a", 5000))), /5000 replica ids this node has not received \(limit 4096, --max-remove-unseen-replicas\)/);
    assert.deepEqual(await texts("fruit"), ["x"]);
    assert.equal((await query("fruit")).pendingRemoves, 1);

    // Within the replica ids, Removes of new elements until their records pass the bytes.
    const wide = never("b", 4000);
    let kept = 0;
    let refusal: grpc.ServiceError | undefined;
    for (let i = 0; i < 10 && refusal === undefined; i++) {
      try {
        assert.equal((await remove("parked", [`p${i}`], wide)).pending, 1);
        kept++;
      } catch (err) {
        refusal = err as grpc.ServiceError;
      }
    }
    assert.ok(refusal !== undefined, "no Remove was refused for its bytes");
    assert.equal(refusal.code, grpc.status.RESOURCE_EXHAUSTED);
    assert.match(refusal.details, new RegExp(`would take more than ${BYTES} bytes .*--max-pending-remove-bytes`));
    assert.ok(kept >= 1, `${kept} Removes kept before the limit`);
    assert.equal((await query("parked")).pendingRemoves, kept, "the refused Remove kept nothing");

    // The node serves on: adds to either key, and the ordinary remove applies when its add arrives.
    const started = Date.now();
    await call(client, client.add, { key: "parked", elements: [], texts: ["z"] });
    await call(client, client.add, { key: "fruit", elements: [], texts: ["w"] });
    assert.ok(Date.now() - started < 5000, `two adds took ${Date.now() - started} ms`);
    await call(client, client.merge, { key: "fruit", state: { type: ObjectType.AWSET, payload: Buffer.from(AWSetLattice.encode(elsewhere)) } });
    assert.deepEqual(await texts("fruit"), ["w", "x"], "y's add from elsewhere was removed when it arrived");
    assert.equal((await query("fruit")).pendingRemoves, 0);
    assert.deepEqual(await texts("parked"), ["z"]);
  });
});
