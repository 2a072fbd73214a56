// StartGate: every handler of a service answers UNAVAILABLE until the node opens, then runs.
import { strict as assert } from "node:assert";
import { EventEmitter } from "node:events";
import { describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { ReplicaService } from "../../services/gen/deltaset/v1/replica.ts";
import { StartGate } from "../../services/node/start-gate.ts";

describe("StartGate", () => {
  it("refuses unary and streaming calls until open, then passes them to the handlers", () => {
    const gate = new StartGate();
    const ran: string[] = [];
    const impl = {
      add: (_c: unknown, cb: grpc.sendUnaryData<unknown>) => (ran.push("add"), cb(null, {})),
      scan: () => void ran.push("scan"),
      // Client-streaming: answered through its callback.
      import: (_c: unknown, cb: grpc.sendUnaryData<unknown>) => (ran.push("import"), cb(null, {})),
    };
    const wrapped = gate.wrap(ReplicaService, impl);
    const codes: Array<number | undefined> = [];
    wrapped.add({}, (err) => codes.push((err as grpc.ServiceError | null)?.code));
    const stream = new EventEmitter();
    stream.on("error", (e: grpc.ServiceError) => codes.push(e.code));
    (wrapped.scan as (c: unknown) => void)(stream);
    wrapped.import(new EventEmitter(), (err) => codes.push((err as grpc.ServiceError | null)?.code));
    assert.deepEqual([...codes], [grpc.status.UNAVAILABLE, grpc.status.UNAVAILABLE, grpc.status.UNAVAILABLE]);
    assert.deepEqual(ran, []);
    gate.open();
    wrapped.add({}, (err) => codes.push((err as grpc.ServiceError | null)?.code));
    (wrapped.scan as (c: unknown) => void)(stream);
    wrapped.import(new EventEmitter(), (err) => codes.push((err as grpc.ServiceError | null)?.code));
    assert.deepEqual(ran, ["add", "scan", "import"]);
    assert.equal(codes.at(-1), undefined, "answered by the handler");
  });
});
