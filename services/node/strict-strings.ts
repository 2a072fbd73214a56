// Strict strings at the deserialization boundary of every deltaset service: a request whose string
// field holds invalid UTF-8 is answered INVALID_ARGUMENT naming the field, before any handler runs,
// instead of being decoded with U+FFFD in place of the bad bytes; so is a request holding a
// singular message field twice, whose parts protobuf would merge and the decoder would not. The
// server wraps the request deserializer of each method it serves (the walk needs the raw bytes,
// which interceptors never see) and marks such a request; a unary method's handler guard, and
// for streams the server's first interceptor, refuses marked requests. A request that does not decode at all (truncated, a wrong wire type, a length past
// the end) is refused the same way, INVALID_ARGUMENT naming the message type, instead of grpc-js's
// INTERNAL "Error deserializing request" (which reads as a server fault). A client request holding
// more entries of repeated fields than --max-request-entries is refused RESOURCE_EXHAUSTED before
// it is decoded: the count on the raw bytes stops at the limit, while decoding would build an
// object per entry first.
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { PROTO_DIR, PROTO_FILES } from "./server.js";
import { type MessageSchemas, describeMisread, messageSchemas, misreadField, repeatedEntriesAbove } from "./raw-fields.js";
import { markStreamRefused, refusedByHandler } from "../common/stream-refusal.js";
import type { ActiveCalls } from "./active-calls.js";
import { isPeerMethod } from "./peer-interceptors.js";
import { passThrough } from "./pass-through.js";
import { type AnyHandler, wrapHandlers } from "./wrap-handlers.js";

/** Set on a decoded request the decoder misread (a string not UTF-8, a single message sent twice): the refusal. */
const MISREAD = Symbol("misread field");
/** Set on the stand-in for a request refused before decoding (it did not decode, or it was too large): the answer. */
const REFUSED = Symbol("refused request");

interface Refusal {
  code: grpc.status;
  details: string;
}

/** The decoder's reason, short and printable (it never echoes request bytes). */
function reason(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.replace(/[^\x20-\x7e]/g, "?").slice(0, 120);
}

interface RequestTypes {
  schemas: MessageSchemas;
  /** Method path ("/deltaset.v1.Replica/Add") → full name of its request message. */
  requestOf: Map<string, string>;
}

let loaded: RequestTypes | undefined;

function requestTypes(): RequestTypes {
  if (loaded !== undefined) return loaded;
  const defs = protoLoader.loadSync(PROTO_FILES, { includeDirs: [PROTO_DIR], keepCase: true });
  const requestOf = new Map<string, string>();
  for (const [service, def] of Object.entries(defs)) {
    if ((def as { format?: string }).format !== undefined) continue; // a message or enum
    const pkg = service.slice(0, service.lastIndexOf(".") + 1);
    for (const m of Object.values(def as protoLoader.ServiceDefinition)) {
      requestOf.set(m.path, pkg + (m.requestType.type as { name: string }).name);
    }
  }
  return (loaded = { schemas: messageSchemas(defs), requestOf });
}

/**
 * The service definition with each known method's deserializer marking misread fields. With
 * maxRequestEntries, a client request (not a peer's: those are decoded only once their proof
 * passed) holding more entries of repeated fields is refused, RESOURCE_EXHAUSTED, before it is
 * decoded.
 */
export function strictStringDefinition(service: grpc.ServiceDefinition, maxRequestEntries?: number): grpc.ServiceDefinition {
  const { schemas, requestOf } = requestTypes();
  const out: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const [name, method] of Object.entries(service)) {
    const type = requestOf.get(method.path);
    if (type === undefined) {
      out[name] = method;
      continue;
    }
    const decode = method.requestDeserialize;
    const entryLimit = maxRequestEntries !== undefined && !isPeerMethod(method.path) ? maxRequestEntries : undefined;
    out[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer) => {
        if (entryLimit !== undefined && repeatedEntriesAbove(schemas, type, bytes, entryLimit)) {
          const refusal: Refusal = {
            code: grpc.status.RESOURCE_EXHAUSTED,
            details: `request holds more than ${entryLimit} entries of repeated fields (elements, texts, context entries...); the limit is --max-request-entries: split the call`,
          };
          return { [REFUSED]: refusal };
        }
        let message: unknown;
        try {
          message = decode(bytes);
        } catch (err) {
          const refusal: Refusal = { code: grpc.status.INVALID_ARGUMENT, details: `request is not a valid ${type} message (${reason(err)})` };
          return { [REFUSED]: refusal };
        }
        const field = misreadField(schemas, type, bytes);
        if (field !== undefined && typeof message === "object" && message !== null) {
          Object.defineProperty(message, MISREAD, { value: describeMisread(field), enumerable: false });
        }
        return message;
      },
    };
  }
  return out as grpc.ServiceDefinition;
}

/**
 * Refuses a marked request (a misread field, or not decodable) with INVALID_ARGUMENT; nothing
 * reaches the handler. On ExchangeStream the message goes on marked instead
 * (common/stream-refusal.ts): its handler ends the stream with the refusal after its earlier answers.
 * With calls, it also counts each client call while it runs (active-calls.ts): a stopping node
 * waits for those; peer calls (long-lived gossip streams among them) do not hold it up.
 */
export function strictStringsInterceptor(calls?: ActiveCalls): grpc.ServerInterceptor {
  return (method, call) => {
    const client = !isPeerMethod(method.path);
    // Unary client calls are refused and counted by their handler's guard (unaryGuard): an
    // interceptor layer cost a unary call about 9 µs of CPU, against some 38 µs for the whole call
    // on a no-op server. A peer's unary call keeps this layer: the peer check after it reads the
    // message, which must not be the stand-in of one that did not decode.
    if (client && !method.requestStream && !method.responseStream) return passThrough(call);
    // A stopping node refuses new client calls (health and reflection still answer) and keeps
    // answering its peers until it leaves.
    if (client && calls?.closed === true && !method.path.startsWith("/grpc.")) {
      return new grpc.ServerInterceptingCall(call, {
        start: (next) =>
          next({
            onReceiveMetadata: () => call.sendStatus({ code: grpc.status.UNAVAILABLE, details: "the node is stopping: call another node", metadata: new grpc.Metadata() }),
          }),
      });
    }
    const marks = refusedByHandler(method.path);
    const end = client ? calls?.enter((details) => call.sendStatus({ code: grpc.status.UNAVAILABLE, details, metadata: new grpc.Metadata() })) : undefined;
    const listener: grpc.ServerListener = {
      onReceiveMessage: (message, pass) => {
        const refuse = (details: string, code = grpc.status.INVALID_ARGUMENT) => {
          if (marks && typeof message === "object" && message !== null) return pass(markStreamRefused(message, { code, details }));
          call.sendStatus({ code, details, metadata: new grpc.Metadata() });
        };
        const refused = (message as { [REFUSED]?: Refusal } | null)?.[REFUSED];
        if (refused !== undefined) return refuse(refused.details, refused.code);
        const misread = (message as { [MISREAD]?: string } | null)?.[MISREAD];
        if (misread === undefined) return pass(message);
        refuse(misread);
      },
    };
    const responder: grpc.Responder = { start: (next) => next(listener) };
    if (end !== undefined) {
      listener.onCancel = end;
      responder.sendStatus = (status, next) => {
        end();
        next(status);
      };
    }
    return new grpc.ServerInterceptingCall(call, responder);
  };
}

const STOPPING = "the node is stopping: call another node";

/**
 * What strictStringsInterceptor does for streams, done in a unary handler: a stopping node refuses
 * a new client call (health checks still answer), a marked request is refused before the handler,
 * and a client call is counted from its handler's start until it answers or its client cancels.
 */
function unaryGuard(path: string, handler: grpc.handleUnaryCall<unknown, unknown>, calls: ActiveCalls | undefined): grpc.handleUnaryCall<unknown, unknown> {
  // Peer calls went through strictStringsInterceptor, which refused marked requests.
  if (isPeerMethod(path)) return handler;
  const alwaysAnswers = path.startsWith("/grpc.");
  return (call, callback) => {
    if (calls?.closed === true && !alwaysAnswers) return callback(statusError(grpc.status.UNAVAILABLE, STOPPING));
    const request = call.request as { [REFUSED]?: Refusal; [MISREAD]?: string } | null;
    const refused = request?.[REFUSED];
    if (refused !== undefined) return callback(statusError(refused.code, refused.details));
    const misread = request?.[MISREAD];
    if (misread !== undefined) return callback(statusError(grpc.status.INVALID_ARGUMENT, misread));
    if (calls === undefined) return handler(call, callback);
    let answered = false;
    const answer: grpc.sendUnaryData<unknown> = (err, value, trailer, flags) => {
      if (answered) return;
      answered = true;
      end();
      callback(err, value, trailer, flags);
    };
    // A cut (the drain ran out) answers now; the handler's later answer is dropped.
    const end = calls.enter((details) => answer(statusError(grpc.status.UNAVAILABLE, details)));
    call.once("cancelled", end);
    try {
      handler(call, answer);
    } catch (err) {
      // grpc-js answers a handler that throws (UNKNOWN): the call ends here.
      answered = true;
      end();
      throw err;
    }
  };
}

function statusError(code: grpc.status, details: string): grpc.ServerErrorResponse {
  return Object.assign(new Error(details), { code, details, metadata: new grpc.Metadata() });
}

/** A gRPC server whose every deltaset service refuses strings that are not UTF-8. */
export class StrictStringServer extends grpc.Server {
  /** calls: count the calls running (for a graceful shutdown), in the same interceptor. */
  /** maxRequestEntries: client requests holding more entries of repeated fields are refused undecoded. */
  constructor(options: grpc.ServerOptions = {}, private readonly calls?: ActiveCalls, private readonly maxRequestEntries?: number) {
    // First interceptor: it sees each message before any other interceptor does.
    super({ ...options, interceptors: [strictStringsInterceptor(calls), ...(options.interceptors ?? [])] });
  }

  override addService(service: grpc.ServiceDefinition, implementation: grpc.UntypedServiceImplementation): void {
    // Unary handlers are guarded; the implementation's others stay as they are.
    const guarded = wrapHandlers(service, implementation, (method, handler) =>
      method.requestStream || method.responseStream ? undefined : (unaryGuard(method.path, handler as grpc.handleUnaryCall<unknown, unknown>, this.calls) as AnyHandler),
    );
    super.addService(strictStringDefinition(service, this.maxRequestEntries), guarded);
  }
}
