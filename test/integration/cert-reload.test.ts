// Certificate reload on a real node: after the certificate files are replaced and the node gets
// SIGHUP, new connections are served the new certificate, the node keeps running, the expiry
// metric follows, and a certificate close to its expiry is warned about.
import { strict as assert } from "node:assert";
import { X509Certificate } from "node:crypto";
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:tls";
import { after, before, describe, it } from "node:test";
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
