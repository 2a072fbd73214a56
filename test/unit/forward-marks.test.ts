// The forwarding marks a node proves on the calls it makes for a caller (node/forward-marks.ts): a
// mark a key holder set for the method is kept; one a client set (no proof), changed after it was
// proved, proved for another method, or replayed, is dropped, so the call is served as a client's.
// With mutual TLS and no cluster key, they count only over a node certificate's connection. With
// neither, the marks are taken as they come.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { type ClusterKeyring, parseClusterKeys } from "../../services/node/cluster-keys.ts";
import { ForwardMarkCheck, MARK_PROOF, forwardMarkSigner } from "../../services/node/forward-marks.ts";
import { FORWARDED_BY } from "../../services/node/routing.ts";
import { READ_PULL } from "../../services/node/read-pull.ts";

const ADD = "/deltaset.v1.Replica/Add";
const keys = parseClusterKeys("k".repeat(40), "test");

/** The metadata a node's channel sends for a call on path carrying these marks (the signer run as grpc-js would). */
function signed(path: string, marks: Record<string, string>, withKeys = keys): grpc.Metadata {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(marks)) md.set(k, v);
  let sent: grpc.Metadata | undefined;
  const next = () => ({ start: (m: grpc.Metadata) => void (sent = m) }) as unknown as grpc.InterceptingCall;
  const call = forwardMarkSigner(() => "node-a", () => withKeys)({ method_definition: { path } } as grpc.InterceptorOptions, next as never);
  call.start(md, {});
  return sent!;
}

const check = () => new ForwardMarkCheck({ self: () => "node-b", keys: () => keys });
const marksOf = (md: grpc.Metadata) => [md.get(FORWARDED_BY).join(), md.get(READ_PULL).join()];

describe("forwarding marks", () => {
  it("keeps the marks a key holder proved for the method", () => {
    const md = signed(ADD, { [FORWARDED_BY]: "node-a" });
    assert.equal(md.get(MARK_PROOF).length, 1);
    check().check(md, ADD);
    assert.deepEqual(marksOf(md), ["node-a", ""]);
    const pull = signed("/deltaset.v1.Replica/Export", { [READ_PULL]: "1" });
    check().check(pull, "/deltaset.v1.Replica/Export");
    assert.deepEqual(marksOf(pull), ["", "1"]);
  });

  it("drops marks a client set, changed after the proof, proved for another method, or replayed", () => {
    const c = check();
    const bare = new grpc.Metadata();
    bare.set(FORWARDED_BY, "node-a");
    c.check(bare, ADD);
    assert.deepEqual(marksOf(bare), ["", ""]);

    const changed = signed(ADD, { [FORWARDED_BY]: "node-a" });
    changed.set(READ_PULL, "1");
    c.check(changed, ADD);
    assert.deepEqual(marksOf(changed), ["", ""]);

    const other = signed("/deltaset.v1.Replica/Query", { [FORWARDED_BY]: "node-a" });
    c.check(other, ADD);
    assert.deepEqual(marksOf(other), ["", ""]);

    const once = signed(ADD, { [FORWARDED_BY]: "node-a" });
    const replay = once.clone();
    c.check(once, ADD);
    assert.deepEqual(marksOf(once), ["node-a", ""]);
    c.check(replay, ADD);
    assert.deepEqual(marksOf(replay), ["", ""]);
    assert.equal(c.dropped, 4);
  });

  it("signs nothing for a call without marks, and checks each call once", () => {
    assert.equal(signed(ADD, {}).get(MARK_PROOF).length, 0);
    const c = check();
    const md = signed(ADD, { [FORWARDED_BY]: "node-a" });
    c.check(md, ADD);
    c.check(md, ADD); // a second look at the same call is not a replay
    assert.deepEqual(marksOf(md), ["node-a", ""]);
  });

  it("takes the marks as they come without a cluster key (peers are not authenticated then)", () => {
    const md = new grpc.Metadata();
    md.set(FORWARDED_BY, "node-a");
    new ForwardMarkCheck({ self: () => "node-b", keys: () => undefined }).check(md, ADD);
    assert.deepEqual(marksOf(md), ["node-a", ""]);
  });

  it("with mutual TLS and no cluster key, keeps marks only on a connection that presented a node certificate", () => {
    const c = new ForwardMarkCheck({ self: () => "node-b", keys: () => undefined, mutualTls: () => true });
    const over = (cert: unknown) => ({ getAuthContext: () => ({ transportSecurityType: "ssl", sslPeerCertificate: cert }) });
    const node = { subjectaltname: "URI:spiffe://deltaset/node/node-a", ext_key_usage: ["1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"] };
    const client = { subjectaltname: "DNS:client", ext_key_usage: ["1.3.6.1.5.5.7.3.2"] };
    const marked = () => {
      const md = new grpc.Metadata();
      md.set(FORWARDED_BY, "node-a");
      return md;
    };
    const fromNode = marked();
    c.check(fromNode, ADD, over(node));
    assert.deepEqual(marksOf(fromNode), ["node-a", ""]);
    const fromClient = marked();
    c.check(fromClient, ADD, over(client));
    assert.deepEqual(marksOf(fromClient), ["", ""]);
    const plain = marked();
    c.check(plain, ADD, { getAuthContext: () => ({}) });
    assert.deepEqual(marksOf(plain), ["", ""]);
    assert.equal(c.dropped, 2);
  });
});
