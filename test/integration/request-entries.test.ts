// Requests counted before they are decoded, from outside: a real node process with
// --max-request-entries 3000 receives hand-encoded client requests. One holding more entries of
// repeated fields than that (elements, texts, context entries, at any depth; a stream's message
// alone) is refused RESOURCE_EXHAUSTED naming the setting, without building millions of objects
// first; one at the limit reaches the handler; nothing changes and the node keeps serving.
import { strict as assert } from "node:assert";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { call } from "../../services/client/rpc.ts";
import { type RawNode, startRawNode } from "../helpers/raw-node.ts";

const LIMIT = 3000;
let n: RawNode;

const utf8 = (s: string) => Buffer.from(s, "utf8");

/** `n` one-byte elements (field 2 of Add, Remove, Query and AddStream requests) after the key. */
function withElements(key: string, n: number, extra: (w: BinaryWriter) => void = () => {}): Buffer {
  const w = new BinaryWriter();
  w.tag(1, WireType.LengthDelimited).bytes(utf8(key));
  for (let i = 0; i < n; i++) w.tag(2, WireType.LengthDelimited).bytes(Buffer.from([0x61 + (i % 26), i & 0xff, (i >> 8) & 0xff]));
  extra(w);
  return Buffer.from(w.finish());
}

/** A context (field 4 of Remove) with one cloud entry of `ranges` ranges: entries one level down. */
function contextWith(ranges: number): (w: BinaryWriter) => void {
  return (w) => {
    const cloud = new BinaryWriter();
    cloud.tag(1, WireType.LengthDelimited).string("r1");
    for (let i = 0; i < ranges; i++) {
      const r = new BinaryWriter();
      r.tag(1, WireType.Varint).uint64(2 * i + 10).tag(2, WireType.Varint).uint64(2 * i + 10);
      cloud.tag(2, WireType.LengthDelimited).bytes(r.finish());
    }
    const ctx = new BinaryWriter();
    ctx.tag(2, WireType.LengthDelimited).bytes(cloud.finish());
    w.tag(4, WireType.LengthDelimited).bytes(ctx.finish());
  };
}

const unary = (path: string, body: Buffer) => n.unary(path, body);
const size = (key: string) => n.size(key);

function isEntriesRefusal(e: grpc.ServiceError): true {
  assert.equal(e.code, grpc.status.RESOURCE_EXHAUSTED, `expected RESOURCE_EXHAUSTED, got ${grpc.status[e.code]}: ${e.details}`);
  assert.match(e.details, new RegExp(`more than ${LIMIT} entries of repeated fields.*--max-request-entries`));
  return true;
}

before(async () => {
  n = await startRawNode("127.0.0.139:0", ["--max-request-entries", String(LIMIT), "--max-elements-per-call", String(LIMIT)]);
});

after(async () => {
  await n?.close();
});

describe("client requests are counted before they are decoded", () => {
  it("an Add or Query of more elements than the limit is refused naming --max-request-entries, and nothing is added", async () => {
    await assert.rejects(unary("/deltaset.v1.Replica/Add", withElements("k", LIMIT + 1)), isEntriesRefusal);
    // Millions of empty elements (the shape that made a node decode 8 million objects per call).
    const w = new BinaryWriter();
    w.tag(1, WireType.LengthDelimited).bytes(utf8("k"));
    for (let i = 0; i < 2_000_000; i++) w.tag(2, WireType.LengthDelimited).bytes(new Uint8Array(0));
    const huge = Buffer.from(w.finish());
    await Promise.all(Array.from({ length: 4 }, () => assert.rejects(unary("/deltaset.v1.Replica/Query", huge), isEntriesRefusal)));
    assert.equal(await size("k"), 0n);
  });

  it("a request at the limit reaches the handler and is served", async () => {
    const res = await unary("/deltaset.v1.Replica/Add", withElements("k", LIMIT));
    assert.ok(res.length > 0);
    assert.equal(await size("k"), BigInt(LIMIT));
  });

  it("entries of a nested field count: a Remove whose context holds too many ranges is refused", async () => {
    await assert.rejects(unary("/deltaset.v1.Replica/Remove", withElements("k", 1, contextWith(LIMIT))), isEntriesRefusal);
    assert.equal(await size("k"), BigInt(LIMIT));
    // Under the limit the same shape reaches the handler (which refuses nothing here: the ranges name unseen adds).
    await unary("/deltaset.v1.Replica/Remove", withElements("k", 1, contextWith(10)));
  });

  it("an AddStream message over the limit ends its stream with the refusal; the node keeps serving", async () => {
    const s = n.raw.makeBidiStreamRequest("/deltaset.v1.Replica/AddStream", (b: Buffer) => b, (b: Buffer) => b);
    const ended = new Promise<grpc.ServiceError>((resolve) => {
      s.on("data", () => {});
      s.on("error", (e: grpc.ServiceError) => resolve(e));
      s.on("end", () => resolve({ code: grpc.status.OK, details: "ended without error" } as grpc.ServiceError));
    });
    s.write(withElements("stream", LIMIT + 1, (w) => w.tag(4, WireType.Varint).uint64(1)));
    isEntriesRefusal(await ended);
    assert.equal(await size("stream"), 0n);
    const added = await call(n.client, n.client.add, { key: "after", elements: [utf8("x")], texts: [] });
    assert.equal(added.added, 1);
  });
});
