// TLS material of a node: the certificate, key and CA read from files (refused at start when the
// key is not the certificate's, the certificate is not valid now or the CA file holds no certificate), the mode they give (off,
// server, mutual) and whether a call's connection presented a verified certificate. The server
// and peer credentials built from it, which follow reloads, are in credential-reload.ts; what a
// peer certificate must name is in peer-identity.ts.
import { type KeyObject, X509Certificate, createPrivateKey } from "node:crypto";
import { readFileSync } from "node:fs";
import { ConfigError, type TlsSettings } from "./config.js";

export interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
  /** The cluster CA: peers' certificates are verified against it when dialing them. */
  ca?: Buffer;
  /**
   * Mutual TLS: a CA is set and --tls-mutual is not false. Peers must then present a node
   * certificate from the CA naming their node id (peer-identity.ts); without it the CA only
   * verifies the servers a node dials, and peers prove themselves with the cluster key.
   */
  mutual: boolean;
}

export type TlsMode = "off" | "server" | "mutual";

function readPem(what: string, path: string): Buffer {
  let pem: Buffer;
  try {
    pem = readFileSync(path);
  } catch (err) {
    throw new ConfigError(`${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  if (!pem.includes("-----BEGIN ")) throw new ConfigError(`${what} ${path} holds no PEM data`);
  return pem;
}

/** Read the configured certificate files; undefined when TLS is off. */
export function loadTls(tls: TlsSettings): TlsMaterial | undefined {
  if (tls.cert === undefined || tls.key === undefined) {
    if (tls.ca !== undefined) throw new ConfigError("tls.ca needs tls.cert and tls.key (the node's own certificate)");
    return undefined;
  }
  const material: TlsMaterial = { cert: readPem("tls.cert", tls.cert), key: readPem("tls.key", tls.key), mutual: tls.ca !== undefined && tls.mutual !== false };
  if (tls.ca !== undefined) {
    material.ca = readPem("tls.ca", tls.ca);
    checkCa(material.ca, tls.ca);
  }
  checkCertificate(material, tls.cert, tls.key);
  return material;
}

const CERTIFICATE_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/**
 * Refuse a CA file without a readable certificate (a private key given as the CA, say): TLS would
 * take it and verify no peer, leaving a node that refuses every peer and is refused by them.
 */
function checkCa(pem: Buffer, path: string): void {
  const blocks = pem.toString("latin1").match(CERTIFICATE_BLOCK) ?? [];
  if (blocks.length === 0) {
    throw new ConfigError(`tls.ca ${path} holds no certificate (no PEM "BEGIN CERTIFICATE" block): give the CA's certificate (--tls-ca), not a key or a request`);
  }
  for (const [i, block] of blocks.entries()) {
    try {
      new X509Certificate(block);
    } catch (err) {
      throw new ConfigError(`tls.ca ${path}: certificate ${i + 1} of ${blocks.length} is not readable: ${(err as Error).message}`);
    }
  }
}

/**
 * Refuse a certificate that is not valid now, or a key that is not the certificate's, with one
 * line saying which (TLS would otherwise fail later, on the peers' side, with a vaguer reason).
 */
function checkCertificate(m: TlsMaterial, certPath: string, keyPath: string, now = new Date()): void {
  let cert: X509Certificate;
  let key: KeyObject;
  try {
    cert = new X509Certificate(m.cert);
  } catch (err) {
    throw new ConfigError(`tls.cert ${certPath} is not a readable certificate: ${(err as Error).message}`);
  }
  try {
    key = createPrivateKey(m.key);
  } catch (err) {
    throw new ConfigError(`tls.key ${keyPath} is not a readable private key: ${(err as Error).message}`);
  }
  if (!cert.checkPrivateKey(key)) {
    throw new ConfigError(`tls.key ${keyPath} does not match the certificate in tls.cert ${certPath}; use the key the certificate was issued for`);
  }
  const from = new Date(cert.validFrom);
  const to = new Date(cert.validTo);
  if (now > to) throw new ConfigError(`tls.cert ${certPath} expired on ${to.toISOString()}; renew it`);
  if (now < from) throw new ConfigError(`tls.cert ${certPath} is not valid before ${from.toISOString()}; check the clock or the certificate`);
}

export function tlsMode(m: TlsMaterial | undefined): TlsMode {
  return m === undefined ? "off" : m.mutual ? "mutual" : "server";
}

/** True when the call's connection presented a certificate that verified against the server's CA. */
export function hasVerifiedPeerCertificate(call: { getAuthContext(): { transportSecurityType?: string; sslPeerCertificate?: unknown } }): boolean {
  const auth = call.getAuthContext();
  return auth.transportSecurityType === "ssl" && auth.sslPeerCertificate !== undefined;
}
