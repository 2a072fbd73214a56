// Foreign log lines (node/foreign-logs.ts): grpc-js's log calls and Node's process warnings come
// out through the node's JSON logger, one object per line, marked with their source, and Node no
// longer prints its own plain-text warning line.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { createLogger } from "../../services/common/logger.ts";
import { routeForeignLogs } from "../../services/node/foreign-logs.ts";

describe("foreign log lines", () => {
  it("grpc-js's errors and Node's warnings become JSON lines of the node's logger", async () => {
    const lines: string[] = [];
    routeForeignLogs(createLogger("info", { node: "n1" }, (l) => lines.push(l)));
    const printed: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: string | Uint8Array) => (printed.push(String(chunk)), true)) as typeof process.stderr.write;
    const servers = [new grpc.Server(), new grpc.Server()];
    try {
      const port = await new Promise<number>((resolve, reject) => servers[0]!.bindAsync("127.0.0.153:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
      // Binding a second server to the same port fails, and grpc-js logs why.
      await new Promise<void>((resolve) => servers[1]!.bindAsync(`127.0.0.153:${port}`, grpc.ServerCredentials.createInsecure(), () => resolve()));
      process.emitWarning("a test warning", { code: "TEST001" });
      await new Promise((r) => setImmediate(r));
    } finally {
      process.stderr.write = write;
      for (const s of servers) s.forceShutdown();
    }
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const fromGrpc = parsed.filter((o) => o.source === "grpc-js");
    assert.ok(fromGrpc.length >= 1, `no grpc-js line in ${JSON.stringify(lines)}`);
    assert.ok(fromGrpc.every((o) => o.level === "error" && o.node === "n1" && typeof o.msg === "string" && o.msg.length > 0));
    assert.deepEqual(
      parsed.filter((o) => o.source === "node").map((o) => [o.level, o.msg, o.code]),
      [["warn", "a test warning", "TEST001"]],
    );
    assert.deepEqual(printed.filter((p) => p.includes("a test warning")), [], "Node printed the warning itself too");
  });
});
