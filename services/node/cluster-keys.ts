// The cluster key file: the shared secrets with which nodes prove to each other that they belong to
// the cluster (see peer-auth.ts). Format: one key per line, blank lines and lines starting with #
// skipped; a key is 32 to 512 characters of A-Z a-z 0-9 + / = _ - (what `openssl rand -base64 32`,
// `openssl rand -hex 32` and generateClusterKey() print). The first key signs, every key verifies,
// so a key is rotated in three steps: add the new one second, make it first, remove the old one.
// Keys never reach a log: they are named by a short fingerprint (the start of their SHA-256).
import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { ConfigError } from "./config.js";

const KEY_CHARS = /^[A-Za-z0-9+/=_-]{32,512}$/;

/** The installed cluster keys: the first signs, all verify. */
export class ClusterKeyring {
  readonly keys: readonly Buffer[];

  constructor(keys: readonly Buffer[]) {
    if (keys.length === 0) throw new ConfigError("no cluster key given");
    this.keys = keys;
  }

  /** The signing key. */
  get signer(): Buffer {
    return this.keys[0]!;
  }

  /** Fingerprints for logs (never the keys). */
  fingerprints(): string[] {
    return this.keys.map(fingerprint);
  }
}

export function fingerprint(key: Buffer): string {
  return createHash("sha256").update(key).digest("hex").slice(0, 12);
}

/** Parse a key file's text; messages name lines, never their content. */
export function parseClusterKeys(text: string, where: string): ClusterKeyring {
  const keys: Buffer[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    if (!KEY_CHARS.test(line)) throw new ConfigError(`${where} line ${i + 1}: a cluster key is 32 to 512 characters of A-Z a-z 0-9 + / = _ -`);
    keys.push(Buffer.from(line, "utf8"));
  });
  if (keys.length === 0) throw new ConfigError(`${where} holds no cluster key (one per line, # starts a comment)`);
  return new ClusterKeyring(keys);
}

export function loadClusterKeys(path: string): ClusterKeyring {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new ConfigError(`cluster key file ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  return parseClusterKeys(text, `cluster key file ${path}`);
}

/** A new random key (256 bits, base64url: 43 characters). */
export function generateClusterKey(): string {
  return randomBytes(32).toString("base64url");
}
