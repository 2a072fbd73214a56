// One way to wrap each handler of a gRPC service implementation, shared by the layers that do it
// (the start gate, the router's mark check, the strict server's unary guard). A handler is found
// as grpc-js finds it: under the method's name, else under its original (proto) name.
import type * as grpc from "@grpc/grpc-js";

/** A handler of any shape (unary, streaming): the call, then a callback for those that answer through one. */
export type AnyHandler = (call: never, ...rest: never[]) => unknown;

/**
 * A copy of impl whose handlers are wrapped: wrap gets each method's definition and handler and
 * returns the replacement, or undefined to keep the handler as it is. Whatever else impl holds
 * stays reachable through the copy's prototype.
 */
export function wrapHandlers<S extends object>(
  definition: grpc.ServiceDefinition,
  impl: S,
  wrap: (method: grpc.MethodDefinition<unknown, unknown>, handler: AnyHandler) => AnyHandler | undefined,
): S {
  const source = impl as Record<string, unknown>;
  const out = Object.create(impl) as Record<string, unknown>;
  for (const [name, method] of Object.entries(definition)) {
    const handler = source[name] ?? (method.originalName === undefined ? undefined : source[method.originalName]);
    if (typeof handler !== "function") continue;
    const wrapped = wrap(method, (handler as AnyHandler).bind(impl) as AnyHandler);
    if (wrapped !== undefined) out[name] = wrapped;
  }
  return out as S;
}
