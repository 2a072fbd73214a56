// A node's gRPC listener keeps each session's open streams in a KeyTable, not node:http2's Map
// (services/node/http2-stream-table.ts), and node:http2 runs on it: concurrent calls are answered
// and leave the table empty, and a server that shuts down with calls open ends them. It reads
// grpc-js's private list of listeners: this fails, rather than the node quietly going back to the
// Map, when a grpc-js release moves it.
import { strict as assert } from "node:assert";
import type { Http2Session } from "node:http2";
import { describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { addOne, startAnswerServer } from "../helpers/answer-server.ts";
import { KeyTable } from "../../services/common/key-table.ts";
import { replicaClient } from "../../services/client/rpc.ts";
import { useStreamTable } from "../../services/node/http2-stream-table.ts";

/** The sessions grpc-js holds for the server's listeners, and each one's stream table. */
function sessionTables(server: grpc.Server): unknown[] {
  const listeners = (server as unknown as { http2Servers: Map<unknown, { sessions: Set<Http2Session> }> }).http2Servers;
  const tables: unknown[] = [];
  for (const { sessions } of listeners.values()) {
    for (const s of sessions) {
      const sym = Object.getOwnPropertySymbols(s).find((x) => x.description === "state")!;
      tables.push((s as unknown as Record<symbol, { streams: unknown }>)[sym].streams);
    }
  }
  return tables;
}

describe("HTTP/2 stream tables", () => {
  it("sessions keep their streams in a KeyTable; 400 concurrent calls are answered and leave it empty", async () => {
    const { server, address } = await startAnswerServer("127.0.32.1");
    const clients = [replicaClient(address), replicaClient(address)];
    try {
      const answers = await Promise.all(Array.from({ length: 400 }, (_, i) => addOne(clients[i % 2]!, `k${i}`)));
      assert.equal(answers.length, 400);
      assert.ok(answers.every((a) => a.added === 1));
      const tables = sessionTables(server);
      assert.ok(tables.length >= 1, "no session");
      for (const t of tables) {
        assert.ok(t instanceof KeyTable, `a session's streams are a ${(t as object).constructor.name}`);
        assert.equal(t.size, 0);
      }
    } finally {
      clients.forEach((c) => c.close());
    }
  });

  it("a server shut down with calls open ends them through the table", async () => {
    const { server, address } = await startAnswerServer("127.0.32.2");
    const client = replicaClient(address);
    try {
      await addOne(client, "warm");
      const held = Promise.allSettled(Array.from({ length: 5 }, () => addOne(client, "hold", 20_000)));
      // Wait until the five streams are open on the server.
      const deadline = Date.now() + 10_000;
      while (!sessionTables(server).some((t) => (t as KeyTable<unknown>).size === 5)) {
        assert.ok(Date.now() < deadline, "the held calls never reached the server");
        await new Promise((r) => setTimeout(r, 10));
      }
      const started = Date.now();
      server.forceShutdown();
      const results = await held;
      assert.ok(Date.now() - started < 5_000, "held calls outlived the shutdown");
      for (const r of results) assert.equal(r.status, "rejected");
    } finally {
      client.close();
    }
  });

  it("a session already holding streams, or of another shape, keeps what it has", () => {
    const state = Symbol("state");
    const busy = { [state]: { streams: new Map([[1, {}]]), pendingStreams: new Set() } } as unknown as Http2Session;
    assert.equal(useStreamTable(busy), false);
    assert.ok((busy as unknown as Record<symbol, { streams: unknown }>)[state].streams instanceof Map);
    assert.equal(useStreamTable({} as Http2Session), false);
    const fresh = { [state]: { streams: new Map(), pendingStreams: new Set() } } as unknown as Http2Session;
    assert.equal(useStreamTable(fresh), true);
    assert.ok((fresh as unknown as Record<symbol, { streams: unknown }>)[state].streams instanceof KeyTable);
    assert.equal(useStreamTable(fresh), false, "not twice");
  });
});
