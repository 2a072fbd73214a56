// Client authentication with bearer tokens: a real node with --auth-tokens-file refuses client
// calls without a valid token (UNAUTHENTICATED), accepts every token of the file, keeps health
// open, counts refusals, and never writes a token to its logs; the CLI sends --token. Plus the
// parts: token file parsing, the constant-time set, which methods each rule guards.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { protoPath as healthProtoPath } from "grpc-health-check";
import { call, membershipClient, replicaClient } from "../../services/client/rpc.ts";
import { ConfigError } from "../../services/node/config.ts";
import { TokenSet, checkBearer, guardOf, parseTokens } from "../../services/node/auth.ts";
import { type NodeProcess, runCli, startNodeProcess } from "../helpers/node-process.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-auth-"));
// Distinctive strings, so that a grep of the logs cannot match anything else.
const TOKEN_A = "tkA-7f3c9e21d4b8a6f0e5c2b1a9d8e7f6c5";
const TOKEN_B = "tkB-0a1b2c3d4e5f60718293a4b5c6d7e8f9";
const WRONG = "tkX-not-a-token-of-this-node-000000";

after(() => rmSync(dir, { recursive: true, force: true }));

function bearer(token: string): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${token}`);
  return md;
}

async function code(p: Promise<unknown>): Promise<{ code: number; details: string }> {
  try {
    await p;
  } catch (err) {
    const e = err as grpc.ServiceError;
    return { code: e.code, details: e.details };
  }
  return { code: 0, details: "" };
}

describe("bearer token rules", () => {
  it("parses one token per line, skipping blanks and # comments", () => {
    assert.deepEqual(parseTokens("# operators\n\n  tok-1  \r\n#tok-x\ntok-2\n", "f").map((t) => t.token), ["tok-1", "tok-2"]);
  });

  it("refuses a file without tokens, and a token with spaces without echoing it", () => {
    assert.throws(() => parseTokens("# only a comment\n\n", "f"), ConfigError);
    assert.throws(
      () => parseTokens("ok-token\nsecret with spaces\n", "f"),
      (err: Error) => err instanceof ConfigError && /line 2/.test(err.message) && !err.message.includes("secret"),
    );
  });

  it("accepts exactly the tokens of the set", () => {
    const set = new TokenSet(["alpha", "beta"]);
    assert.equal(set.accepts("alpha"), true);
    assert.equal(set.accepts("beta"), true);
    assert.equal(set.accepts("alph"), false);
    assert.equal(set.accepts("alphaa"), false);
    assert.equal(set.accepts(""), false);
  });

  it("reads the token from 'authorization: Bearer <token>' only", () => {
    const set = new TokenSet(["alpha"]);
    assert.equal(checkBearer(bearer("alpha"), set), undefined);
    assert.equal(checkBearer(bearer("beta"), set), "token-invalid");
    assert.equal(checkBearer(new grpc.Metadata(), set), "token-missing");
    const basic = new grpc.Metadata();
    basic.set("authorization", "Basic alpha");
    assert.equal(checkBearer(basic, set), "token-missing");
    const lower = new grpc.Metadata();
    lower.set("authorization", "bearer alpha");
    assert.equal(checkBearer(lower, set), undefined);
  });

  it("guards the client API with tokens, the peer API with certificates, and leaves probes open", () => {
    assert.equal(guardOf("/deltaset.v1.Replica/Add"), "client");
    assert.equal(guardOf("/deltaset.v1.Replica/Scan"), "client");
    assert.equal(guardOf("/deltaset.v1.Membership/Members"), "client");
    assert.equal(guardOf("/deltaset.v1.Membership/Watch"), "client");
    assert.equal(guardOf("/deltaset.v1.Membership/Join"), "peer");
    assert.equal(guardOf("/deltaset.v1.Membership/Ping"), "peer");
    assert.equal(guardOf("/deltaset.v1.Gossip/Exchange"), "peer");
    assert.equal(guardOf("/deltaset.v1.Gossip/PushState"), "peer");
    assert.equal(guardOf("/grpc.health.v1.Health/Check"), "open");
    assert.equal(guardOf("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"), "open");
  });
});

describe("a node with --auth-tokens-file", () => {
  let node: NodeProcess;
  let cliOutput = "";

  before(async () => {
    const tokens = join(dir, "tokens");
    writeFileSync(tokens, `# clients of the test\n${TOKEN_A}\n\n# second team\n${TOKEN_B}\n`, { mode: 0o600 });
    node = await startNodeProcess([
      "--listen", "127.0.0.91:0",
      "--data-dir", join(dir, "data"),
      "--auth-tokens-file", tokens,
      "--metrics-listen", "127.0.0.91:0",
      "--log-level", "debug",
    ]);
  });

  after(async () => {
    await node?.stop();
  });

  it("refuses a call without a token with UNAUTHENTICATED and says what is missing", async () => {
    const c = replicaClient(node.address);
    try {
      const r = await code(call(c, c.add, { key: "k", elements: [Buffer.from("x")], texts: [] }));
      assert.equal(r.code, grpc.status.UNAUTHENTICATED);
      assert.match(r.details, /bearer token/);
      const s = await code(
        new Promise((resolve, reject) => {
          const stream = c.scan({ key: "k", chunkSize: 10, startAfter: Buffer.alloc(0), withText: false });
          stream.on("data", () => {});
          stream.on("error", reject);
          stream.on("end", resolve);
        }),
      );
      assert.equal(s.code, grpc.status.UNAUTHENTICATED);
    } finally {
      c.close();
    }
  });

  it("refuses a wrong token without echoing it", async () => {
    const c = replicaClient(node.address);
    try {
      const r = await code(call(c, c.add, { key: "k", elements: [Buffer.from("x")], texts: [] }, { metadata: bearer(WRONG) }));
      assert.equal(r.code, grpc.status.UNAUTHENTICATED);
      assert.ok(!r.details.includes(WRONG));
    } finally {
      c.close();
    }
  });

  it("serves calls that carry any token of the file", async () => {
    const c = replicaClient(node.address);
    try {
      const a = await call(c, c.add, { key: "k", elements: [Buffer.from("x")], texts: [] }, { metadata: bearer(TOKEN_A) });
      assert.equal(a.added, 1);
      const b = await call(c, c.add, { key: "k", elements: [Buffer.from("y")], texts: [] }, { metadata: bearer(TOKEN_B) });
      assert.equal(b.added, 1);
      const q = await call(c, c.query, { key: "k", elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }, { metadata: bearer(TOKEN_A) });
      assert.deepEqual(q.members.map((m) => m.element.toString()).sort(), ["x", "y"]);
    } finally {
      c.close();
    }
  });

  it("guards the membership view the same way", async () => {
    const c = membershipClient(node.address);
    try {
      assert.equal((await code(call(c, c.members, { includeDeparted: false }))).code, grpc.status.UNAUTHENTICATED);
      const r = await call(c, c.members, { includeDeparted: false }, { metadata: bearer(TOKEN_B) });
      assert.equal(r.members.length, 1);
    } finally {
      c.close();
    }
  });

  it("answers health checks without a token", async () => {
    const def = protoLoader.loadSync(healthProtoPath, { enums: String });
    const Health = (grpc.loadPackageDefinition(def) as any).grpc.health.v1.Health;
    const h = new Health(node.address, grpc.credentials.createInsecure());
    try {
      for (const service of ["", "deltaset.v1.Replica"]) {
        const r = await new Promise<{ status: string }>((resolve, reject) => h.check({ service }, (e: Error | null, v: { status: string }) => (e ? reject(e) : resolve(v))));
        assert.equal(r.status, "SERVING");
      }
    } finally {
      h.close();
    }
  });

  it("the CLI sends --token / --token-file and is refused without", async () => {
    const ok = await runCli(["add", "cli-key", "e1", "--addr", node.address, "--token", TOKEN_A]);
    assert.equal(ok.code, 0, ok.stderr);
    const tokenFile = join(dir, "my-token");
    writeFileSync(tokenFile, `${TOKEN_B}\n`, { mode: 0o600 });
    const viaFile = await runCli(["query", "cli-key", "--addr", node.address, "--token-file", tokenFile]);
    assert.equal(viaFile.code, 0, viaFile.stderr);
    assert.match(viaFile.stdout, /e1/);
    const refused = await runCli(["add", "cli-key", "e2", "--addr", node.address]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /bearer token.*status 16/);
    const wrong = await runCli(["add", "cli-key", "e2", "--addr", node.address, "--token", WRONG]);
    assert.equal(wrong.code, 1);
    cliOutput = [ok, viaFile, refused, wrong].map((r) => r.stdout + r.stderr).join("\n");
  });

  it("counts refusals by service and reason", async () => {
    const metrics = /"endpoint":"(http:[^"]+)"/.exec(node.logs())?.[1];
    assert.ok(metrics !== undefined, "the node logs its metrics endpoint");
    const text = await (await fetch(metrics)).text();
    const count = (reason: string) =>
      Number(new RegExp(`^deltaset_auth_refused_total\\{service="deltaset.v1.Replica",reason="${reason}"\\} (\\d+)`, "m").exec(text)?.[1] ?? 0);
    assert.ok(count("token-missing") >= 2, text);
    assert.ok(count("token-invalid") >= 2, text);
  });

  it("never logs a token, not even at debug level or in the configuration", async () => {
    const logs = node.logs();
    assert.match(logs, /"authTokensFile":/, "the configuration names the file");
    assert.match(logs, /bearer tokens \(2\)/);
    for (const t of [TOKEN_A, TOKEN_B, WRONG]) {
      assert.ok(!logs.includes(t), "a token appeared in the node's log");
      assert.ok(!cliOutput.includes(t), "a token appeared in the CLI's output");
    }
  });
});

describe("a tokens file that cannot be used", () => {
  it("stops the node at start with a message naming the file, not its content", async () => {
    const bad = join(dir, "bad-tokens");
    writeFileSync(bad, "first-token\nsecond token with spaces\n");
    const r = await runCli(["node", "--listen", "127.0.0.92:0", "--data-dir", join(dir, "bad"), "--auth-tokens-file", bad]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /bad-tokens line 2/);
    assert.ok(!(r.stdout + r.stderr).includes("second token"));
    const missing = await runCli(["node", "--listen", "127.0.0.92:0", "--data-dir", join(dir, "bad"), "--auth-tokens-file", join(dir, "nope")]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /auth tokens file .*nope: ENOENT/);
  });
});
