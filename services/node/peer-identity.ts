// Which node a peer certificate speaks for (mutual TLS). A node certificate names its node id in a
// URI subject alternative name `spiffe://deltaset/node/<node id>` and carries the peer role: its
// extended key usage lists both serverAuth and clientAuth (a node serves and dials). A client
// certificate (clientAuth only, or no node URI) or a bare certificate without those extensions is
// no peer, even when the cluster CA issued it. The CA must never put a node URI into a client
// certificate: that URI is what grants the peer role.
import { X509Certificate } from "node:crypto";

export const NODE_URI_PREFIX = "spiffe://deltaset/node/";
const SERVER_AUTH = "1.3.6.1.5.5.7.3.1";
const CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";

/** The parts of a peer certificate (as tls.PeerCertificate reports it) this check reads. */
export interface PeerCertificateView {
  subjectaltname?: string;
  ext_key_usage?: string[];
  raw?: Buffer;
}

export type CertificateRefusal = "peer-certificate" | "peer-certificate-role" | "peer-certificate-identity";

/** The node ids a subjectAltName string names with the node URI ("URI:spiffe://deltaset/node/n1, IP Address:..."). */
export function nodeIdsOf(subjectAltName: string | undefined): string[] {
  if (subjectAltName === undefined) return [];
  const ids: string[] = [];
  for (const part of subjectAltName.split(/,\s*/)) {
    const m = /^URI:(.*)$/.exec(part.trim());
    if (m && m[1]!.startsWith(NODE_URI_PREFIX)) {
      const id = m[1]!.slice(NODE_URI_PREFIX.length);
      if (/^[A-Za-z0-9._-]{1,128}$/.test(id)) ids.push(id);
    }
  }
  return ids;
}

/** The node id of a verified peer certificate, or why it cannot act as a node. */
export function certificateNodeId(cert: PeerCertificateView | undefined): { ok: true; nodeId: string } | { ok: false; reason: CertificateRefusal } {
  if (cert === undefined || (cert.raw === undefined && cert.subjectaltname === undefined)) return { ok: false, reason: "peer-certificate" };
  const usage = cert.ext_key_usage ?? [];
  if (!usage.includes(SERVER_AUTH) || !usage.includes(CLIENT_AUTH)) return { ok: false, reason: "peer-certificate-role" };
  const ids = nodeIdsOf(cert.subjectaltname);
  // Exactly one node id: a certificate for several nodes could speak as any of them.
  if (ids.length !== 1) return { ok: false, reason: "peer-certificate-identity" };
  return { ok: true, nodeId: ids[0]! };
}

/** Seconds until a PEM certificate's notAfter (negative when expired), and its validity window. */
export function certificateValidity(pem: Buffer, now = Date.now()): { notBefore: number; notAfter: number; secondsLeft: number } {
  const x = new X509Certificate(pem);
  const notBefore = Date.parse(x.validFrom);
  const notAfter = Date.parse(x.validTo);
  return { notBefore, notAfter, secondsLeft: Math.floor((notAfter - now) / 1000) };
}
