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

/** A call that takes every batch and never acknowledges one (a node that stopped answering the stream). */
class SilentCall extends EventEmitter {
  writes = 0;
  cancelled = false;
  write(): boolean {
    this.writes++;
    return true;
  }
  end(): void {}
  cancel(): void {
    this.cancelled = true;
    this.emit("error", Object.assign(new Error("1 CANCELLED: Cancelled on client"), { code: 1 }));
  }
}

describe("addStream (client) with stallMs", () => {
  it("cancels a stream whose batches wait that long with no acknowledgement, and rejects saying so", async () => {
    const call = new SilentCall();
    const clientOfSilent = { addStream: () => call } as unknown as ReplicaClient;
    const started = performance.now();
    const outcome = await Promise.race([
      addStream(clientOfSilent, "k", batches(), { stallMs: 200 }).then(() => "resolved", (e: Error) => e.message),
      new Promise((r) => setTimeout(() => r("still waiting"), 3000)),
    ]);
    assert.match(String(outcome), /no acknowledgement for 200 ms with 10 batch\(es\) outstanding \(after batch 0\)/);
    assert.equal(call.cancelled, true);
    assert.ok(performance.now() - started >= 200);
  });

  it("does not cancel while acknowledgements keep coming, however long the stream runs", async () => {
    const call = new SilentCall();
    let seq = 0n;
    call.write = function (this: SilentCall) {
      this.writes++;
      const s = ++seq;
      setTimeout(() => this.emit("data", { seq: s, batches: 1, elements: 1n, added: 1n }), 60);
      return true;
    };
    call.end = function (this: SilentCall) {
      setTimeout(() => this.emit("end"), 100);
    };
    const slow = async function* () {
      for (let i = 0; i < 6; i++) {
        await new Promise((r) => setTimeout(r, 80));
        yield [Buffer.from(`e${i}`)];
      }
    };
    const r = await addStream({ addStream: () => call } as unknown as ReplicaClient, "k", slow(), { stallMs: 150 });
    assert.equal(r.batches, 6);
    assert.equal(call.cancelled, false);
  });
});
