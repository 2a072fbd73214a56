// Server TLS everywhere with a private CA and no node certificates (--tls-mutual false): the CA
// verifies the peers a node dials, the cluster key authenticates peer calls, and one certificate
// may serve every node (as the kustomize tls component mounts it). Two real nodes form a cluster
// and replicate; a client holding only the CA reads; a client that does not trust the CA cannot.
import { strict as assert } from "node:assert";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import type { ScanChunk } from "../../services/gen/deltaset/v1/replica.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { generateClusterKey } from "../../services/node/cluster-keys.ts";
import { makeCa } from "../helpers/certs.ts";
import { eventually } from "../helpers/eventually.ts";
import { type NodeProcess, startNodeProcess } from "../helpers/node-process.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-tls-server-"));
const A = "127.0.0.161:7621";
const B = "127.0.0.162:7621";
const nodes: NodeProcess[] = [];
let caPem: Buffer;

before(async () => {
  const ca = makeCa(dir, "private-ca");
  // One certificate for both nodes (no node id in it), as a shared Kubernetes Secret would be.
  const shared = ca.issue("shared", ["127.0.0.161", "127.0.0.162"]);
  caPem = readFileSync(ca.ca);
  const keyFile = join(dir, "cluster.key");
  writeFileSync(keyFile, `${generateClusterKey()}\n`, { mode: 0o600 });
  const common = ["--tls-cert", shared.cert, "--tls-key", shared.key, "--tls-ca", ca.ca, "--tls-mutual", "false", "--cluster-key-file", keyFile];
  const fast = ["--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "150"];
  nodes.push(await startNodeProcess(["--listen", A, "--node-id", "sa", "--data-dir", join(dir, "a"), "--seeds", B, ...common, ...fast]));
  nodes.push(await startNodeProcess(["--listen", B, "--node-id", "sb", "--data-dir", join(dir, "b"), "--seeds", A, ...common, ...fast]));
});

after(async () => {
  await Promise.all(nodes.map((n) => n.kill()));
  rmSync(dir, { recursive: true, force: true });
});

async function read(addr: string, creds: grpc.ChannelCredentials): Promise<string[]> {
  const c = replicaClient(addr, creds);
  try {
    const out: string[] = [];
    for await (const ch of c.scan({ key: "tls", chunkSize: 100, startAfter: Buffer.alloc(0), withText: false }) as AsyncIterable<ScanChunk>) {
      out.push(...ch.members.map((m) => m.element.toString()));
    }
    return out;
  } finally {
    c.close();
  }
}

it("forms a cluster and replicates over server TLS, with peers proven by the cluster key", async () => {
  const creds = grpc.credentials.createSsl(caPem);
  const c = replicaClient(A, creds);
  try {
    await call(c, c.add, { key: "tls", elements: [Buffer.from("x"), Buffer.from("y")], texts: [] });
  } finally {
    c.close();
  }
  await eventually("the add on the other node", () => read(B, creds), (r) => JSON.stringify(r) === JSON.stringify(["x", "y"]), 20_000, () => {
    for (const n of nodes) process.stderr.write(n.logs().split("\n").slice(-20).join("\n"));
  });
  assert.match(nodes[0]!.logs(), /"tls":"server"/);
});

it("refuses a client that does not trust the cluster's CA", async () => {
  await assert.rejects(read(A, grpc.credentials.createSsl()), (e: grpc.ServiceError) => e.code === grpc.status.UNAVAILABLE);
});

it("a node that does not trust the cluster's CA says so at warn when its join fails", async () => {
  const other = makeCa(dir, "other-ca");
  const own = other.issue("stranger", ["127.0.0.163"]);
  const keyFile = join(dir, "cluster.key");
  const stranger = await startNodeProcess([
    "--listen", "127.0.0.163:7621", "--node-id", "sc", "--data-dir", join(dir, "c"), "--seeds", A,
    "--tls-cert", own.cert, "--tls-key", own.key, "--tls-ca", other.ca, "--tls-mutual", "false", "--cluster-key-file", keyFile,
    "--probe-interval-ms", "300",
  ]);
  nodes.push(stranger);
  await eventually("a warning naming the failed join", async () => stranger.logs(), (l) => /"level":"warn","msg":"membership: join call to 127\.0\.0\.161:7621 failed[^"]*certificate/.test(l), 15_000);
});

