// TLS and mutual TLS with certificates made by openssl at test time: three nodes with certificates
// of one cluster CA form a cluster and converge; clients need only server TLS; the peer services
// refuse connections without a cluster certificate, and a node whose certificate comes from
// another CA never becomes a member, takes no client write while refused, and gets nothing in.
// Plus the loopback test behind the "no TLS on a non-loopback address" warning.
import { strict as assert } from "node:assert";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { GossipClient } from "../../services/gen/deltaset/v1/gossip.ts";
import { MemberState } from "../../services/gen/deltaset/v1/membership.ts";
import { call, membershipClient, replicaClient } from "../../services/client/rpc.ts";
import { isLoopbackHost } from "../../services/node/loopback.ts";
import { type CertFiles, type TestCa, makeCa, nodeUri } from "../helpers/certs.ts";
import { type NodeProcess, runCli, startNodeProcess } from "../helpers/node-process.ts";
import { eventually } from "../helpers/eventually.ts";
import { statusOf } from "../helpers/grpc-status.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-tls-"));
const FAST = ["--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--reap-after-ms", "4000"];
const HOSTS = ["127.0.0.81", "127.0.0.82", "127.0.0.83"];
const ROGUE_HOST = "127.0.0.84";

let clusterCa: TestCa;
let otherCa: TestCa;
const certs = new Map<string, CertFiles>();
const nodes: NodeProcess[] = [];
let rogue: NodeProcess | undefined;

const tlsArgs = (c: CertFiles, ca: string) => ["--tls-cert", c.cert, "--tls-key", c.key, "--tls-ca", ca];
const serverTls = () => grpc.credentials.createSsl(readFileSync(clusterCa.ca));
const withClientCert = (c: CertFiles) => grpc.credentials.createSsl(readFileSync(clusterCa.ca), readFileSync(c.key), readFileSync(c.cert));


async function members(address: string): Promise<Record<string, string>> {
  const c = membershipClient(address, serverTls());
  try {
    const r = await call(c, c.members, { includeDeparted: true }, { timeoutMs: 3000 });
    return Object.fromEntries(r.members.map((m) => [m.nodeId, MemberState[m.state]!]));
  } finally {
    c.close();
  }
}

async function read(address: string, key: string): Promise<string[]> {
  const c = replicaClient(address, serverTls());
  try {
    const r = await call(c, c.query, { key, elements: [], texts: [], pageSize: 1000, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs: 3000 });
    return r.members.map((m) => m.element.toString()).sort();
  } finally {
    c.close();
  }
}

async function scrape(n: NodeProcess): Promise<string> {
  const endpoint = /"endpoint":"(http:[^"]+)"/.exec(n.logs())?.[1];
  assert.ok(endpoint, `${n.nodeId} logs no metrics endpoint`);
  return (await fetch(endpoint)).text();
}

const exchangeFrame = (from: string) => ({ cluster: "deltaset", from, frameId: 1n, payloads: [], acks: [], partitions: 64, boot: 0n, dropped: [], leaving: false, mac: Buffer.alloc(0) });

before(async () => {
  clusterCa = makeCa(dir, "cluster-ca");
  otherCa = makeCa(dir, "other-ca");
  HOSTS.forEach((h, i) => certs.set(`t${i + 1}`, clusterCa.issue(`t${i + 1}`, [h], { uris: [nodeUri(`t${i + 1}`)] })));
  certs.set("rogue", otherCa.issue("rogue", [ROGUE_HOST], { uris: [nodeUri("rogue")] }));
  certs.set("client", clusterCa.issue("client", ["127.0.0.1"], { eku: "clientAuth" }));
  const first = await startNodeProcess([
    "--listen", `${HOSTS[0]}:0`, "--node-id", "t1", "--data-dir", join(dir, "t1"), ...tlsArgs(certs.get("t1")!, clusterCa.ca), ...FAST,
  ]);
  nodes.push(first);
  for (const i of [2, 3]) {
    nodes.push(
      await startNodeProcess([
        "--listen", `${HOSTS[i - 1]}:0`, "--node-id", `t${i}`, "--data-dir", join(dir, `t${i}`), "--seeds", first.address,
        ...tlsArgs(certs.get(`t${i}`)!, clusterCa.ca), ...FAST, ...(i === 2 ? ["--metrics-listen", "127.0.0.1:0"] : []),
      ]),
    );
  }
});

after(async () => {
  await Promise.all([...nodes, ...(rogue ? [rogue] : [])].map((n) => n.stop()));
  rmSync(dir, { recursive: true, force: true });
});

describe("three nodes with mutual TLS", () => {
  it("form one cluster: every node sees three alive members", async () => {
    for (const n of nodes) {
      await eventually(`3 alive members on ${n.nodeId}`, () => members(n.address), (m) => ["t1", "t2", "t3"].every((id) => m[id] === "ALIVE"));
    }
    assert.match(nodes[0]!.logs(), /"tls":"mutual"/);
  });

  it("converge: writes on two nodes are read on all three", async () => {
    const w = (address: string, els: string[]) => {
      const c = replicaClient(address, serverTls());
      return call(c, c.add, { key: "tls-set", elements: els.map((e) => Buffer.from(e)), texts: [] }).finally(() => c.close());
    };
    await w(nodes[0]!.address, ["a", "b"]);
    await w(nodes[1]!.address, ["c"]);
    for (const n of nodes) await eventually(`converged read on ${n.nodeId}`, () => read(n.address, "tls-set"), (r) => r.join() === "a,b,c");
  });

  it("refuse plaintext clients", async () => {
    const c = replicaClient(nodes[0]!.address);
    try {
      const r = await statusOf(call(c, c.add, { key: "x", elements: [Buffer.from("x")], texts: [] }, { timeoutMs: 3000 }));
      assert.equal(r.code, grpc.status.UNAVAILABLE);
    } finally {
      c.close();
    }
    await eventually("the plaintext attempt logged on the node", async () => nodes[0]!.logs(), (l) =>
      /"msg":"a TLS handshake with this node failed".*"reason":"ERR_SSL_WRONG_VERSION_NUMBER","detail":"the client does not speak TLS/.test(l),
    );
  });

  it("log and count, on the receiving node, a handshake a client broke off (it does not trust the node's CA)", async () => {
    const target = nodes[1]!;
    const c = replicaClient(target.address, grpc.credentials.createSsl(readFileSync(otherCa.ca)));
    try {
      const r = await statusOf(call(c, c.add, { key: "x", elements: [Buffer.from("x")], texts: [] }, { timeoutMs: 3000 }));
      assert.equal(r.code, grpc.status.UNAVAILABLE);
    } finally {
      c.close();
    }
    // Node's TLS client hangs up without an alert; the node says what that probably means.
    const line = await eventually("the handshake failure logged on the node", async () => target.logs(), (l) => /a TLS handshake with this node failed/.test(l));
    const entry = line.split("\n").find((l) => l.includes("a TLS handshake with this node failed"))!;
    assert.match(entry, /"level":"warn"/);
    assert.match(entry, /"reason":"ECONNRESET"/);
    assert.match(entry, /does not trust this node's certificate/);
    assert.match(entry, /"remote":"127\.0\.0\.1:\d+"/);
    const metrics = await eventually("the failure counted", () => scrape(target), (m) => /deltaset_tls_handshake_failures_total\{reason="ECONNRESET"\} [1-9]/.test(m));
    assert.ok(metrics.length > 0);
  });

  it("serve the CLI with --tls-ca", async () => {
    const r = await runCli(["query", "tls-set", "--addr", nodes[2]!.address, "--tls-ca", clusterCa.ca]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /3 member/);
  });

  it("refuse gossip and joins from a connection without a client certificate", async () => {
    const g = new GossipClient(nodes[0]!.address, serverTls());
    const m = membershipClient(nodes[0]!.address, serverTls());
    try {
      const r = await statusOf(call(g, g.exchange, exchangeFrame("t2")));
      assert.equal(r.code, grpc.status.UNAUTHENTICATED);
      assert.match(r.details, /node certificate issued by the cluster CA/);
      const j = await statusOf(
        call(m, m.join, { cluster: "deltaset", self: { nodeId: "intruder", address: "127.0.0.9:1", state: MemberState.ALIVE, incarnation: 1n, sinceUnixMs: 0n } }),
      );
      assert.equal(j.code, grpc.status.UNAUTHENTICATED);
    } finally {
      g.close();
      m.close();
    }
    const view = await members(nodes[0]!.address);
    assert.equal(view.intruder, undefined);
  });

  it("refuse gossip from a certificate of another CA, and from a client certificate of the cluster CA", async () => {
    const rogueCert = certs.get("rogue")!;
    const bad = new GossipClient(nodes[0]!.address, withClientCert(rogueCert));
    const client = new GossipClient(nodes[0]!.address, withClientCert(certs.get("client")!));
    try {
      const r = await statusOf(call(bad, bad.exchange, exchangeFrame("t2")));
      assert.equal(r.code, grpc.status.UNAUTHENTICATED);
      // Issued by the cluster CA, but without the peer role: it cannot speak for any node.
      const c = await statusOf(call(client, client.exchange, exchangeFrame("t2")));
      assert.equal(c.code, grpc.status.UNAUTHENTICATED);
      assert.match(c.details, /no peer role/);
    } finally {
      bad.close();
      client.close();
    }
  });

  it("never admit a node whose certificate comes from another CA, nor its writes", async () => {
    rogue = await startNodeProcess([
      "--listen", `${ROGUE_HOST}:0`, "--node-id", "rogue", "--data-dir", join(dir, "rogue"), "--seeds", nodes[0]!.address,
      // It trusts the cluster CA (so it can verify the nodes) but holds a certificate of another CA.
      ...tlsArgs(certs.get("rogue")!, clusterCa.ca), ...FAST, "--log-level", "debug",
    ]);
    // Its join attempts reach the cluster and are refused there (not a handshake failure).
    await eventually("the rogue's join refused", async () => rogue!.logs(), (l) => /join call to .* failed: 16 UNAUTHENTICATED: peer calls need mutual TLS with a node certificate/.test(l));
    // Refused as a peer and alone, it takes no write either: a write it took would stay on it.
    const rc = replicaClient(rogue.address, grpc.credentials.createSsl(readFileSync(otherCa.ca)));
    try {
      await eventually(
        "the rogue holds client calls",
        async () => statusOf(call(rc, rc.add, { key: "tls-set", elements: [Buffer.from("from-rogue")], texts: [] })),
        (s) => s.code === grpc.status.UNAVAILABLE && /its seeds refuse it as a peer: its cluster key or node certificate is not the cluster's .*UNAUTHENTICATED peer calls need mutual TLS/.test(s.details),
      );
    } finally {
      rc.close();
    }
    await new Promise((r) => setTimeout(r, 2000));
    for (const n of nodes) {
      const view = await members(n.address);
      assert.equal(view.rogue, undefined, `${n.nodeId} lists the rogue node`);
      assert.deepEqual(await read(n.address, "tls-set"), ["a", "b", "c"]);
    }
  });
});

describe("logs", () => {
  it("every line a node wrote on stderr is one JSON object, grpc-js's and Node's warnings included", () => {
    for (const n of nodes) {
      const lines = n.logs().split("\n").filter((l) => l !== "");
      assert.ok(lines.length > 0, `${n.nodeId} wrote nothing`);
      for (const line of lines) assert.doesNotThrow(() => JSON.parse(line), `${n.nodeId} wrote a line that is not JSON: ${line}`);
    }
  });
});

describe("the loopback test of the plaintext warning", () => {
  it("treats 127.0.0.0/8, ::1 and localhost as loopback and nothing else", () => {
    for (const a of ["127.0.0.1:7070", "127.0.0.84:0", "[::1]:7070", "localhost:1"]) assert.equal(isLoopbackHost(a), true, a);
    for (const a of ["0.0.0.0:7070", "10.0.0.5:7070", "[::]:7070", "deltaset-0.deltaset:7070", "128.0.0.1:1"]) assert.equal(isLoopbackHost(a), false, a);
  });
});
