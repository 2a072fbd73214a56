// CausalContext (interval form) against a naive model: a Set of "replica:counter" strings.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { CausalContext } from "../../services/crdt/index.js";
import { RUNS } from "./universe.js";
import { contextProblems } from "./invariants.js";

const REPLICAS = ["a", "b", "c"];
const MAX = 40;
const run = (p: fc.IPropertyWithHooks<unknown>) => fc.assert(p, { numRuns: RUNS });

type Model = Set<string>;
const k = (r: string, n: number) => `${r}:${n}`;

interface Built {
  ctx: CausalContext;
  model: Model;
}

/** Build by addRange / add calls in the generated order (often out of order, overlapping, adjacent). */
const built: fc.Arbitrary<Built> = fc
  .array(
    fc.record({
      r: fc.constantFrom(...REPLICAS),
      first: fc.integer({ min: 1, max: MAX - 6 }),
      len: fc.nat({ max: 5 }),
      single: fc.boolean(),
    }),
    { maxLength: 14 },
  )
  .map((ops) => {
    const ctx = new CausalContext();
    const model: Model = new Set();
    for (const o of ops) {
      if (o.single) {
        ctx.add(o.r, o.first);
        model.add(k(o.r, o.first));
      } else {
        ctx.addRange(o.r, o.first, o.first + o.len);
        for (let n = o.first; n <= o.first + o.len; n++) model.add(k(o.r, n));
      }
    }
    return { ctx, model };
  });

function agrees(ctx: CausalContext, model: Model): void {
  assert.deepEqual(contextProblems(ctx), []);
  for (const r of REPLICAS) {
    for (let n = 1; n <= MAX + 1; n++) assert.equal(ctx.contains(r, n), model.has(k(r, n)), `contains(${r},${n})`);
    let max = 0;
    for (let n = 1; n <= MAX; n++) if (model.has(k(r, n))) max = n;
    assert.equal(ctx.max(r), max);
    assert.deepEqual(ctx.nextDot(r), { replica: r, counter: max + 1 });
    let prefix = 0;
    while (model.has(k(r, prefix + 1))) prefix++;
    assert.equal(ctx.prefix(r), prefix);
  }
  const listed = [...ctx.dots()].map((d) => k(d.replica, d.counter));
  assert.deepEqual(listed.slice().sort(), [...model].sort());
  assert.equal(new Set(listed).size, listed.length, "dots() lists each dot once");
  assert.equal(ctx.dotCount(), model.size);
  assert.equal(ctx.isEmpty(), model.size === 0);
}

describe("CausalContext against a set-of-dots model", () => {
  it("addRange/add build a canonical context with the model's dots, max, prefix and nextDot", () =>
    run(fc.property(built, ({ ctx, model }) => agrees(ctx, model))));

  it("join, joinInPlace, subtract and intersect agree with set union, difference and intersection", () =>
    run(
      fc.property(built, built, (x, y) => {
        agrees(x.ctx.join(y.ctx), new Set([...x.model, ...y.model]));
        agrees(x.ctx.subtract(y.ctx), new Set([...x.model].filter((d) => !y.model.has(d))));
        agrees(x.ctx.intersect(y.ctx), new Set([...x.model].filter((d) => y.model.has(d))));
        const target = x.ctx.clone();
        target.joinInPlace(y.ctx);
        agrees(target, new Set([...x.model, ...y.model]));
        agrees(x.ctx, x.model); // clone and pure operations left x alone
        agrees(y.ctx, y.model);
      }),
    ));

  it("leq is set inclusion and equals is set equality", () =>
    run(
      fc.property(built, built, (x, y) => {
        const subset = [...x.model].every((d) => y.model.has(d));
        assert.equal(x.ctx.leq(y.ctx), subset);
        assert.equal(x.ctx.equals(y.ctx), subset && x.model.size === y.model.size);
        assert.ok(x.ctx.leq(x.ctx.join(y.ctx)));
        assert.ok(x.ctx.subtract(y.ctx).leq(x.ctx));
      }),
    ));

  it("of(dots) and fromVector build the context they describe", () =>
    run(
      fc.property(built, fc.array(fc.tuple(fc.constantFrom(...REPLICAS), fc.nat({ max: 6 })), { maxLength: 3 }), (x, vv) => {
        agrees(CausalContext.of(x.ctx.dots()), x.model);
        const model: Model = new Set();
        for (const [r, n] of vv) for (let i = 1; i <= n; i++) model.add(k(r, i));
        agrees(CausalContext.fromVector(vv), model);
      }),
    ));

  it("addRange refuses empty and non-positive ranges", () => {
    const c = new CausalContext();
    assert.throws(() => c.addRange("a", 0, 3), RangeError);
    assert.throws(() => c.addRange("a", 5, 4), RangeError);
    assert.ok(c.isEmpty());
  });
});
