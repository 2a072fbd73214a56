// Test certificates made with the openssl command at test time: a CA, and leaf certificates it
// signs for IP addresses (SAN IP:...), usable as server and client certificates (mutual TLS).
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
  issue(name: string, ips: string[]): CertFiles;
}

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
    issue(leaf, ips) {
      const cert = join(dir, `${leaf}.pem`);
      const key = join(dir, `${leaf}.key`);
      const csr = join(dir, `${leaf}.csr`);
      const ext = join(dir, `${leaf}.ext`);
      writeFileSync(
        ext,
        [
          `subjectAltName=${ips.map((ip) => `IP:${ip}`).join(",")}`,
          "basicConstraints=CA:FALSE",
          "keyUsage=critical,digitalSignature",
          "extendedKeyUsage=serverAuth,clientAuth",
        ].join("\n") + "\n",
      );
      openssl(["req", ...CURVE, "-keyout", key, "-out", csr, "-subj", `/CN=${leaf}`]);
      openssl(["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", caKey, "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", ext]);
      return { cert, key };
    },
  };
}
