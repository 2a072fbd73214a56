// Frames that do not decode as their request message (truncated, a wrong wire type, a length past
// the end, a bad tag), from outside: every method of Replica, Gossip and Membership answers
// INVALID_ARGUMENT naming the message type, never INTERNAL "Error deserializing request", and the
// node keeps serving. (Found by the fuzzer, test/fuzz/.)
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { GossipService } from "../../services/gen/deltaset/v1/gossip.ts";
import { MembershipService } from "../../services/gen/deltaset/v1/membership.ts";
import { ReplicaService } from "../../services/gen/deltaset/v1/replica.ts";
import { type NodeProcess, startNodeProcess } from "../helpers/node-process.ts";
import { RawSender } from "../fuzz/sender.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-malformed-"));
let node: NodeProcess;
let sender: RawSender;

before(async () => {
  node = await startNodeProcess(["--listen", "127.0.0.217:0", "--data-dir", join(dir, "data")]);
  sender = new RawSender(node.address, 1);
});

after(async () => {
  sender?.close();
  await node?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const BAD: Record<string, Buffer> = {
  "length past the end": Buffer.from([0x0a, 0x05, 0x61]),
  "wrong wire type 7": Buffer.from([0x0f, 0x01]),
  "unterminated varint": Buffer.from([0x10, 0xff, 0xff]),
  "huge length": Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x61]),
};

it("every method answers an undecodable frame with INVALID_ARGUMENT naming the message", async () => {
  const methods = [...Object.values(ReplicaService), ...Object.values(GossipService), ...Object.values(MembershipService)];
  for (const m of methods) {
    const kind = m.requestStream ? "clientStream" : m.responseStream ? "serverStream" : "unary";
    for (const [what, frame] of Object.entries(BAD)) {
      const out = await sender.send(m.path, kind, [frame], undefined, 5000);
      assert.equal(out.code, grpc.status.INVALID_ARGUMENT, `${m.path} ${what}: ${grpc.status[out.code]} ${out.details}`);
      // AddStream names the batch first (a bad batch ends the stream after the acks of those before it).
      assert.match(out.details, /^(the first batch: )?request is not a valid deltaset\.v1\.\w+ message \(/, `${m.path} ${what}`);
    }
  }
  const members = await sender.send(MembershipService.members.path, "unary", [Buffer.alloc(0)], undefined, 5000);
  assert.equal(members.code, grpc.status.OK, "the node still serves");
});
