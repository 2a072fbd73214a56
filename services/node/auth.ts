// Who may call what on a node's one port, checked in a gRPC server interceptor before any handler:
//  - client API (Replica, and Membership's read-only Members and Watch): with a tokens file, the
//    call must carry `authorization: Bearer <token>` naming a token of the file whose scopes cover
//    the method: read (Query, Scan, Export, Keys, Members, Watch), write (Add, AddStream, Remove, Delete, Increment), admin
//    (Merge, Import, and any client method not listed: operator calls are admin unless said otherwise);
//  - peer API (Gossip, Membership's Join, Leave, Ping, PingReq): peer-interceptors.ts;
//  - health and reflection stay open for probes and grpcurl.
// Tokens file: one token per line, optionally preceded by its scopes: `read,write <token>`;
// a bare token (the format before scopes existed) gets read and write, not admin. `admin` grants
// every scope. Blank lines and lines starting with # are skipped.
// Tokens are compared in constant time over their SHA-256 digests, and no token ever reaches a log,
// an error message or a metric label.
import { createHash, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { ConfigError } from "./config.js";
import type { PeerRefusal } from "./peer-interceptors.js";
import { passThrough } from "./pass-through.js";

export type Scope = "read" | "write" | "admin";
export const SCOPES: readonly Scope[] = ["read", "write", "admin"];
/** Scopes of a token written without any (the one-token-per-line format). */
export const DEFAULT_SCOPES: readonly Scope[] = ["read", "write"];

export interface TokenEntry {
  token: string;
  scopes: readonly Scope[];
}

/** The accepted bearer tokens, kept only as digests, each with its scopes. */
export class TokenSet {
  private readonly entries: Array<{ digest: Buffer; scopes: ReadonlySet<Scope> }>;

  constructor(tokens: ReadonlyArray<string | TokenEntry>) {
    if (tokens.length === 0) throw new ConfigError("no bearer tokens given");
    this.entries = tokens.map((t) => {
      const e = typeof t === "string" ? { token: t, scopes: DEFAULT_SCOPES } : t;
      const scopes = new Set<Scope>(e.scopes.includes("admin") ? SCOPES : e.scopes);
      return { digest: digest(e.token), scopes };
    });
  }

  get size(): number {
    return this.entries.length;
  }

  /** The scopes `token` grants (none: not a token of the set); the same time whichever matches. */
  scopesOf(token: string): ReadonlySet<Scope> {
    const d = digest(token);
    let found: ReadonlySet<Scope> = new Set();
    for (const e of this.entries) if (timingSafeEqual(d, e.digest)) found = e.scopes;
    return found;
  }

  /** True when `token` is one of the set. */
  accepts(token: string): boolean {
    return this.scopesOf(token).size > 0;
  }
}

function digest(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/** Visible ASCII without spaces: what fits in an HTTP/2 header value after "Bearer ". */
const TOKEN_CHARS = /^[\x21-\x7e]+$/;

/** Parse a tokens file: `[scope[,scope]] <token>` per line; blank lines and # comments skipped. */
export function parseTokens(text: string, where: string): TokenEntry[] {
  const tokens: TokenEntry[] = [];
  /** The line of each entry of tokens. */
  const lines: number[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    // Messages name the line, never its content.
    const parts = line.split(/[ \t]+/);
    if (parts.length > 2) throw new ConfigError(`${where} line ${i + 1}: expected "[scopes] <token>": a token must be printable ASCII without spaces`);
    const token = parts[parts.length - 1]!;
    if (!TOKEN_CHARS.test(token)) throw new ConfigError(`${where} line ${i + 1}: a token must be printable ASCII without spaces`);
    let scopes: Scope[] = [...DEFAULT_SCOPES];
    if (parts.length === 2) {
      const named = parts[0]!.split(",");
      const unknown = named.filter((s) => !(SCOPES as readonly string[]).includes(s));
      if (unknown.length > 0 || named.length === 0) throw new ConfigError(`${where} line ${i + 1}: scopes are a comma-separated list of read, write, admin`);
      scopes = named as Scope[];
    }
    // The same token twice with other scopes: which line an operator meant is not for us to guess.
    const earlier = tokens.findIndex((t) => t.token === token);
    if (earlier >= 0 && [...tokens[earlier]!.scopes].sort().join() !== [...scopes].sort().join()) {
      throw new ConfigError(`${where} line ${i + 1}: the same token as line ${lines[earlier]} with other scopes; list a token once`);
    }
    if (earlier < 0) {
      tokens.push({ token, scopes });
      lines.push(i + 1);
    }
  });
  if (tokens.length === 0) throw new ConfigError(`${where} holds no token ("[scopes] <token>" per line, # starts a comment)`);
  return tokens;
}

export function loadTokens(path: string): TokenSet {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new ConfigError(`auth tokens file ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  return new TokenSet(parseTokens(text, `auth tokens file ${path}`));
}

/** Why a call was refused: a client-token rule, or a peer rule (peer-interceptors.ts). */
export type Refusal = "token-missing" | "token-invalid" | "token-scope" | PeerRefusal;

export interface AccessPolicy {
  /** Bearer tokens the client API requires (read at each call: a reload takes effect at once); undefined: open. */
  tokens: () => TokenSet | undefined;
  /** Observes refusals (metrics); gets the service and the reason, never the credential. */
  onRefused?: (service: string, reason: Refusal) => void;
}

type Guard = "client" | "peer" | "open";

const MEMBERSHIP_CLIENT_METHODS = new Set(["Members", "Watch"]);

/** Which rule applies to a method path such as /deltaset.v1.Gossip/Exchange. */
export function guardOf(path: string): Guard {
  const [, service = "", method = ""] = path.split("/");
  if (service === "deltaset.v1.Replica") return "client";
  if (service === "deltaset.v1.Gossip") return "peer";
  if (service === "deltaset.v1.Membership") return MEMBERSHIP_CLIENT_METHODS.has(method) ? "client" : "peer";
  return "open";
}

const METHOD_SCOPES: Record<string, Scope> = {
  "/deltaset.v1.Replica/Query": "read",
  "/deltaset.v1.Replica/Scan": "read",
  "/deltaset.v1.Replica/Export": "read",
  "/deltaset.v1.Replica/Keys": "read",
  "/deltaset.v1.Replica/Watch": "read",
  "/deltaset.v1.Replica/Owners": "read",
  "/deltaset.v1.Membership/Members": "read",
  "/deltaset.v1.Membership/Watch": "read",
  "/deltaset.v1.Replica/Add": "write",
  "/deltaset.v1.Replica/AddStream": "write",
  "/deltaset.v1.Replica/Delete": "write",
  "/deltaset.v1.Replica/Remove": "write",
  "/deltaset.v1.Replica/Increment": "write",
  "/deltaset.v1.Replica/Merge": "admin",
  "/deltaset.v1.Replica/Import": "admin",
};

/** The scope a client method needs; admin for any method not listed (fails closed). */
export function scopeOf(path: string): Scope {
  return METHOD_SCOPES[path] ?? "admin";
}

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/** Undefined when the metadata carries an accepted token with `scope` (default: any), else why not. */
export function checkBearer(metadata: grpc.Metadata, tokens: TokenSet, scope?: Scope): Refusal | undefined {
  const values = metadata.get("authorization");
  if (values.length === 0) return "token-missing";
  const m = typeof values[0] === "string" ? BEARER.exec(values[0]) : null;
  if (m === null) return "token-missing";
  const scopes = tokens.scopesOf(m[1]!);
  if (scopes.size === 0) return "token-invalid";
  return scope === undefined || scopes.has(scope) ? undefined : "token-scope";
}

const MESSAGES: Record<"token-missing" | "token-invalid", string> = {
  "token-missing": "this node requires a bearer token: send metadata 'authorization: Bearer <token>'",
  "token-invalid": "the bearer token was not accepted",
};

/** The server interceptor enforcing the client rules. */
export function accessInterceptor(policy: AccessPolicy): grpc.ServerInterceptor {
  return (method, call) => {
    const tokens = guardOf(method.path) === "client" ? policy.tokens() : undefined;
    if (tokens === undefined) return passThrough(call);
    const [, service = "", rpc = ""] = method.path.split("/");
    const scope = scopeOf(method.path);
    const refuse = (reason: "token-missing" | "token-invalid" | "token-scope") => {
      policy.onRefused?.(service, reason);
      const status =
        reason === "token-scope"
          ? { code: grpc.status.PERMISSION_DENIED, details: `${rpc} needs a token with the ${scope} scope` }
          : { code: grpc.status.UNAUTHENTICATED, details: MESSAGES[reason] };
      call.sendStatus({ ...status, metadata: new grpc.Metadata() });
    };
    let accepted: grpc.Metadata | undefined;
    const onReceiveMetadata = (metadata: grpc.Metadata, pass: (m: grpc.Metadata) => void) => {
      const bad = checkBearer(metadata, tokens, scope);
      if (bad !== undefined) return refuse(bad as "token-missing" | "token-invalid" | "token-scope");
      accepted = metadata;
      pass(metadata);
    };
    if (!method.requestStream && !method.responseStream) return new grpc.ServerInterceptingCall(call, { start: (next) => next({ onReceiveMetadata }) });
    // A stream (Watch, Scan, Export, AddStream, Import) lasts: its token is checked again, against
    // the tokens of the moment, at each message either way, so a token removed from the file (or
    // its scope narrowed) ends the streams opened with it (the handler sees the call cancelled).
    let ended = false;
    /** The token set the call's token was last checked against: a reload replaces it. */
    let checked = tokens;
    const stillValid = (): boolean => {
      if (ended) return false;
      const now = policy.tokens();
      if (now === checked || now === undefined || accepted === undefined) return true;
      checked = now;
      const bad = checkBearer(accepted, now, scope);
      if (bad === undefined) return true;
      ended = true;
      refuse(bad as "token-missing" | "token-invalid" | "token-scope");
      return false;
    };
    return new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata,
          onReceiveMessage: (message, pass) => {
            if (stillValid()) pass(message);
          },
        }),
      sendMessage: (message, next) => {
        if (stillValid()) next(message);
      },
    });
  };
}

/** Metadata carrying a bearer token (works over TLS and plaintext alike). */
export function bearerMetadata(token: string): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${token}`);
  return md;
}
