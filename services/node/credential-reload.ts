// The credentials a running node can replace without a restart: bearer tokens, cluster keys and
// its TLS certificate, key and CA. reload() rereads every configured file (on SIGHUP, and when a
// watched file changes: Kubernetes updates a mounted Secret by swapping a symlink, which a stat
// poll sees); a file that no longer parses leaves the credential in use unchanged and is logged
// as an error, so a half-written file never locks the cluster out. New TLS material reaches new
// connections through a certificate provider (existing ones keep their session). The certificate's
// remaining validity is exposed for a metric, and logged ahead of its expiry.
import { unwatchFile, watchFile } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { type TokenSet, loadTokens } from "./auth.js";
import { type ClusterKeyring, loadClusterKeys } from "./cluster-keys.js";
import { worldReadable } from "./secret-files.js";
import type { NodeConfig } from "./config.js";
import type { Logger } from "../common/logger.js";
import { certificateValidity } from "./peer-identity.js";
import { type TlsMaterial, loadTls } from "./tls.js";

/** Warn when the certificate has fewer days than this left. */
export const EXPIRY_WARN_DAYS = 14;
/** How often watched files are polled, and expiry rechecked at most (ms). */
const POLL_MS = 5000;
const EXPIRY_CHECK_MS = 60 * 60 * 1000;

type Listener<T> = (update: T) => void;

/** A certificate provider whose material can be replaced; listeners hear each replacement. */
class SwappableProvider implements grpc.experimental.CertificateProvider {
  private readonly ca = new Set<Listener<grpc.experimental.CaCertificateUpdate | null>>();
  private readonly identity = new Set<Listener<grpc.experimental.IdentityCertificateUpdate | null>>();

  constructor(private material: TlsMaterial) {}

  set(material: TlsMaterial): void {
    this.material = material;
    for (const l of this.ca) l(material.ca === undefined ? null : { caCertificate: material.ca });
    for (const l of this.identity) l({ certificate: material.cert, privateKey: material.key });
  }

  // Answers on the next microtask, as file-watching providers do: the server registers its
  // watcher only after adding the listeners, and would miss a synchronous answer.
  addCaCertificateListener(l: Listener<grpc.experimental.CaCertificateUpdate | null>): void {
    this.ca.add(l);
    queueMicrotask(() => l(this.material.ca === undefined ? null : { caCertificate: this.material.ca }));
  }
  removeCaCertificateListener(l: Listener<grpc.experimental.CaCertificateUpdate | null>): void {
    this.ca.delete(l);
  }
  addIdentityCertificateListener(l: Listener<grpc.experimental.IdentityCertificateUpdate | null>): void {
    this.identity.add(l);
    queueMicrotask(() => l({ certificate: this.material.cert, privateKey: this.material.key }));
  }
  removeIdentityCertificateListener(l: Listener<grpc.experimental.IdentityCertificateUpdate | null>): void {
    this.identity.delete(l);
  }
}

export class NodeCredentials {
  tokens: TokenSet | undefined;
  keys: ClusterKeyring | undefined;
  tls: TlsMaterial | undefined;
  private readonly provider: SwappableProvider | undefined;
  private readonly watched: string[] = [];
  private expiryTimer: NodeJS.Timeout | undefined;
  private log: Logger;

  /** Reads everything once; throws ConfigError (the node does not start) on any bad file. */
  constructor(private readonly config: NodeConfig, log: Logger) {
    this.log = log;
    this.tls = loadTls(config.tls);
    this.tokens = nonEmpty(config.authTokensFile) ? loadTokens(config.authTokensFile!) : undefined;
    this.keys = nonEmpty(config.clusterKeyFile) ? loadClusterKeys(config.clusterKeyFile!) : undefined;
    this.provider = this.tls === undefined ? undefined : new SwappableProvider(this.tls);
  }

  /** Log through the node's logger (known once the store is open); warns about open secret files. */
  useLogger(log: Logger): void {
    this.log = log;
    this.warnOpenSecrets();
  }

  /** A warning for each secret file every user of the host may read (secret-files.ts). */
  private warnOpenSecrets(): void {
    const c = this.config;
    const files = [
      { what: "auth tokens file", path: c.authTokensFile },
      { what: "cluster key file", path: c.clusterKeyFile },
      { what: "TLS private key", path: this.tls === undefined ? undefined : c.tls.key },
    ];
    for (const f of worldReadable(files)) {
      this.log.warn(`the ${f.what} is readable by every user of this host: chmod o-r it (600, or 440 with a group)`, { path: f.path, mode: f.mode });
    }
  }

  /**
   * Credentials for calls to peers; undefined (plaintext) when TLS is off. With a CA they follow
   * reloads like the server's: each new connection to a peer presents the current certificate and
   * verifies against the current CA (a rotated CA or a renewed certificate needs no restart).
   * Without a CA, peers are verified against the system's roots and the certificate is the one
   * read at start.
   */
  peerCredentials(): grpc.ChannelCredentials | undefined {
    if (this.tls === undefined || this.provider === undefined) return undefined;
    if (this.tls.ca === undefined) return grpc.credentials.createSsl(null, this.tls.key, this.tls.cert);
    return grpc.experimental.createCertificateProviderChannelCredentials(this.provider, this.provider);
  }

  /** Server credentials that follow reloads; plaintext when TLS is off. */
  serverCredentials(): grpc.ServerCredentials {
    if (this.provider === undefined) return grpc.ServerCredentials.createInsecure();
    // A certificate is requested when a CA is set but never required in the handshake: clients
    // need only server TLS, peers are checked per call (peer-interceptors.ts).
    return grpc.experimental.createCertificateProviderServerCredentials(this.provider, this.tls?.mutual === true ? this.provider : null, false);
  }

  /** Seconds until the certificate expires (negative: expired); undefined without TLS. */
  certificateSecondsLeft(now = Date.now()): number | undefined {
    return this.tls === undefined ? undefined : certificateValidity(this.tls.cert, now).secondsLeft;
  }

  /** Reread every configured file; keeps what fails to load. Returns what changed. */
  reload(reason: string): string[] {
    const changed: string[] = [];
    const kept: string[] = [];
    const attempt = (what: string, load: () => void) => {
      try {
        load();
        changed.push(what);
      } catch (err) {
        kept.push(what);
        this.log.error(`reload: ${what} kept as it was`, { reason, err: (err as Error).message });
      }
    };
    const c = this.config;
    if (nonEmpty(c.authTokensFile)) attempt("tokens", () => (this.tokens = loadTokens(c.authTokensFile!)));
    if (nonEmpty(c.clusterKeyFile)) attempt("cluster keys", () => (this.keys = loadClusterKeys(c.clusterKeyFile!)));
    if (this.provider !== undefined) {
      attempt("certificate", () => {
        const m = loadTls(c.tls)!;
        certificateValidity(m.cert); // a certificate that does not parse is not installed
        this.tls = m;
        this.provider!.set(m);
      });
    }
    const held = {
      reason,
      reloaded: changed,
      ...(this.tokens ? { tokens: this.tokens.size } : {}),
      ...(this.keys ? { clusterKeys: this.keys.fingerprints() } : {}),
    };
    // "credentials reloaded" only when every file took: a rotation step waits for that line.
    if (kept.length === 0) this.log.info("credentials reloaded", held);
    else this.log.warn("credentials reload failed: some files kept as they were (fix them and reload again)", { ...held, kept });
    this.warnOpenSecrets();
    this.checkExpiry();
    return changed;
  }

  /** Watch the configured files (stat polling) and reload when one changes; start expiry checks. */
  watch(): void {
    const c = this.config;
    for (const f of [c.authTokensFile, c.clusterKeyFile, c.tls.cert, c.tls.key, c.tls.ca]) {
      if (!nonEmpty(f) || this.watched.includes(f!)) continue;
      this.watched.push(f!);
      watchFile(f!, { interval: POLL_MS, persistent: false }, (cur, prev) => {
        if (cur.mtimeMs !== prev.mtimeMs || cur.size !== prev.size || cur.ino !== prev.ino) this.reload(`file changed: ${f}`);
      });
    }
    this.checkExpiry();
    this.expiryTimer = setInterval(() => this.checkExpiry(), EXPIRY_CHECK_MS);
    this.expiryTimer.unref();
  }

  close(): void {
    for (const f of this.watched.splice(0)) unwatchFile(f);
    if (this.expiryTimer) clearInterval(this.expiryTimer);
  }

  /** Warn ahead of expiry, error once expired (peers and clients then refuse the node). */
  private checkExpiry(): void {
    const left = this.certificateSecondsLeft();
    if (left === undefined) return;
    const fields = { cert: this.config.tls.cert, secondsLeft: left, notAfter: new Date(Date.now() + left * 1000).toISOString() };
    if (left <= 0) this.log.error("the TLS certificate has expired: peers and clients refuse this node; install a renewed one and send SIGHUP", fields);
    else if (left < EXPIRY_WARN_DAYS * 86_400) this.log.warn(`the TLS certificate expires in less than ${EXPIRY_WARN_DAYS} days: renew it (reloaded on SIGHUP or file change)`, fields);
  }
}

function nonEmpty(path: string | undefined): boolean {
  return path !== undefined && path !== "";
}
