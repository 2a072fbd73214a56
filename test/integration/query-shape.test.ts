// Requests are answered in the terms of the key's type, on a real node process over gRPC:
//  - a COUNTER key's Query answers its value (elements, texts, page_size, page_token or with_dots
//    answer INVALID_ARGUMENT naming the field), and `deltaset query` still reads a counter;
//  - an Add whose parameters make a filter above --max-filter-bytes is told which of that type's
//    parameters to lower (an AWSET_PROB key's tombstone filter has no scalable type to move to);
//  - a filter key's Query reports in filter.parameters only the fields its type has (a Bloom
//    series no buckets or kicks).
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import type { QueryRequest, ReplicaClient } from "../../services/gen/deltaset/v1/replica.ts";
import { type FilterParams, ObjectType } from "../../services/gen/deltaset/v1/types.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { type NodeProcess, runCli, startNodeProcess } from "../helpers/node-process.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-query-shape-"));
const FILTER_LIMIT = 1 << 20;
let node: NodeProcess;
let c: ReplicaClient;

const query = (req: Partial<QueryRequest> & { key: string }) =>
  call(c, c.query, { elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false, ...req });

before(async () => {
  node = await startNodeProcess(["--listen", "127.0.24.30:0", "--data-dir", join(root, "n"), "--max-filter-bytes", String(FILTER_LIMIT)]);
  c = replicaClient(node.address);
});

after(async () => {
  c?.close();
  if (node !== undefined) assert.equal(await node.stop(), 0);
  rmSync(root, { recursive: true, force: true });
});

describe("Query refuses what the key's type cannot use (real node)", () => {
  it("a COUNTER key's Query with a member or element field answers INVALID_ARGUMENT naming it", async () => {
    await call(c, c.increment, { key: "visits", amount: 7n, requestId: "" });
    const cases: [string, Partial<QueryRequest>][] = [
      ["elements", { elements: [Buffer.from("a")] }],
      ["texts", { texts: ["a"] }],
      ["page_size", { pageSize: 10 }],
      ["page_token", { pageToken: Buffer.from("x") }],
      ["with_dots", { withDots: true }],
    ];
    for (const [field, req] of cases) {
      await assert.rejects(query({ key: "visits", ...req }), (e: grpc.ServiceError) => {
        assert.equal(e.code, grpc.status.INVALID_ARGUMENT, `${field}: ${e.details}`);
        assert.equal(e.details, `key "visits" holds a COUNTER, whose Query answers its value alone: leave ${field} unset (it applies to sets and filters)`);
        return true;
      });
    }
    // The key alone reads the value, and so does a generic reader's with_text, or with_dots false.
    assert.equal((await query({ key: "visits", withDots: false })).counterValue, 7n);
    assert.equal((await query({ key: "visits", withText: true })).counterValue, 7n);
    // The CLI reads a counter without a page size; asked for one, it says why not.
    const read = await runCli(["query", "visits", "--addr", node.address, "--json"]);
    assert.equal(read.code, 0, read.stderr);
    assert.equal(JSON.parse(read.stdout).value, "7");
    const paged = await runCli(["query", "visits", "--addr", node.address, "--page-size", "5"]);
    assert.notEqual(paged.code, 0);
    assert.match(paged.stderr, /leave page_size unset/);
  });
});

describe("an Add past --max-filter-bytes names the parameters of the key's type (real node)", () => {
  const params = (p: Partial<FilterParams>): FilterParams => ({ capacity: 0n, falsePositiveRate: 0, hashes: 0, bits: 0n, fingerprintBits: 0, bucketSize: 0, ageSlices: 0, unionStrategy: 0, ...p });
  const refusal = async (key: string, type: ObjectType, p: Partial<FilterParams>): Promise<string> => {
    let details = "";
    await assert.rejects(call(c, c.add, { key, elements: [], texts: ["a"], type, params: params(p) }), (e: grpc.ServiceError) => {
      assert.equal(e.code, grpc.status.RESOURCE_EXHAUSTED, e.details);
      details = e.details;
      return true;
    });
    // Nothing was created.
    assert.equal((await query({ key })).type, ObjectType.OBJECT_TYPE_UNSPECIFIED);
    return details;
  };

  it("AWSET_PROB: its tombstone filter's capacity, false_positive_rate and level, and no scalable type", async () => {
    const details = await refusal("prob-big", ObjectType.AWSET_PROB, { capacity: 1_000_000n });
    assert.match(details, new RegExp(`^these parameters make an AWSET_PROB key's tombstone filter of \\d+ bytes; the limit is ${FILTER_LIMIT} \\(--max-filter-bytes\\): ask for a smaller capacity, a higher false_positive_rate or another level \\(with the default current-generation strategy, from a capacity of 4096 up, a higher level takes fewer bytes; or, given as hashes, age_slices and bits, fewer of them\\)$`));
    assert.doesNotMatch(details, /scalable/);
  });

  it("a fixed filter may move to its scalable type; a series' first sub-filter is what is bounded", async () => {
    assert.match(await refusal("gbf-big", ObjectType.GBF, { capacity: 10_000_000n }), /^these parameters make a GBF of \d+ bytes; .*\(or fewer bits\), or use an SCGBF key, which grows as it fills$/);
    assert.match(await refusal("orcf-big", ObjectType.ORCF, { capacity: 10_000_000n }), /^these parameters make an ORCF of \d+ bytes; .*\(or fewer fingerprint_bits\), or use an SCORCF key, which grows as it fills$/);
    assert.match(await refusal("scgbf-big", ObjectType.SCGBF, { capacity: 10_000_000n }), /^these parameters make an SCGBF key's first sub-filter of \d+ bytes; .*; the series adds sub-filters as it fills past capacity$/);
  });
});

describe("filter.parameters reports the fields of the key's type (real node)", () => {
  const parametersOf = async (key: string, type: ObjectType): Promise<Record<string, unknown>> => {
    await call(c, c.add, { key, elements: [], texts: ["a", "b"], type });
    const q = await query({ key, texts: ["a"] });
    assert.equal(q.presence[0]!.present, true);
    return JSON.parse(q.filter!.parameters) as Record<string, unknown>;
  };

  it("an SCGBF reports its series and Bloom fields, not a cuckoo series' buckets and kicks", async () => {
    assert.deepEqual(Object.keys(await parametersOf("bloom-series", ObjectType.SCGBF)).sort(), ["capacity", "fpr", "seed", "subFilters", "tightening"]);
    // As a GBF reports the Bloom filter's own fields, and a cuckoo series keeps its buckets.
    assert.deepEqual(Object.keys(await parametersOf("bloom", ObjectType.GBF)).sort(), ["bits", "hashes", "seed"]);
    const cuckoo = await parametersOf("cuckoo-series", ObjectType.SCGCF);
    for (const field of ["bucketSize", "maxKicks", "buckets", "subFilters"]) assert.ok(field in cuckoo, `${field} in ${JSON.stringify(cuckoo)}`);
  });
});
