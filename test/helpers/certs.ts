// Test certificates made with the openssl command at test time: a CA, and leaf certificates it
// signs for IP addresses (SAN IP:...), usable as server and client certificates (mutual TLS). A
// node certificate also names its node id (URI SAN spiffe://deltaset/node/<id>); the extended key
// usage can be narrowed (a client certificate: clientAuth) or left out.
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

export interface CertFiles {
  cert: string;
  key: string;
}

export interface TestCa {
  /** The CA certificate (PEM file). */
  ca: string;
  /** Issue a certificate for these IP addresses, signed by this CA. */
  issue(name: string, ips: string[], opts?: LeafOptions): CertFiles;
}

export interface LeafOptions {
  /** URI SANs, e.g. nodeUri("n1"). */
  uris?: string[];
  /** extendedKeyUsage value (default serverAuth,clientAuth); "" leaves the extension out. */
  eku?: string;
  /** Validity in days (default 2). */
  days?: number;
}

/** The URI SAN naming a node id in its certificate. */
export const nodeUri = (nodeId: string) => `spiffe://deltaset/node/${nodeId}`;

function openssl(args: string[]): void {
  execFileSync("openssl", args, { stdio: ["ignore", "ignore", "pipe"] });
}

const CURVE = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];

export function makeCa(dir: string, name: string): TestCa {
  const ca = join(dir, `${name}.pem`);
  const caKey = join(dir, `${name}.key`);
  openssl([
    "req", "-x509", ...CURVE, "-keyout", caKey, "-out", ca, "-days", "2", "-subj", `/CN=${name}`,
    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
  ]);
  return {
    ca,
    issue(leaf, ips, opts = {}) {
      const cert = join(dir, `${leaf}.pem`);
      const key = join(dir, `${leaf}.key`);
      const csr = join(dir, `${leaf}.csr`);
      const ext = join(dir, `${leaf}.ext`);
      writeFileSync(
        ext,
        [
          `subjectAltName=${[...ips.map((ip) => `IP:${ip}`), ...(opts.uris ?? []).map((u) => `URI:${u}`)].join(",")}`,
          "basicConstraints=CA:FALSE",
          "keyUsage=critical,digitalSignature",
          ...(opts.eku === "" ? [] : [`extendedKeyUsage=${opts.eku ?? "serverAuth,clientAuth"}`]),
        ].join("\n") + "\n",
      );
      openssl(["req", ...CURVE, "-keyout", key, "-out", csr, "-subj", `/CN=${leaf}`]);
      openssl(["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", caKey, "-CAcreateserial", "-out", cert, "-days", String(opts.days ?? 2), "-extfile", ext]);
      return { cert, key };
    },
  };
}
