// The client side of AddStream (services/client/add-stream.ts) against a stand-in for the gRPC
// call: a call that fails while the client waits for the transport to drain ends the client's
// wait with that failure (it used to wait for a drain that never came, and a CLI process with
// nothing else to do then exited 13 with no message).
import { strict as assert } from "node:assert";
import { EventEmitter } from "node:events";
import { describe, it } from "node:test";
import type { ReplicaClient } from "../../services/gen/deltaset/v1/replica.ts";
import { addStream } from "../../services/client/add-stream.ts";

/** A client stream whose transport never drains: every write after the first asks to wait. */
class StuckCall extends EventEmitter {
  writes = 0;
  ended = false;
  write(): boolean {
    this.writes++;
    return false;
  }
  end(): void {
    this.ended = true;
  }
}

const clientOf = (call: StuckCall) => ({ addStream: () => call }) as unknown as ReplicaClient;
const batches = function* () {
  for (let i = 0; i < 10; i++) yield [Buffer.from(`e${i}`)];
};

describe("addStream (client)", () => {
  it("rejects with the call's error when the call fails while waiting for the transport to drain", async () => {
    const call = new StuckCall();
    const sending = addStream(clientOf(call), "k", batches());
    // Let the first write happen and the client start waiting for "drain", then fail the call.
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(call.writes, 1);
    const unavailable = Object.assign(new Error("14 UNAVAILABLE: the node's storage failed to write"), { code: 14 });
    call.emit("error", unavailable);
    const outcome = await Promise.race([sending.then(() => "resolved", (e: Error) => e), new Promise((r) => setTimeout(() => r("still waiting"), 2000))]);
    assert.equal(outcome, unavailable);
    assert.equal(call.ended, true);
  });

  it("stops waiting when the call ends meanwhile, and says how far it was acknowledged", async () => {
    const call = new StuckCall();
    const sending = addStream(clientOf(call), "k", batches());
    await new Promise((r) => setTimeout(r, 20));
    call.emit("end");
    const outcome = await Promise.race([sending.then(() => "resolved", (e: Error) => e.message), new Promise((r) => setTimeout(() => r("still waiting"), 2000))]);
    assert.match(String(outcome), /ended after batch 0 of/);
  });
});
