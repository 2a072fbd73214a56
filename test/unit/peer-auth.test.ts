// The parts of peer authentication: cluster key files, proofs (MAC, skew window, replay cache,
// rotation: the first key signs, every key verifies), node identity in certificates, and the
// token file with scopes.
import { strict as assert } from "node:assert";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { ensureClusterKey } from "../../services/cli/cluster-command.ts";
import { DEFAULT_SCOPES, TokenSet, parseTokens, scopeOf } from "../../services/node/auth.ts";
import { generateClusterKey, parseClusterKeys } from "../../services/node/cluster-keys.ts";
import { ConfigError } from "../../services/node/config.ts";
import { certificateNodeId, nodeIdsOf } from "../../services/node/peer-identity.ts";
import { ReplayCache, bodyDigest, parseProof, signLegacyProof, signProof, verifyProof } from "../../services/node/peer-proof.ts";

const K1 = generateClusterKey();
const K2 = generateClusterKey();
const PATH = "/deltaset.v1.Gossip/Exchange";
const BODY = bodyDigest(Buffer.from("frame"));
const NOW = 1_700_000_000_000;

describe("cluster key files", () => {
  it("read one key per line, skip comments, and never echo a key in an error", () => {
    const ring = parseClusterKeys(`# new first\n${K1}\n\n${K2}\n`, "f");
    assert.equal(ring.keys.length, 2);
    assert.equal(ring.signer.toString(), K1);
    assert.throws(() => parseClusterKeys("# nothing\n", "f"), ConfigError);
    assert.throws(
      () => parseClusterKeys(`${K1}\nshort-secret\n`, "f"),
      (e: Error) => e instanceof ConfigError && /line 2/.test(e.message) && !e.message.includes("short-secret"),
    );
    assert.ok(ring.fingerprints().every((f) => /^[0-9a-f]{12}$/.test(f) && !K1.includes(f)));
  });

  it("deltaset cluster makes one key file for its nodes, private, and keeps it across runs", () => {
    const dir = mkdtempSync(join(tmpdir(), "deltaset-keyfile-"));
    try {
      const file = ensureClusterKey(dir);
      assert.equal(statSync(file).mode & 0o777, 0o600);
      const text = readFileSync(file, "utf8");
      assert.equal(parseClusterKeys(text, "f").keys.length, 1);
      assert.equal(ensureClusterKey(dir), file);
      assert.equal(readFileSync(file, "utf8"), text);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("peer proofs", () => {
  /** Checked on node r1, where only Join takes "*" and v1 proofs are refused. */
  const AT_R1 = { self: "r1", anyReceiver: false, legacy: false };
  const ring1 = parseClusterKeys(K1, "f");
  const ring21 = parseClusterKeys(`${K2}\n${K1}`, "f");
  const ring2 = parseClusterKeys(K2, "f");

  it("verify under any installed key, and name the sender", () => {
    const v = signProof(ring1, PATH, "n1", BODY, NOW, undefined, "r1");
    assert.deepEqual(verifyProof(ring21, v, PATH, BODY, NOW, new ReplayCache(), AT_R1), { ok: true, nodeId: "n1" });
    assert.deepEqual(verifyProof(ring2, v, PATH, BODY, NOW, new ReplayCache(), AT_R1), { ok: false, reason: "proof-invalid" });
  });

  it("cover the method, the body and the sender", () => {
    const v = signProof(ring1, PATH, "n1", BODY, NOW, undefined, "r1");
    assert.equal(verifyProof(ring1, v, "/deltaset.v1.Membership/Leave", BODY, NOW, new ReplayCache(), AT_R1).ok, false);
    assert.equal(verifyProof(ring1, v, PATH, bodyDigest(Buffer.from("other")), NOW, new ReplayCache(), AT_R1).ok, false);
    assert.equal(verifyProof(ring1, v.replace(" n1 ", " n2 "), PATH, BODY, NOW, new ReplayCache(), AT_R1).ok, false);
  });

  it("are refused outside the skew window, replayed, missing or malformed", () => {
    const v = signProof(ring1, PATH, "n1", BODY, NOW, undefined, "r1");
    assert.deepEqual(verifyProof(ring1, v, PATH, BODY, NOW + 61_000, new ReplayCache(), AT_R1), { ok: false, reason: "proof-stale" });
    assert.deepEqual(verifyProof(ring1, v, PATH, BODY, NOW - 61_000, new ReplayCache(), AT_R1), { ok: false, reason: "proof-stale" });
    const cache = new ReplayCache();
    assert.equal(verifyProof(ring1, v, PATH, BODY, NOW, cache, AT_R1).ok, true);
    assert.deepEqual(verifyProof(ring1, v, PATH, BODY, NOW + 1000, cache, AT_R1), { ok: false, reason: "proof-replayed" });
    assert.deepEqual(verifyProof(ring1, undefined, PATH, BODY, NOW, cache, AT_R1), { ok: false, reason: "proof-missing" });
    assert.deepEqual(verifyProof(ring1, "v1 n1 x", PATH, BODY, NOW, cache, AT_R1), { ok: false, reason: "proof-malformed" });
    assert.equal(parseProof(`${v} extra`), undefined);
  });

  it("used before a restart are refused after it, though within the skew window (the cache starts empty)", () => {
    const v = signProof(ring1, PATH, "n1", BODY, NOW, undefined, "r1");
    assert.equal(verifyProof(ring1, v, PATH, BODY, NOW, new ReplayCache(), AT_R1).ok, true);
    // The node restarts 4 s later, allowing 2 s of clock skew between nodes: the captured proof is refused...
    const restarted = new ReplayCache(60_000, undefined, NOW + 4000 - 2000);
    assert.deepEqual(verifyProof(ring1, v, PATH, BODY, NOW + 4500, restarted, AT_R1), { ok: false, reason: "proof-before-start" });
    // ...while a call its peers sign now is taken, also from a peer whose clock is 1.5 s behind.
    const late = signProof(ring1, PATH, "n1", BODY, NOW + 4500 - 1500, undefined, "r1");
    assert.equal(verifyProof(ring1, late, PATH, BODY, NOW + 4500, restarted, AT_R1).ok, true);
  });

  it("name their receiver: refused by any other node, and '*' taken only where allowed", () => {
    const v = signProof(ring1, PATH, "n1", BODY, NOW, undefined, "r1");
    assert.equal(parseProof(v)?.to, "r1");
    assert.deepEqual(verifyProof(ring1, v, PATH, BODY, NOW, new ReplayCache(), { ...AT_R1, self: "r2" }), { ok: false, reason: "proof-other-receiver" });
    // The receiver is covered by the MAC: rewriting it is an invalid proof.
    assert.deepEqual(verifyProof(ring1, v.replace(" r1 ", " r2 "), PATH, BODY, NOW, new ReplayCache(), { ...AT_R1, self: "r2" }), { ok: false, reason: "proof-invalid" });
    const any = signProof(ring1, PATH, "n1", BODY, NOW);
    assert.equal(parseProof(any)?.to, "*");
    assert.deepEqual(verifyProof(ring1, any, PATH, BODY, NOW, new ReplayCache(), AT_R1), { ok: false, reason: "proof-receiver-missing" });
    assert.deepEqual(verifyProof(ring1, any, PATH, BODY, NOW, new ReplayCache(), { ...AT_R1, anyReceiver: true }), { ok: true, nodeId: "n1" });
  });

  it("of the earlier version (no receiver) are taken only in legacy mode", () => {
    const v1 = signLegacyProof(ring1, PATH, "n1", BODY, NOW);
    assert.equal(parseProof(v1)?.version, 1);
    assert.deepEqual(verifyProof(ring1, v1, PATH, BODY, NOW, new ReplayCache(), AT_R1), { ok: false, reason: "proof-legacy" });
    assert.deepEqual(verifyProof(ring1, v1, PATH, BODY, NOW, new ReplayCache(), { ...AT_R1, legacy: true }), { ok: true, nodeId: "n1" });
    assert.deepEqual(verifyProof(ring1, v1.replace(" n1 ", " n2 "), PATH, BODY, NOW, new ReplayCache(), { ...AT_R1, legacy: true }), { ok: false, reason: "proof-invalid" });
  });

  it("keep a bounded replay cache that refuses when full of live nonces and frees expired ones", () => {
    const cache = new ReplayCache(60_000, 3);
    for (let i = 0; i < 3; i++) assert.equal(verifyProof(ring1, signProof(ring1, PATH, "n1", BODY, NOW, undefined, "r1"), PATH, BODY, NOW, cache, AT_R1).ok, true);
    assert.deepEqual(verifyProof(ring1, signProof(ring1, PATH, "n1", BODY, NOW, undefined, "r1"), PATH, BODY, NOW, cache, AT_R1), { ok: false, reason: "replay-cache-full" });
    const later = NOW + 61_000;
    assert.equal(verifyProof(ring1, signProof(ring1, PATH, "n1", BODY, later, undefined, "r1"), PATH, BODY, later, cache, AT_R1).ok, true);
    assert.equal(cache.size, 1);
  });
});

describe("node identity in certificates", () => {
  const both = ["1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"];
  it("reads the node URI SAN", () => {
    assert.deepEqual(nodeIdsOf("IP Address:127.0.0.1, URI:spiffe://deltaset/node/n1"), ["n1"]);
    assert.deepEqual(nodeIdsOf("URI:spiffe://other/node/n1, URI:https://x"), []);
  });
  it("needs the peer role and exactly one node id", () => {
    assert.deepEqual(certificateNodeId({ subjectaltname: "URI:spiffe://deltaset/node/n1", ext_key_usage: both }), { ok: true, nodeId: "n1" });
    assert.deepEqual(certificateNodeId({ subjectaltname: "URI:spiffe://deltaset/node/n1", ext_key_usage: [both[1]!] }), { ok: false, reason: "peer-certificate-role" });
    assert.deepEqual(certificateNodeId({ subjectaltname: "URI:spiffe://deltaset/node/n1" }), { ok: false, reason: "peer-certificate-role" });
    assert.deepEqual(certificateNodeId({ subjectaltname: "IP Address:127.0.0.1", ext_key_usage: both }), { ok: false, reason: "peer-certificate-identity" });
    assert.deepEqual(
      certificateNodeId({ subjectaltname: "URI:spiffe://deltaset/node/n1, URI:spiffe://deltaset/node/n2", ext_key_usage: both }),
      { ok: false, reason: "peer-certificate-identity" },
    );
    assert.deepEqual(certificateNodeId(undefined), { ok: false, reason: "peer-certificate" });
  });
});

describe("token scopes", () => {
  it("parse `scopes token` lines; a bare token gets read and write", () => {
    const t = parseTokens("read r-token\nwrite,read rw-token\nadmin a-token\nbare-token\n", "f");
    assert.deepEqual(t.map((e) => [e.token, [...e.scopes]]), [
      ["r-token", ["read"]], ["rw-token", ["write", "read"]], ["a-token", ["admin"]], ["bare-token", [...DEFAULT_SCOPES]],
    ]);
    assert.throws(() => parseTokens("root secret-token\n", "f"), (e: Error) => /line 1/.test(e.message) && !e.message.includes("secret"));
    assert.throws(() => parseTokens("read a b\n", "f"), ConfigError);
  });
  it("refuse a token listed twice with other scopes, naming both lines and not the token; the same line twice is one entry", () => {
    assert.throws(() => parseTokens("read dup-token\n# x\nadmin dup-token\n", "f"), (e: Error) => e instanceof ConfigError && /line 3: the same token as line 1/.test(e.message) && !e.message.includes("dup-token"));
    assert.deepEqual(parseTokens("read,write t\nwrite,read t\n", "f").map((e) => e.token), ["t"]);
  });
  it("grant admin every scope and map methods to scopes (unknown client methods need admin)", () => {
    const set = new TokenSet(parseTokens("read r\nadmin a\n", "f"));
    assert.deepEqual([...set.scopesOf("r")], ["read"]);
    assert.deepEqual([...set.scopesOf("a")].sort(), ["admin", "read", "write"]);
    assert.equal(set.scopesOf("x").size, 0);
    assert.equal(scopeOf("/deltaset.v1.Replica/Query"), "read");
    assert.equal(scopeOf("/deltaset.v1.Replica/Add"), "write");
    assert.equal(scopeOf("/deltaset.v1.Replica/Merge"), "admin");
    assert.equal(scopeOf("/deltaset.v1.Replica/Export"), "read");
    assert.equal(scopeOf("/deltaset.v1.Replica/Import"), "admin");
    assert.equal(scopeOf("/deltaset.v1.Replica/SomethingNew"), "admin");
  });
});
