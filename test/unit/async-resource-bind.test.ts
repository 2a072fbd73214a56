// The bind a node puts in place of Node 20's AsyncResource.prototype.bind: the bound function runs
// in the resource's async context with the caller's `this` (or the one given), keeps fn's length,
// and its asyncResource accessor answers the resource and warns (DEP0172) once; every bound
// function shares that accessor.
import { strict as assert } from "node:assert";
import { AsyncLocalStorage, AsyncResource } from "node:async_hooks";
import { once } from "node:events";
import { describe, it } from "node:test";
import { bindMakesAccessorPerFunction, useLeanAsyncResourceBind } from "../../services/node/async-resource-bind.ts";

describe("AsyncResource.prototype.bind in a node", () => {
  it("is replaced where Node makes an accessor per bound function, and once only", () => {
    const per = bindMakesAccessorPerFunction();
    assert.equal(useLeanAsyncResourceBind(), per);
    assert.equal(useLeanAsyncResourceBind(), per);
    assert.equal(bindMakesAccessorPerFunction(), false);
  });

  it("runs the function in the resource's async context, with this and arguments passed through", () => {
    useLeanAsyncResourceBind();
    const als = new AsyncLocalStorage<string>();
    const resource = als.run("inside", () => new AsyncResource("test"));
    const bound = resource.bind(function (this: unknown, a: number, b: number) {
      return { store: als.getStore(), self: this, sum: a + b };
    });
    const receiver = { name: "receiver" };
    const out = als.run("outside", () => bound.call(receiver, 2, 3));
    assert.deepEqual(out, { store: "inside", self: receiver, sum: 5 });
    const bindWithThis = resource.bind as unknown as (fn: (this: unknown) => unknown, thisArg: unknown) => (this: unknown) => unknown;
    const withThis = bindWithThis.call(resource, function (this: unknown) {
      return this;
    }, receiver);
    assert.equal(withThis.call({ other: true }), receiver);
    assert.equal(resource.bind((_a: number, _b: number, _c: number) => 0).length, 3);
  });

  it("keeps the deprecated asyncResource accessor: the resource, settable, one DEP0172 warning", async () => {
    useLeanAsyncResourceBind();
    const warnings: Array<{ name: string; code?: string }> = [];
    const onWarning = (w: Error & { code?: string }) => warnings.push({ name: w.name, code: w.code });
    process.on("warning", onWarning);
    try {
      const r1 = new AsyncResource("a");
      const r2 = new AsyncResource("b");
      const f = r1.bind(() => 1) as unknown as { asyncResource: AsyncResource };
      const g = r2.bind(() => 2) as unknown as { asyncResource: AsyncResource };
      assert.equal(f.asyncResource, r1);
      assert.equal(g.asyncResource, r2);
      f.asyncResource = r2;
      assert.equal(f.asyncResource, r2);
      assert.equal(Object.getOwnPropertyDescriptor(f, "asyncResource")!.get, Object.getOwnPropertyDescriptor(g, "asyncResource")!.get);
      await once(process, "warning");
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off("warning", onWarning);
    }
    assert.deepEqual(warnings, [{ name: "DeprecationWarning", code: "DEP0172" }]);
  });
});
