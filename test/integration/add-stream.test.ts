// AddStream on a real node: batches acknowledged in order once durable (they survive a SIGKILL
// right after the ack), spread to the other node, the window bounding what the node works on, a
// bad batch ending the stream with its seq named while the batches before it stay, keys of other
// types and a read-only token refused, and `deltaset add KEY --stdin` streaming a file.
import { strict as assert } from "node:assert";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { addStream } from "../../services/client/add-stream.ts";
import { AddStreamAck, AddStreamRequest } from "../../services/gen/deltaset/v1/replica.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { BIN, REPO } from "../helpers/node-process.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { statusOf } from "../helpers/grpc-status.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-add-stream-"));
const addrs = ["127.0.0.246:7801", "127.0.0.247:7802"];
const c = new TestCluster(dir, addrs, ["--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--stream-window", "4"], "s");

before(async () => {
  await c.startAll();
});
after(async () => {
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

function* batches(prefix: string, count: number, size: number): Generator<Buffer[]> {
  for (let b = 0; b < count; b++) yield Array.from({ length: size }, (_, i) => Buffer.from(`${prefix}-${b * size + i}`));
}

describe("AddStream", () => {
  it("acknowledges every batch in order, durable: all there after a SIGKILL, and on the other node", { timeout: 120_000 }, async () => {
    const client = replicaClient(addrs[0]!);
    const acks: number[] = [];
    try {
      const r = await addStream(client, "streamed", batches("e", 200, 100), { window: 16, onAck: (a) => acks.push(a.batches) });
      assert.deepEqual(r, { batches: 200, elements: 20_000, added: 20_000 });
      // Acks cover batches in order and never more than were sent.
      assert.ok(acks.every((n, i) => i === 0 || n > acks[i - 1]!));
      assert.equal(acks.at(-1), 200);
    } finally {
      client.close();
    }
    await c.kill(0);
    await c.start(0);
    assert.equal(await c.size(0, "streamed"), 20_000);
    await c.converged("streamed", [0, 1], undefined, 60_000);
    assert.equal(await c.size(1, "streamed"), 20_000);
  });

  it("ends the stream at a bad batch, naming its seq; the batches before it stay", async () => {
    const client = replicaClient(addrs[1]!);
    try {
      const good = Array.from(batches("g", 3, 10));
      const bad = [Buffer.alloc(0)]; // an empty element is refused by validation
      const err = await statusOf(addStream(client, "partly", [...good, ...[[...bad, Buffer.from("x")]]], { window: 1 }));
      assert.equal(err.code, grpc.status.INVALID_ARGUMENT, err.details);
      assert.match(err.details, /batch seq 4/);
      assert.equal(await c.size(1, "partly"), 30);
    } finally {
      client.close();
    }
  });

  it("ends the stream at a batch with a text that is not UTF-8 the same way: its seq named, after the acks of the batches before it", async () => {
    // Raw bytes on the wire: a client's encoder would not write a string that is not UTF-8.
    const raw = new grpc.Client(addrs[1]!, grpc.credentials.createInsecure());
    try {
      const s = raw.makeBidiStreamRequest("/deltaset.v1.Replica/AddStream", (b: Buffer) => b, (b: Buffer) => b);
      const acks: bigint[] = [];
      s.on("data", (b: Buffer) => acks.push(AddStreamAck.decode(b).seq));
      const ended = new Promise<grpc.ServiceError>((resolve) => s.on("error", resolve));
      for (const [seq, e] of [[1n, "a"], [2n, "b"]] as const) {
        s.write(Buffer.from(AddStreamRequest.encode(AddStreamRequest.fromPartial({ key: "utf8", elements: [Buffer.from(e)], seq })).finish()));
      }
      const bad = new BinaryWriter();
      bad.tag(1, WireType.LengthDelimited).string("utf8");
      bad.tag(3, WireType.LengthDelimited).bytes(Buffer.from([0x61, 0x80])); // texts[0]: a lone continuation byte
      bad.tag(4, WireType.Varint).uint64(3n);
      s.write(Buffer.from(bad.finish()));
      s.end();
      const err = await ended;
      assert.equal(err.code, grpc.status.INVALID_ARGUMENT, err.details);
      assert.match(err.details, /batch seq 3: texts\[0\] is not valid UTF-8/);
      assert.equal(acks.at(-1), 2n, "the batches before the bad one are acknowledged");
      assert.equal(await c.size(1, "utf8"), 2);
    } finally {
      raw.close();
    }
  });

  it("refuses seqs that do not increase", async () => {
    const client = replicaClient(addrs[1]!);
    try {
      const s = client.addStream();
      const ended = new Promise<grpc.ServiceError>((resolve) => s.on("error", resolve));
      s.on("data", () => {});
      s.write({ key: "seqs", elements: [Buffer.from("a")], texts: [], seq: 5n });
      s.write({ key: "seqs", elements: [Buffer.from("b")], texts: [], seq: 5n });
      s.end();
      const err = await ended;
      assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
      assert.match(err.details, /seq 5 is not above the previous batch's 5/);
    } finally {
      client.close();
    }
  });

  it("refuses a key of another type with FAILED_PRECONDITION", async () => {
    const client = replicaClient(addrs[0]!);
    try {
      await call(client, client.increment, { key: "a-counter", amount: 1n, requestId: "" });
      const err = await statusOf(addStream(client, "a-counter", [[Buffer.from("x")]]));
      assert.equal(err.code, grpc.status.FAILED_PRECONDITION);
      assert.match(err.details, /not an AWSET/);
    } finally {
      client.close();
    }
  });

  it("streams stdin with deltaset add KEY --stdin", { timeout: 60_000 }, async () => {
    const file = join(dir, "lines.txt");
    writeFileSync(file, Array.from({ length: 2500 }, (_, i) => `line-${i}`).join("\n") + "\n");
    const child = spawn(process.execPath, [BIN, "add", "from-stdin", "--stdin", "--batch", "300", "--addr", addrs[1]!, "--json"], { cwd: REPO, stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let errText = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (errText += d.toString()));
    const { createReadStream } = await import("node:fs");
    createReadStream(file).pipe(child.stdin);
    const [code] = await once(child, "exit");
    assert.equal(code, 0, errText);
    const res = JSON.parse(out);
    assert.equal(res.elements, 2500);
    assert.equal(res.added, 2500);
    assert.equal(res.batches, 9);
    assert.equal(await c.size(1, "from-stdin"), 2500);
  });

  it("deltaset add --stdin names the stdin lines acknowledged durable when the stream fails", { timeout: 60_000 }, async () => {
    const child = spawn(process.execPath, [BIN, "add", "partly", "--stdin", "--batch", "2", "--addr", addrs[1]!], { cwd: REPO, stdio: ["pipe", "pipe", "pipe"] });
    let errText = "";
    child.stderr.on("data", (d: Buffer) => (errText += d.toString()));
    // Batches [a b] (lines 1-2) and [c d] (lines 4-5, line 3 empty), then one holding an element
    // past the node's 64 KiB limit, which ends the stream.
    child.stdin.end(["a", "b", "", "c", "d", "x".repeat(70_000), "e"].join("\n") + "\n");
    const [code] = await once(child, "exit");
    assert.notEqual(code, 0);
    const m = /deltaset add: (\d+) element\(s\) acknowledged durable, stdin lines 1-(\d+); resend from line (\d+)/.exec(errText);
    assert.ok(m !== null || /no element of stdin was acknowledged; resend it all/.test(errText), errText);
    const size = await c.size(1, "partly");
    if (m !== null) {
      const [acked, through, from] = [Number(m[1]), Number(m[2]), Number(m[3])];
      assert.deepEqual([acked, through, from], acked === 2 ? [2, 2, 3] : [4, 5, 6]);
      assert.ok(size >= acked, "every element named durable is there");
    }
    // The refusal names the element's stdin line, not only its batch and index.
    assert.match(errText, /batch seq 3: element 0 has 70000 bytes.*\(stdin line 6\)/, errText);
  });

  it("keeps each stdin line's exact bytes, UTF-8 or not (CRLF lines too)", { timeout: 60_000 }, async () => {
    const child = spawn(process.execPath, [BIN, "add", "raw-stdin", "--stdin", "--addr", addrs[1]!, "--json"], { cwd: REPO, stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let errText = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (errText += d.toString()));
    // ff, fe and c3 alone are not UTF-8: decoded as text all three became one U+FFFD element.
    child.stdin.end(Buffer.from([0xff, 0x0a, 0xfe, 0x0d, 0x0a, 0xc3, 0x0a, 0x6f, 0x6b]));
    const [code] = await once(child, "exit");
    assert.equal(code, 0, errText);
    assert.equal(JSON.parse(out).added, 4);
    const client = replicaClient(addrs[1]!);
    try {
      const q = await call(client, client.query, { key: "raw-stdin", elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false });
      assert.deepEqual(q.members.map((m) => Buffer.from(m.element).toString("hex")), ["6f6b", "c3", "fe", "ff"]);
    } finally {
      client.close();
    }
  });
});
