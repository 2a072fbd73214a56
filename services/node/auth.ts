// Who may call what on a node's one port, checked in a gRPC server interceptor before any handler:
//  - client API (Replica, and Membership's read-only Members and Watch): with a tokens file, the
//    call must carry `authorization: Bearer <token>` naming one of its tokens;
//  - peer API (Gossip, Membership's Join, Leave, Ping, PingReq): with a cluster CA (mutual TLS),
//    the connection must have presented a certificate chained to that CA;
//  - health and reflection stay open for probes and grpcurl.
// Tokens are compared in constant time over their SHA-256 digests, and no token ever reaches a log,
// an error message or a metric label.
import { createHash, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { ConfigError } from "./config.js";
import { hasVerifiedPeerCertificate } from "./tls.js";

/** The accepted bearer tokens, kept only as digests. */
export class TokenSet {
  private readonly digests: Buffer[];

  constructor(tokens: readonly string[]) {
    if (tokens.length === 0) throw new ConfigError("no bearer tokens given");
    this.digests = tokens.map(digest);
  }

  get size(): number {
    return this.digests.length;
  }

  /** True when `token` is one of the set; takes the same time whichever token (if any) matches. */
  accepts(token: string): boolean {
    const d = digest(token);
    let ok = false;
    for (const known of this.digests) ok = timingSafeEqual(d, known) || ok;
    return ok;
  }
}

function digest(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/** Visible ASCII without spaces: what fits in an HTTP/2 header value after "Bearer ". */
const TOKEN_CHARS = /^[\x21-\x7e]+$/;

/** Parse a tokens file: one token per line; blank lines and lines starting with # are skipped. */
export function parseTokens(text: string, where: string): string[] {
  const tokens: string[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    // The message names the line, never its content.
    if (!TOKEN_CHARS.test(line)) throw new ConfigError(`${where} line ${i + 1}: a token must be printable ASCII without spaces`);
    tokens.push(line);
  });
  if (tokens.length === 0) throw new ConfigError(`${where} holds no token (one per line, # starts a comment)`);
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

export type Refusal = "token-missing" | "token-invalid" | "peer-certificate";

export interface AccessPolicy {
  /** Bearer tokens the client API requires; undefined: the client API is open. */
  tokens?: TokenSet;
  /** Require a cluster certificate on the peer API (mutual TLS is on). */
  peerCertificate: boolean;
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

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/** Undefined when the metadata carries an accepted token, else the reason it does not. */
export function checkBearer(metadata: grpc.Metadata, tokens: TokenSet): Refusal | undefined {
  const values = metadata.get("authorization");
  if (values.length === 0) return "token-missing";
  const m = typeof values[0] === "string" ? BEARER.exec(values[0]) : null;
  if (m === null) return "token-missing";
  return tokens.accepts(m[1]!) ? undefined : "token-invalid";
}

const MESSAGES: Record<Refusal, string> = {
  "token-missing": "this node requires a bearer token: send metadata 'authorization: Bearer <token>'",
  "token-invalid": "the bearer token was not accepted",
  "peer-certificate": "peer calls need mutual TLS with a client certificate issued by the cluster CA",
};

/** The server interceptor enforcing the policy; undefined when there is nothing to enforce. */
export function accessInterceptor(policy: AccessPolicy): grpc.ServerInterceptor | undefined {
  if (policy.tokens === undefined && !policy.peerCertificate) return undefined;
  const tokens = policy.tokens;
  return (method, call) => {
    const guard = guardOf(method.path);
    const needsToken = guard === "client" && tokens !== undefined;
    const needsCert = guard === "peer" && policy.peerCertificate;
    if (!needsToken && !needsCert) return new grpc.ServerInterceptingCall(call);
    const service = method.path.split("/")[1] ?? "";
    const refuse = (reason: Refusal) => {
      policy.onRefused?.(service, reason);
      call.sendStatus({ code: grpc.status.UNAUTHENTICATED, details: MESSAGES[reason], metadata: new grpc.Metadata() });
    };
    return new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, pass) => {
            if (needsCert && !hasVerifiedPeerCertificate(call)) return refuse("peer-certificate");
            const bad = needsToken ? checkBearer(metadata, tokens!) : undefined;
            if (bad !== undefined) return refuse(bad);
            pass(metadata);
          },
        }),
    });
  };
}

/** Metadata carrying a bearer token (works over TLS and plaintext alike). */
export function bearerMetadata(token: string): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${token}`);
  return md;
}
