// `deltaset COMMAND --help` for the client commands and verify: the command's lines of the main
// usage, then the options its parser takes (so the list cannot miss one), each with what it does.
import type { OptionSpec } from "./client-commands.js";

/** What each option of the client commands does; an option missing here is listed bare. */
const OPTION_TEXT: Record<string, string> = {
  addr: "the node to call, HOST:PORT ($DELTASET_ADDR)",
  json: "print JSON instead of text",
  hex: "elements given on the command line are hex bytes, and every element shown is hex (the exact bytes)",
  timeout: "deadline of each call, in ms (add --stdin: the longest wait for an acknowledgement)",
  "tls-ca": "trust this CA for the node's certificate ($DELTASET_TLS_CA)",
  token: "bearer token (visible in the process list: prefer --token-file or $DELTASET_TOKEN)",
  "token-file": "read the bearer token from this file ($DELTASET_TOKEN_FILE)",
  type: "the type a new key gets: awset, awset-prob, gbf, gcf, orcf, scgbf, scgcf, scorcf",
  capacity: "filter or set types: elements (awset-prob: its window of removes) the filter is sized for",
  fpr: "filter or set types: target false-positive rate",
  hashes: "hash functions (k), instead of --fpr",
  bits: "bits of the filter (per slice for awset-prob)",
  "fingerprint-bits": "cuckoo types: bits per fingerprint",
  "bucket-size": "cuckoo types: entries per bucket",
  level: "awset-prob: 0 to 5, how the window is sliced (higher: fewer bytes)",
  "age-slices": "awset-prob: l, instead of --level",
  strategy: "awset-prob: union of filters: whole-filter, active-slices or current-generation",
  ttl: "time to live of the added elements: 30s, 5m, 2h, 1d or ms; 0 for none (awset keys)",
  stdin: "read elements from stdin, one per line, over one AddStream",
  batch: "with --stdin: elements per stream message",
  "page-size": "entries per call",
  all: "every page, not only the first",
  chunk: "elements per chunk",
  "chunk-bytes": "bytes per chunk, at most",
  count: "print only how many members",
  "start-after": "begin after this element (give it in hex with --hex): resume a scan that failed",
  copies: "answer only once this many nodes hold the write durably, the one called included (a write concern; needs gossip algorithm alg2)",
  "request-id": "retry-safe increment, or Add to a filter key: a retry with the same id is applied once",
  prefix: "keys starting with this prefix",
  quiet: "print nothing: the exit status alone tells (0: every set agrees)",
  "since-file": "a causal context from an earlier export or watch: only what came after it",
  "next-since-file": "write the context this export brings the receiver to",
  "data-dir": "the stopped node's data directory",
  resumes: "key watch: times in a row to watch again after UNAVAILABLE (node stopping, key moved) with no event between (default 10; 0: exit)",
};

/** Where an option means something else for one command: "command option" → what it does there. */
const COMMAND_OPTION_TEXT: Record<string, string> = {
  "members all": "departed members too (DEAD and LEFT), not only the live ones",
};

/** The usage of one command: its lines of the main help, then its options. */
export function commandHelp(name: string, mainHelp: string, options: OptionSpec): string {
  const lines = mainHelp.split("\n");
  const own: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i]!.startsWith(`  ${name} `)) continue;
    own.push(lines[i]!);
    // Continuation lines (deeper indentation) belong to the same command.
    while (i + 1 < lines.length && /^ {4,}\S/.test(lines[i + 1]!)) own.push(lines[++i]!);
  }
  const width = Math.max(...Object.entries(options).map(([o, spec]) => flag(o, spec).length));
  const opts = Object.entries(options).map(([o, spec]) => {
    const text = COMMAND_OPTION_TEXT[`${name} ${o}`] ?? OPTION_TEXT[o] ?? "";
    const def = spec.default === undefined || spec.default === false || spec.default === "" || spec.default === "0" ? "" : ` (default ${spec.default})`;
    return `  ${flag(o, spec).padEnd(width)}  ${text}${def}`.trimEnd();
  });
  return [`usage: deltaset ${name} [options]`, "", ...own, "", "options:", ...opts, ""].join("\n");
}

const flag = (o: string, spec: { type: string }) => (spec.type === "string" ? `--${o} VALUE` : `--${o}`);
