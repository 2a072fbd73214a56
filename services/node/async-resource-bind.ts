// AsyncResource.prototype.bind without a hidden class per bound function, for Node releases whose
// bind makes one. Node 20's bind gives each bound function its own `asyncResource` accessor
// (deprecated, DEP0172), a getter and a setter made by util.deprecate, which sets each one's
// prototype to the fresh function it wraps. Both give every bound function shapes of its own that
// V8 keeps reachable until a full collection, and with them everything the function reaches.
// node:http2 binds a function per client request, so every outgoing gRPC call outlived
// young-generation collections: a grpc-js client promoted about 2.7 MB per young-generation
// collection, 16 KiB with this bind and http2-stream-table.ts's tables
// (docs/results/replica-history.md). Node later stopped setting those prototypes (pull requests
// 59195 and 59518) and then dropped the accessor (DEP0172 End-of-Life, pull request 58618).
//
// The bound function here runs fn in the resource's scope as Node's does, keeps fn's `length`, and
// has an `asyncResource` accessor that still warns (DEP0172, once), shared by all bound functions.
import { AsyncResource } from "node:async_hooks";

type Bind = (this: AsyncResource, fn: (...args: unknown[]) => unknown, thisArg?: unknown) => (...args: unknown[]) => unknown;
const PATCHED = Symbol.for("deltaset.leanAsyncResourceBind");

let warned = false;
function warnDeprecated(): void {
  if (warned || process.noDeprecation) return;
  warned = true;
  process.emitWarning("The asyncResource property on bound functions is deprecated", "DeprecationWarning", "DEP0172");
}

/** Where a bound function keeps its resource, for the shared accessor below. */
const RESOURCE = Symbol("asyncResource");

// One getter and setter for every bound function: an accessor made per function (even one that
// leaves prototypes alone) gives each its own hidden class, which V8 keeps reachable until a full
// collection (measured: 1.7 MB promoted per young-generation collection in a bare node:http2 client).
const asyncResourceAccessor: PropertyDescriptor = {
  configurable: true,
  enumerable: true,
  get(this: Record<symbol, AsyncResource>) {
    warnDeprecated();
    return this[RESOURCE];
  },
  set(this: Record<symbol, AsyncResource>, value: AsyncResource) {
    warnDeprecated();
    this[RESOURCE] = value;
  },
};

const leanBind: Bind = function (fn, thisArg) {
  if (typeof fn !== "function") throw new TypeError(`The "fn" argument must be of type function. Received ${typeof fn}`);
  type Bound = ((...args: unknown[]) => unknown) & Record<symbol, AsyncResource>;
  const bound = (
    thisArg === undefined
      ? function (this: unknown, ...args: unknown[]) {
          return bound[RESOURCE].runInAsyncScope(fn, this, ...args);
        }
      : (...args: unknown[]) => bound[RESOURCE].runInAsyncScope(fn, thisArg, ...args)
  ) as Bound;
  Object.defineProperty(bound, RESOURCE, { value: this, writable: true, enumerable: false, configurable: true });
  Object.defineProperty(bound, "length", { configurable: true, enumerable: false, value: fn.length, writable: false });
  Object.defineProperty(bound, "asyncResource", asyncResourceAccessor);
  return bound;
};

/**
 * Whether this Node's bind gives each bound function an accessor of its own (Node 20's does; a Node
 * that dropped the accessor, or shares one, does not need the bind above).
 */
export function bindMakesAccessorPerFunction(): boolean {
  const resource = new AsyncResource("deltaset-probe");
  const getterOf = (f: unknown) => Object.getOwnPropertyDescriptor(f as object, "asyncResource")?.get;
  const a = getterOf(resource.bind(function probeA() {}));
  const b = getterOf(resource.bind(function probeB() {}));
  return a !== undefined && a !== b;
}

/**
 * Use the bind above in this process when Node's makes an accessor per bound function; returns
 * whether it is in use. Idempotent.
 */
export function useLeanAsyncResourceBind(): boolean {
  const proto = AsyncResource.prototype as unknown as { bind: Bind; [PATCHED]?: true };
  if (proto[PATCHED]) return true;
  if (!bindMakesAccessorPerFunction()) return false;
  proto.bind = leanBind;
  proto[PATCHED] = true;
  return true;
}
