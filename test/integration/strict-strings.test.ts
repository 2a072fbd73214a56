// Strict strings, from outside: a real node process receives hand-encoded requests whose string
// fields hold bytes that are not UTF-8 (which a decoder would turn into U+FFFD) and answers
// INVALID_ARGUMENT naming the field, for every RPC shape and service; nothing changes and the
// node keeps serving. Valid multi-byte UTF-8 still passes. A singular message sent twice is refused
// the same way.
import { strict as assert } from "node:assert";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { call } from "../../services/client/rpc.ts";
import { type RawNode, startRawNode } from "../helpers/raw-node.ts";

let n: RawNode;

/** "bad" followed by a lone continuation byte and an overlong encoding of "/": not UTF-8. */
const BAD = Buffer.from([0x62, 0x61, 0x64, 0x80, 0xc0, 0xaf]);
const utf8 = (s: string) => Buffer.from(s, "utf8");

/** A message as field → list of values (Buffer: length-delimited, bigint: varint), in order. */
type Fields = Array<[number, Buffer | bigint]>;
function encode(fields: Fields): Buffer {
  const w = new BinaryWriter();
  for (const [no, v] of fields) {
    if (typeof v === "bigint") w.tag(no, WireType.Varint).uint64(v);
    else w.tag(no, WireType.LengthDelimited).bytes(v);
  }
  return Buffer.from(w.finish());
}

const unary = (path: string, body: Buffer) => n.unary(path, body);
const size = (key: string) => n.size(key);

function streamed(path: string, body: Buffer): Promise<Buffer[]> {
  return new Promise((resolve, reject) => {
    const out: Buffer[] = [];
    const s = n.raw.makeServerStreamRequest(path, (b: Buffer) => b, (b: Buffer) => b, body);
    s.on("data", (b: Buffer) => out.push(b));
    s.on("error", reject);
    s.on("end", () => resolve(out));
  });
}

async function expectInvalid(p: Promise<unknown>, field: string): Promise<void> {
  await assert.rejects(p, (e: grpc.ServiceError) => {
    assert.equal(e.code, grpc.status.INVALID_ARGUMENT, `expected INVALID_ARGUMENT, got ${grpc.status[e.code]}: ${e.details}`);
    assert.ok(e.details.startsWith(`${field} is not valid UTF-8`), e.details);
    return true;
  });
}

before(async () => {
  n = await startRawNode("127.0.0.135:0");
});

after(async () => {
  await n?.close();
});

describe("string fields must be UTF-8", () => {
  it("Add: a bad key or text is refused naming the field, and nothing is added", async () => {
    await expectInvalid(unary("/deltaset.v1.Replica/Add", encode([[1, BAD], [3, utf8("x")]])), "key");
    await expectInvalid(unary("/deltaset.v1.Replica/Add", encode([[1, utf8("k")], [3, utf8("ok")], [2, utf8("bytes are fine")], [3, BAD]])), "texts[1]");
    assert.equal(await size("k"), 0n);
    // The lossy decoding of BAD, which the node must not have created either.
    assert.equal(await size(BAD.toString("utf8")), 0n);
  });

  it("Remove: a bad replica id deep in the context is named by its path", async () => {
    await unary("/deltaset.v1.Replica/Add", encode([[1, utf8("r")], [3, utf8("a")]]));
    const versionEntry = (replica: Buffer) => encode([[1, replica], [2, 1n]]);
    const context = encode([[1, versionEntry(utf8("fine"))], [1, versionEntry(BAD)]]);
    await expectInvalid(unary("/deltaset.v1.Replica/Remove", encode([[1, utf8("r")], [3, utf8("a")], [4, context]])), "context.vv[1].replica");
    assert.equal(await size("r"), 1n);
  });

  it("Remove: a context sent in two parts is refused rather than cut to its last part", async () => {
    // Protobuf merges two occurrences of a singular message; the decoder would keep the last only,
    // so the adds covered by the first part would stay while the client is told they were removed.
    const added = await call(n.client, n.client.add, { key: "two", elements: [], texts: ["a", "b"] });
    const versionEntry = (counter: bigint) => encode([[1, utf8(added.replica)], [2, counter]]);
    const part = (counter: bigint) => encode([[1, versionEntry(counter)]]);
    await assert.rejects(unary("/deltaset.v1.Replica/Remove", encode([[1, utf8("two")], [3, utf8("a")], [3, utf8("b")], [4, part(added.counters[1]!)], [4, part(added.counters[0]!)]])), (e: grpc.ServiceError) => {
      assert.equal(e.code, grpc.status.INVALID_ARGUMENT, e.details);
      assert.match(e.details, /^context is a single message but was sent 2 times; send it once/);
      return true;
    });
    assert.equal(await size("two"), 2n);
  });

  it("Query, Increment and a server stream (Scan) refuse bad strings too", async () => {
    await expectInvalid(unary("/deltaset.v1.Replica/Query", encode([[1, utf8("r")], [3, BAD]])), "texts[0]");
    await expectInvalid(unary("/deltaset.v1.Replica/Increment", encode([[1, utf8("n")], [2, 2n], [3, BAD]])), "request_id");
    await expectInvalid(streamed("/deltaset.v1.Replica/Scan", encode([[1, BAD]])), "key");
    await expectInvalid(unary("/deltaset.v1.Replica/Merge", encode([[1, BAD]])), "key");
    assert.equal((await call(n.client, n.client.query, { key: "n", elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false })).counterValue, 0n);
  });

  it("the peer services are covered as well", async () => {
    await expectInvalid(unary("/deltaset.v1.Membership/Ping", encode([[1, utf8("deltaset")], [2, BAD]])), "from");
    const member = encode([[1, BAD]]);
    await expectInvalid(unary("/deltaset.v1.Membership/Join", encode([[1, utf8("deltaset")], [2, member]])), "self.node_id");
    await expectInvalid(unary("/deltaset.v1.Gossip/Exchange", encode([[1, BAD]])), "cluster");
  });

  it("valid multi-byte UTF-8 passes, and the node keeps serving", async () => {
    const text = "grüße 😀 中文";
    await unary("/deltaset.v1.Replica/Add", encode([[1, utf8("ü")], [3, utf8(text)]]));
    const r = await call(n.client, n.client.query, { key: "ü", elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: true });
    assert.deepEqual(r.members.map((m) => m.text), [text]);
    assert.ok((await streamed("/deltaset.v1.Replica/Scan", encode([[1, utf8("ü")]]))).length >= 1, "the scan stream answers");
  });
});
