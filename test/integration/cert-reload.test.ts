// Certificate reload on a real node: after the certificate files are replaced and the node gets
// SIGHUP, new connections are served the new certificate, the node keeps running, the expiry
// metric follows, and a certificate close to its expiry is warned about. Peers dial each other
// with the reloaded certificate and CA too: a CA rotation needs no restart of the dialing node.
import { strict as assert } from "node:assert";
import { X509Certificate } from "node:crypto";
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:tls";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { type CertFiles, type TestCa, makeCa, nodeUri } from "../helpers/certs.ts";
import { type NodeProcess, startNodeProcess } from "../helpers/node-process.ts";
import { eventually } from "../helpers/eventually.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-cert-reload-"));
const HOST = "127.0.0.106";
let ca: TestCa;
let first: CertFiles;
const live = { cert: join(dir, "live.pem"), key: join(dir, "live.key") };
let node: NodeProcess;

before(async () => {
  ca = makeCa(dir, "ca");
  first = ca.issue("first", [HOST], { uris: [nodeUri("r1")], days: 2 });
  copyFileSync(first.cert, live.cert);
  copyFileSync(first.key, live.key);
  node = await startNodeProcess(["--listen", `${HOST}:0`, "--node-id", "r1", "--data-dir", join(dir, "data"), "--tls-cert", live.cert, "--tls-key", live.key, "--metrics-listen", "127.0.0.1:0"]);
});

after(async () => {
  await node?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The serial number of the certificate a new TLS connection to the node is served. */
function servedSerial(): Promise<string> {
  const port = Number(node.address.slice(node.address.lastIndexOf(":") + 1));
  return new Promise((resolve, reject) => {
    const s = connect({ host: HOST, port, ca: readFileSync(ca.ca), ALPNProtocols: ["h2"] }, () => {
      const serial = s.getPeerCertificate().serialNumber;
      s.destroy();
      resolve(serial);
    });
    s.once("error", reject);
  });
}

function serialOf(certFile: string): string {
  return new X509Certificate(readFileSync(certFile)).serialNumber;
}

async function expirySeconds(): Promise<number> {
  const metrics = /"endpoint":"(http:[^"]+)"/.exec(node.logs())?.[1];
  const text = await (await fetch(metrics!)).text();
  const m = /^deltaset_tls_certificate_expiry_seconds(?:\{[^}]*\})? (\S+)$/m.exec(text);
  assert.ok(m, "the expiry gauge is exported");
  return Number(m[1]);
}

describe("a node with TLS", () => {
  it("warns at start that its certificate expires within 14 days, and exports the time left", async () => {
    assert.match(node.logs(), /"level":"warn","msg":"the TLS certificate expires in less than 14 days/);
    const left = await expirySeconds();
    assert.ok(left > 86_400 && left <= 2 * 86_400, String(left));
  });

  it("serves a renewed certificate to new connections after SIGHUP, without stopping", async () => {
    assert.equal((await servedSerial()).toUpperCase(), serialOf(first.cert).toUpperCase());
    const renewed = ca.issue("renewed", [HOST], { uris: [nodeUri("r1")], days: 30 });
    copyFileSync(renewed.cert, live.cert);
    copyFileSync(renewed.key, live.key);
    node.child.kill("SIGHUP");
    const want = serialOf(renewed.cert).toUpperCase();
    await eventually("the renewed certificate is served", async () => (await servedSerial()).toUpperCase(), (s) => s === want);
    assert.equal(node.child.exitCode, null);
    const left = await expirySeconds();
    assert.ok(left > 29 * 86_400, String(left));
  });
});

describe("peers after a CA rotation", () => {
  it("dial each other with the reloaded certificate and CA (no restart of the dialing node)", async () => {
    const A = "127.0.0.107:7641";
    const B = "127.0.0.108:7641";
    const old = makeCa(dir, "old-ca");
    const next = makeCa(dir, "new-ca");
    const files = (n: string) => ({ cert: join(dir, `${n}-live.pem`), key: join(dir, `${n}-live.key`), ca: join(dir, `${n}-ca.pem`) });
    const install = (n: string, authority: TestCa, ip: string) => {
      const c = authority.issue(`${n}-${authority === old ? "old" : "new"}`, [ip], { uris: [nodeUri(n)] });
      const f = files(n);
      copyFileSync(c.cert, f.cert);
      copyFileSync(c.key, f.key);
      copyFileSync(authority.ca, f.ca);
    };
    install("pa", old, "127.0.0.107");
    install("pb", old, "127.0.0.108");
    const args = (n: string, listen: string, seed: string) => {
      const f = files(n);
      return ["--listen", listen, "--node-id", n, "--data-dir", join(dir, n), "--seeds", seed, "--tls-cert", f.cert, "--tls-key", f.key, "--tls-ca", f.ca,
        "--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "150"];
    };
    const client = (addr: string, n: string) => replicaClient(addr, grpc.credentials.createSsl(readFileSync(files(n).ca)));
    const has = async (addr: string, n: string, el: string) => {
      const c = client(addr, n);
      try {
        const q = await call(c, c.query, { key: "rot", elements: [Buffer.from(el)], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs: 2000 });
        return q.presence[0]?.present === true;
      } finally {
        c.close();
      }
    };
    const add = async (addr: string, n: string, el: string) => {
      const c = client(addr, n);
      try {
        await call(c, c.add, { key: "rot", elements: [Buffer.from(el)], texts: [] });
      } finally {
        c.close();
      }
    };
    let a = await startNodeProcess(args("pa", A, B));
    let b = await startNodeProcess(args("pb", B, A));
    try {
      await add(A, "pa", "before");
      await eventually("the first add on the second node", () => has(B, "pb", "before"), (x) => x);
      // Both move to the new CA: the first node by SIGHUP only, the second by a restart (so that
      // the first must open a new connection to it, with what it reloaded).
      install("pa", next, "127.0.0.107");
      install("pb", next, "127.0.0.108");
      a.child.kill("SIGHUP");
      await eventually("the first node reloaded", async () => a.logs(), (l) => /credentials reloaded/.test(l));
      await b.kill();
      b = await startNodeProcess(args("pb", B, A));
      await add(A, "pa", "after");
      await eventually("the add made after the rotation on the second node", () => has(B, "pb", "after"), (x) => x, 20_000, () => {
        process.stderr.write(`--- pa\n${a.logs().split("\n").slice(-15).join("\n")}\n--- pb\n${b.logs().split("\n").slice(-15).join("\n")}\n`);
      });
      assert.equal(a.child.exitCode, null, "the first node never restarted");
    } finally {
      await Promise.all([a.kill(), b.kill()]);
    }
  });
});
