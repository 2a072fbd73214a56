// Hardening, from outside (real node processes and the CLI): the data directory and the node's
// files are private; an idle TCP connection does not hold up shutdown; a TLS key that does not
// match its certificate, or a certificate outside its validity, stops start-up with one line that
// says so, as does a listen address in use; the CLI prefers --token-file / $DELTASET_TOKEN and never prints a token.
import { strict as assert } from "node:assert";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { runCli, startNodeProcess } from "../helpers/node-process.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-hardening-"));
after(() => rmSync(root, { recursive: true, force: true }));

/** A self-signed certificate valid only between two dates (openssl ca: req -x509 cannot set them). */
function datedCertificate(name: string, start: string, end: string): { cert: string; key: string } {
  const dir = join(root, name);
  mkdirSync(dir);
  const key = join(dir, "key.pem");
  const cert = join(dir, "cert.pem");
  writeFileSync(join(dir, "index.txt"), "");
  writeFileSync(join(dir, "serial"), "01\n");
  writeFileSync(join(dir, "ca.cnf"), "[ca]\ndefault_ca=d\n[d]\ndatabase=index.txt\nnew_certs_dir=.\nserial=serial\npolicy=p\ndefault_md=sha256\n[p]\ncommonName=supplied\n");
  const run = (args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
  run(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", "req.csr", "-subj", `/CN=${name}`]);
  run(["ca", "-config", "ca.cnf", "-batch", "-selfsign", "-keyfile", key, "-in", "req.csr", "-out", cert, "-startdate", start, "-enddate", end, "-notext"]);
  return { cert, key };
}

/** Start a node that must fail; its exit code and stderr. */
async function failedStart(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const r = await runCli(["node", "--listen", "127.0.0.137:0", "--data-dir", join(root, `d${Math.random().toString(36).slice(2)}`), ...args]);
  return { code: r.code, stderr: r.stderr };
}

const lines = (s: string) => s.split("\n").filter((l) => l.startsWith("deltaset node:"));

describe("hardening", () => {
  it("creates the data directory 0700 and the node's files readable by their owner only", async () => {
    const dir = join(root, "private", "data");
    const n = await startNodeProcess(["--listen", "127.0.0.137:0", "--data-dir", dir]);
    assert.equal(await n.stop(), 0);
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    const files = readdirSync(dir);
    assert.ok(files.includes("CURRENT"));
    for (const f of files) assert.equal(statSync(join(dir, f)).mode & 0o077, 0, `${f} is accessible to other users`);
  });

  it("shuts down without waiting for an idle TCP connection", async () => {
    const n = await startNodeProcess(["--listen", "127.0.0.137:0", "--data-dir", join(root, "idle"), "--drain-timeout-ms", "60000"]);
    const [host, port] = [n.address.slice(0, n.address.lastIndexOf(":")), Number(n.address.slice(n.address.lastIndexOf(":") + 1))];
    const socket = connect(port, host);
    socket.on("error", () => {});
    await new Promise((r) => socket.once("connect", r));
    try {
      assert.equal(await n.stop(), 0);
      // Drained (every call done, idle connections closed), not cut at the 60 s timeout.
      assert.match(n.logs(), /"msg":"node stopped".*"drain":"drained"/);
    } finally {
      socket.destroy();
    }
  });

  it("refuses a listen address in use with one line naming it, not a stack trace", async () => {
    const first = await startNodeProcess(["--listen", "127.0.0.137:0", "--data-dir", join(root, "first")]);
    try {
      const r = await runCli(["node", "--listen", first.address, "--data-dir", join(root, "second")]);
      assert.equal(r.code, 1, r.stderr);
      assert.equal(lines(r.stderr).length, 1, r.stderr);
      assert.match(lines(r.stderr)[0]!, new RegExp(`cannot listen on ${first.address.replace(/\./g, "\\.")} \\(--listen\\): listen EADDRINUSE`));
      assert.doesNotMatch(r.stderr, /^\s+at /m, "no stack trace");
    } finally {
      await first.stop();
    }
  });

  it("refuses a data directory that is a file with one line, not a stack trace", async () => {
    const file = join(root, "a-file");
    writeFileSync(file, "x");
    const r = await failedStart(["--data-dir", file]);
    assert.equal(r.code, 1, r.stderr);
    assert.equal(lines(r.stderr).length, 1, r.stderr);
    assert.match(lines(r.stderr)[0]!, /a-file is a file, not a directory/);
    assert.doesNotMatch(r.stderr, /^\s+at /m, "no stack trace");
  });

  it("refuses a TLS key that is not the certificate's, with one line", async () => {
    const a = datedCertificate("a", "20240101000000Z", "20990101000000Z");
    const b = datedCertificate("b", "20240101000000Z", "20990101000000Z");
    const r = await failedStart(["--tls-cert", a.cert, "--tls-key", b.key]);
    assert.equal(r.code, 1, r.stderr);
    assert.equal(lines(r.stderr).length, 1, r.stderr);
    assert.match(lines(r.stderr)[0]!, /tls\.key .*b\/key\.pem does not match the certificate in tls\.cert .*a\/cert\.pem/);
    assert.doesNotMatch(r.stderr, /^\s+at /m, "no stack trace");
  });

  it("refuses an expired or not-yet-valid certificate at start, saying so", async () => {
    const old = datedCertificate("expired", "20200101000000Z", "20200201000000Z");
    const expired = await failedStart(["--tls-cert", old.cert, "--tls-key", old.key]);
    assert.equal(expired.code, 1);
    assert.match(lines(expired.stderr)[0] ?? "", /expired\/cert\.pem expired on 2020-02-01T00:00:00\.000Z; renew it/);
    const future = datedCertificate("future", "20990101000000Z", "21000101000000Z");
    const early = await failedStart(["--tls-cert", future.cert, "--tls-key", future.key]);
    assert.equal(early.code, 1);
    assert.match(lines(early.stderr)[0] ?? "", /future\/cert\.pem is not valid before 2099-01-01T00:00:00\.000Z/);
  });

  it("CLI: prefers --token-file and $DELTASET_TOKEN over --token, and never prints a token", async () => {
    const tokens = join(root, "tokens");
    writeFileSync(tokens, "s3cret-token\n");
    const n = await startNodeProcess(["--listen", "127.0.0.138:0", "--data-dir", join(root, "auth"), "--auth-tokens-file", tokens]);
    const env = { DELTASET_TOKEN: "", DELTASET_TOKEN_FILE: "" };
    try {
      const file = join(root, "my-token");
      writeFileSync(file, "# a comment\ns3cret-token\n");
      const viaFile = await runCli(["incr", "k", "1", "--addr", n.address, "--token-file", file, "--token", "wrong-token"], env);
      assert.equal(viaFile.code, 0, viaFile.stderr);
      assert.match(viaFile.stderr, /--token ignored/);
      const viaEnv = await runCli(["incr", "k", "1", "--addr", n.address], { DELTASET_TOKEN: "s3cret-token" });
      assert.equal(viaEnv.code, 0, viaEnv.stderr);
      const viaFlag = await runCli(["incr", "k", "1", "--addr", n.address, "--token", "s3cret-token"], env);
      assert.equal(viaFlag.code, 0, viaFlag.stderr);
      assert.match(viaFlag.stderr, /--token is visible to other users/);
      assert.doesNotMatch(viaFlag.stderr + viaFlag.stdout, /s3cret/);

      // A token with a line break: one line naming where it came from, no token, no stack trace.
      for (const [args, extra, source] of [
        [["--token", "s3cret\nsecond-half"], env, /--token is not a usable token/],
        [[], { DELTASET_TOKEN: "s3cret\nsecond-half" }, /\$DELTASET_TOKEN is not a usable token/],
      ] as const) {
        const r = await runCli(["incr", "k", "1", "--addr", n.address, ...args], extra);
        assert.equal(r.code, 2, r.stderr);
        assert.match(r.stderr, source);
        assert.doesNotMatch(r.stderr + r.stdout, /s3cret|second-half/);
        assert.doesNotMatch(r.stderr, /^\s+at /m);
      }
    } finally {
      assert.equal(await n.stop(), 0);
    }
  });
});
