// The tables a node gives its outgoing gRPC connections (services/node/grpc-client-tables.ts):
// every connection a client opens gets both, calls over it are answered, and a server that goes
// away with calls open fails them at once (grpc-js walks the connection's calls then). It reaches
// into grpc-js's transport module: this fails, rather than a node quietly keeping the Map and Set,
// when a grpc-js release moves it.
import { strict as assert } from "node:assert";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { addOne, startAnswerServer } from "../helpers/answer-server.ts";
import { replicaClient } from "../../services/client/rpc.ts";
import { tabledConnections, useClientCallTables } from "../../services/node/grpc-client-tables.ts";
import { REPO } from "../helpers/node-process.ts";

describe("outgoing connections' call tables", () => {
  it("a client's connection gets both tables, and 300 concurrent calls over it are answered", async () => {
    assert.equal(useClientCallTables(), true);
    assert.equal(useClientCallTables(), true, "idempotent");
    const before = tabledConnections();
    const { address } = await startAnswerServer("127.0.32.41");
    const client = replicaClient(address);
    try {
      const answers = await Promise.all(Array.from({ length: 300 }, (_, i) => addOne(client, `k${i}`)));
      assert.ok(answers.every((a) => a.added === 1));
      assert.equal(tabledConnections() - before, 1);
    } finally {
      client.close();
    }
  });

  it("calls open when the server's process dies fail at once, UNAVAILABLE (grpc-js walks the connection's calls)", async () => {
    useClientCallTables();
    const child = spawn(process.execPath, ["--import", "./bin/register-ts.mjs", "test/fixtures/hold-server.ts", "127.0.32.42"], { cwd: REPO, stdio: ["ignore", "pipe", "inherit"] });
    const address = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on("line", (l) => l.startsWith("listening ") && resolve(l.slice(10)));
      child.once("exit", (code) => reject(new Error(`hold-server exited ${code}`)));
    });
    assert.match(address, /^127\.0\.32\.42:\d+$/);
    const client = replicaClient(address);
    const before = tabledConnections();
    try {
      const held = Promise.allSettled(Array.from({ length: 5 }, () => addOne(client, "hold", 20_000)));
      // Wait until the connection is up and the calls are on it.
      const deadline = Date.now() + 10_000;
      while (tabledConnections() === before) {
        assert.ok(Date.now() < deadline, "no connection");
        await new Promise((r) => setTimeout(r, 10));
      }
      await new Promise((r) => setTimeout(r, 200));
      const started = Date.now();
      child.kill("SIGKILL");
      const results = await held;
      assert.ok(Date.now() - started < 5_000, "held calls outlived the server");
      for (const r of results) {
        assert.equal(r.status, "rejected");
        assert.equal((r as PromiseRejectedResult).reason.code, grpc.status.UNAVAILABLE);
      }
    } finally {
      client.close();
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });
});
