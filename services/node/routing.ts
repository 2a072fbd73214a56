// Request routing under partition placement (--replication-factor R): a Replica call for a key
// whose partition this node does not own is forwarded to a live owner, with the caller's deadline
// and bearer token, one hop only: the forwarded call carries FORWARDED_BY, and a node serves such
// a call itself whatever its view says (a write it takes without owning the key is handed off to
// the owners by gossip). UNAVAILABLE from one owner moves on to the next (for Increment only when
// the call was never sent: see attempt). Unary calls with a key
// (Add, Remove, Query, Merge, Increment, Delete) and key-addressed streams (Scan, Export, a key
// Watch) are forwarded whole; Import is proxied to one owner (forward-import.ts); an AddStream's
// adds of keys owned elsewhere go to an owner one by one as unary Adds (addRoute). Keys and prefix
// watches are served by the node called. Every call to an owner is counted by method and outcome.
// A read served here of a partition this node came to own lately first fetches its key from the
// partition's former holders (read-pull.ts): the copy here may hold only part of it.
import * as grpc from "@grpc/grpc-js";
import { ObjectType } from "../crdt/index.js";
import { type AddRequest, type AddResponse, ReplicaClient, type ReplicaServer, ReplicaService } from "../gen/deltaset/v1/replica.js";
import type { Ownership } from "../gossip/ownership.js";
import type { Logger } from "../common/logger.js";
import type { AddRoute } from "../replica/add-stream.js";
import { RpcError } from "../replica/errors.js";
import { channelReady } from "./channel-ready.js";
import { forwardImport } from "./forward-import.js";
import { connectionFailureReason } from "../common/connection-error.js";
import { ReadPull } from "./read-pull.js";
import { FORWARDED_BY, type ForwardMarkCheck } from "./forward-marks.js";
import { type AnyHandler, wrapHandlers } from "./wrap-handlers.js";

export { FORWARDED_BY };

export interface RoutingDeps {
  ownership: Ownership;
  credentials?: grpc.ChannelCredentials;
  /** Options of every peer channel: the cluster-key signer and the reconnect backoff (node.ts). */
  channelOptions: grpc.ChannelOptions;
  maxMessageBytes: number;
  /**
   * How long a stream's part waits for an owner (--forward-timeout-ms): an Import for an owner's
   * connection before it tries the next owner, each add an AddStream forwards for its answer.
   */
  forwardTimeoutMs: number;
  /** Whether this node's store holds key (a read after a move serves here only then, stream). */
  holds?: (key: string) => Promise<boolean>;
  /** --read-after-move-ms: a Query, Scan or Export of a partition whose owners changed this recently moves on past an owner that finds its key absent (read, stream). Default 0: never. */
  readAfterMoveMs?: number;
  log: Logger;
  /** Observes each call made to an owner: its method and how it ended (metrics). */
  onForward?: (method: string, outcome: ForwardOutcome) => void;
  /** Drops the forwarding marks of a call that a key holder did not prove (forward-marks.ts). */
  marks?: ForwardMarkCheck;
}

/** How one call to an owner ended: answered, failed, or UNAVAILABLE and retried at the next owner. */
export type ForwardOutcome = "ok" | "error" | "failover" | "absent-next";

export type Target = { nodeId: string; address: string };

export class Router {
  private readonly clients = new Map<string, ReplicaClient>();
  private pull: ReadPull | undefined;

  constructor(private readonly d: RoutingDeps) {}

  /** Reads served here first fetch a key of a partition this node came to own lately (read-pull.ts). */
  usePull(pull: ReadPull): void {
    this.pull = pull;
  }

  /**
   * A read handler served here, after the key was fetched from its former holders when it must be
   * (a fetch is itself served so, one hop further at most: read-pull.ts). A call its caller gave
   * up on meanwhile is not served. A read forwarded here fetches a key absent here too: it cannot
   * move on to another owner, and the forwarder asks the next owner only when its own placement
   * moved (a member replaced under its id with an empty volume moves nothing in the others' view,
   * and its reads found keys absent that the other owners held).
   */
  private pulled<C extends { request: { key?: unknown }; metadata: grpc.Metadata; cancelled: boolean }, Rest extends unknown[]>(
    local: (call: C, ...rest: Rest) => void,
    observes?: (request: C["request"]) => boolean,
  ): (call: C, ...rest: Rest) => void {
    return (call, ...rest) => {
      const pull = this.pull;
      const key = call.request.key;
      if (pull === undefined || typeof key !== "string") return local(call, ...rest);
      const absentToo = observes === undefined ? call.metadata.get(FORWARDED_BY).length > 0 : observes(call.request);
      if (observes !== undefined && !absentToo) return local(call, ...rest);
      void pull.before(key, call.metadata.get("authorization"), ReadPull.hopOf(call.metadata), absentToo).then(() => {
        if (!call.cancelled) local(call, ...rest);
      });
    };
  }

  /**
   * Whether the owner at address can take a call now: its connection is (or becomes) READY within
   * --forward-timeout-ms and before the caller's deadline (options, as outgoing gives them).
   */
  ownerReady(address: string, options: Partial<grpc.CallOptions>): Promise<boolean> {
    const callDeadline = options.deadline === undefined ? Infinity : new Date(options.deadline).getTime();
    return channelReady(this.client(address).getChannel(), Math.min(callDeadline, Date.now() + this.d.forwardTimeoutMs));
  }

  record(method: string, outcome: ForwardOutcome): void {
    this.d.onForward?.(method, outcome);
  }

  /** Whether calls of this caller may be forwarded at all (placement on, not forwarded already, not a fetch of read-pull.ts). */
  routes(metadata: grpc.Metadata): boolean {
    return !this.d.ownership.full && metadata.get(FORWARDED_BY).length === 0 && !ReadPull.isPull(metadata);
  }

  /** The owners to forward a call for key to, in order; undefined: serve it here. */
  targets(key: unknown, metadata: grpc.Metadata): Target[] | undefined {
    const o = this.d.ownership;
    if (!this.routes(metadata) || typeof key !== "string" || key === "") return undefined;
    const p = o.partitionOf(key);
    if (o.owns(p)) return undefined;
    const out = o.ownerAddresses(p).filter((t) => t.nodeId !== o.self && t.address !== "");
    return out.length === 0 ? undefined : out;
  }

  /**
   * For a partition whose owners changed within readAfterMoveMs: where a read of key may find it
   * (Ownership.readAddresses, this node first if it is there); undefined otherwise.
   */
  movedTargets(key: unknown, metadata: grpc.Metadata): Target[] | undefined {
    const o = this.d.ownership;
    const window = this.d.readAfterMoveMs ?? 0;
    if (window <= 0 || !this.routes(metadata) || typeof key !== "string" || key === "") return undefined;
    const p = o.partitionOf(key);
    const since = Date.now() - window;
    if (!o.movedSince(p, since)) return undefined;
    const all = o.readAddresses(p, since).filter((t) => t.nodeId === o.self || t.address !== "");
    // An owner first asks itself, as outside the window (a new owner ranked above it may hold only
    // part of the key yet); a former owner keeps its place after the owners (its copy is stale).
    if (!o.owns(p)) return all;
    return [...all.filter((t) => t.nodeId === o.self), ...all.filter((t) => t.nodeId !== o.self)];
  }

  client(address: string): ReplicaClient {
    let c = this.clients.get(address);
    if (c === undefined) {
      c = new ReplicaClient(address, this.d.credentials ?? grpc.credentials.createInsecure(), {
        "grpc.max_receive_message_length": this.d.maxMessageBytes,
        "grpc.max_send_message_length": this.d.maxMessageBytes,
        ...this.d.channelOptions,
      });
      this.clients.set(address, c);
    }
    return c;
  }

  /** The caller's credentials and deadline, and the one-hop mark. */
  outgoing(call: { metadata: grpc.Metadata; getDeadline(): grpc.Deadline }): { metadata: grpc.Metadata; options: Partial<grpc.CallOptions> } {
    const metadata = new grpc.Metadata();
    for (const v of call.metadata.get("authorization")) metadata.add("authorization", v);
    metadata.set(FORWARDED_BY, this.d.ownership.self);
    const deadline = call.getDeadline();
    const finite = deadline instanceof Date ? Number.isFinite(deadline.getTime()) : Number.isFinite(deadline);
    return { metadata, options: finite ? { deadline } : {} };
  }

  /**
   * Send one unary call to the owners in order until one answers: UNAVAILABLE moves on to the
   * next; done gets the answer, or the last error and the owner that gave it.
   *
   * unsentOnly: for a call that must not be applied twice (Increment: a retry id is known only to
   * the owner that applied it until gossip spreads it). grpc-js answers UNAVAILABLE also when a
   * connection drops after the call was sent, and the owner may have applied it; so the call moves
   * on only from an owner whose connection is not ready within the forward timeout (the call was
   * never sent), and an owner's UNAVAILABLE after sending goes back to the client.
   */
  private attempt<Res>(
    name: string,
    targets: Target[],
    send: (c: ReplicaClient, cb: (err: grpc.ServiceError | null, res?: Res) => void) => void,
    done: (err: grpc.ServiceError | null, res: Res | undefined, target: Target) => void,
    unsentOnly?: { ready: (address: string) => Promise<boolean> },
  ): void {
    const next = async (i: number) => {
      if (unsentOnly !== undefined && i + 1 < targets.length && !(await unsentOnly.ready(targets[i]!.address))) {
        this.record(name, "failover");
        return void next(i + 1);
      }
      send(this.client(targets[i]!.address), (err, res) => {
        if (err !== null && err.code === grpc.status.UNAVAILABLE && i + 1 < targets.length && unsentOnly === undefined) {
          this.record(name, "failover");
          void next(i + 1);
          return;
        }
        this.record(name, err === null ? "ok" : "error");
        done(err, res, targets[i]!);
      });
    };
    void next(0);
  }

  /** A unary handler that forwards calls for keys owned elsewhere. */
  unary<Req extends { key?: unknown }, Res>(
    name: string,
    local: grpc.handleUnaryCall<Req, Res>,
    method: (c: ReplicaClient) => (req: Req, md: grpc.Metadata, opts: Partial<grpc.CallOptions>, cb: (err: grpc.ServiceError | null, res?: Res) => void) => unknown,
    /** unsentOnly (attempt): for every call, or for those the predicate names. */
    opts: { unsentOnly?: boolean | ((req: Req) => boolean) } = {},
  ): grpc.handleUnaryCall<Req, Res> {
    return (call, callback) => {
      const targets = this.targets(call.request.key, call.metadata);
      const unsentOnly = typeof opts.unsentOnly === "function" ? opts.unsentOnly(call.request) : opts.unsentOnly === true;
      if (targets === undefined) return local(call, callback);
      const { metadata, options } = this.outgoing(call);
      this.attempt<Res>(
        name,
        targets,
        (c, cb) => method(c).call(c, call.request, metadata, options, cb),
        (err, res, t) => (err !== null ? callback(fromOwner(err, t)) : callback(null, res)),
        unsentOnly ? { ready: (address) => this.ownerReady(address, options) } : undefined,
      );
    };
  }

  /**
   * Query: as unary, except for a partition whose owners changed within readAfterMoveMs. Then the
   * owners (this node among them, if it is one), then its owners before the change that are still
   * members, are asked in order (movedTargets) and an answer that finds the key absent moves on to
   * the next: a new owner answers from what it holds, nothing until the other owners sent it the
   * partition, and a key replicated for long would read empty meanwhile. The first answer that
   * finds the key is returned, or the last one's when none does.
   */
  read<Req extends { key?: unknown }, Res extends { type?: number }>(
    name: string,
    local: grpc.handleUnaryCall<Req, Res>,
    method: (c: ReplicaClient) => (req: Req, md: grpc.Metadata, opts: Partial<grpc.CallOptions>, cb: (err: grpc.ServiceError | null, res?: Res) => void) => unknown,
  ): grpc.handleUnaryCall<Req, Res> {
    const plain = this.unary(name, local, method);
    return (call, callback) => {
      const o = this.d.ownership;
      const owners = this.movedTargets(call.request.key, call.metadata);
      if (owners === undefined) return plain(call, callback);
      const { metadata, options } = this.outgoing(call);
      const next = (i: number) => {
        const t = owners[i]!;
        const here = t.nodeId === o.self;
        const answer = (err: grpc.ServiceError | null, res?: Res | null) => {
          const more = i + 1 < owners.length;
          if (err !== null && err.code === grpc.status.UNAVAILABLE && more) {
            if (!here) this.record(name, "failover");
            return next(i + 1);
          }
          if (err === null && more && res?.type === ObjectType.OBJECT_TYPE_UNSPECIFIED) {
            this.record(name, "absent-next");
            return next(i + 1);
          }
          if (!here) this.record(name, err === null ? "ok" : "error");
          if (err !== null) return callback(here ? err : fromOwner(err, t));
          callback(null, res ?? undefined);
        };
        if (here) local(call, answer as grpc.sendUnaryData<Res>);
        else method(this.client(t.address)).call(this.client(t.address), call.request, metadata, options, answer);
      };
      next(0);
    };
  }

  /**
   * For one AddStream call: the adds of keys owned elsewhere go to an owner as unary Adds (AWSET,
   * as AddStream makes), with the caller's token, each within the stream's deadline and
   * --forward-timeout-ms; undefined when nothing of this call is forwarded.
   */
  addRoute(call: { metadata: grpc.Metadata; getDeadline(): grpc.Deadline }): AddRoute | undefined {
    if (!this.routes(call.metadata)) return undefined;
    const { metadata, options } = this.outgoing(call);
    const streamDeadline = options.deadline === undefined ? Infinity : new Date(options.deadline).getTime();
    return (key) => {
      const targets = this.targets(key, call.metadata);
      if (targets === undefined) return undefined;
      return (elements, ttlMs, copies) => {
        const opts = { ...options, deadline: Math.min(streamDeadline, Date.now() + this.d.forwardTimeoutMs) };
        const buffers = elements.map((e) => (Buffer.isBuffer(e) ? e : Buffer.from(e.buffer, e.byteOffset, e.byteLength)));
        const req = { key, elements: buffers, texts: [], type: ObjectType.AWSET, ttlMs: ttlMs === undefined ? undefined : BigInt(ttlMs), copies };
        return new Promise<number>((resolve, reject) =>
          this.attempt<AddResponse>(
            "AddStream",
            targets,
            (c, cb) => c.add(req, metadata, opts, cb),
            (err, res, t) => {
              if (err !== null) return reject(new RpcError(err.code, `at owner ${t.nodeId} (${t.address}): ${err.details}`));
              // An owner of an earlier version ignores copies (answers 0): its add is on it alone.
              if (copies !== undefined && res!.copies < copies) {
                return reject(new RpcError(grpc.status.UNAVAILABLE, `at owner ${t.nodeId} (${t.address}): ${res!.copies} of the ${copies} copies asked confirmed (a node of an earlier version?); the add is made there`));
              }
              resolve(res!.added);
            },
          ),
        );
      };
    };
  }

  /**
   * A server-streaming handler that forwards calls for keys owned elsewhere, relaying the stream.
   * With `absent` (a read: Scan, Export), a partition whose owners changed lately is read as Query
   * is (read): an owner whose first message says the key is absent (or that answers NOT_FOUND, as
   * Export does) is passed over for the next, and this node, when among them, serves only if it
   * holds the key (or is the last).
   */
  stream<Req extends { key?: unknown }, Res>(
    name: string,
    local: grpc.handleServerStreamingCall<Req, Res>,
    method: (c: ReplicaClient) => (req: Req, md: grpc.Metadata, opts: Partial<grpc.CallOptions>) => grpc.ClientReadableStream<Res>,
    absent?: (first: Res) => boolean,
  ): grpc.handleServerStreamingCall<Req, Res> {
    return (call) => {
      const moved = absent !== undefined ? this.movedTargets(call.request.key, call.metadata) : undefined;
      const targets = moved ?? this.targets(call.request.key, call.metadata);
      if (targets === undefined) return local(call);
      const { metadata, options } = this.outgoing(call);
      let upstream: grpc.ClientReadableStream<Res> | undefined;
      call.on("cancelled", () => upstream?.cancel());
      const attempt = (i: number) => {
        const more = i + 1 < targets.length;
        if (targets[i]!.nodeId === this.d.ownership.self) {
          const holds = this.d.holds;
          if (!more || holds === undefined) return local(call);
          void holds(call.request.key as string).then(
            (here) => (here ? local(call) : attempt(i + 1)),
            () => local(call),
          );
          return;
        }
        const c = this.client(targets[i]!.address);
        const up = (upstream = method(c).call(c, call.request, metadata, options));
        let relayed = false;
        let ended = false;
        up.on("data", (m: Res) => {
          if (!relayed && moved !== undefined && more && absent!(m)) {
            ended = true;
            up.cancel();
            this.record(name, "absent-next");
            attempt(i + 1);
            return;
          }
          relayed = true;
          // Back-pressure: read no further from the owner until the caller took what was sent.
          if (!call.write(m)) {
            up.pause();
            call.once("drain", () => up.resume());
          }
        });
        up.on("error", (err: grpc.ServiceError) => {
          if (ended) return;
          ended = true;
          if (err.code === grpc.status.CANCELLED && call.cancelled) return;
          if (!relayed && err.code === grpc.status.UNAVAILABLE && i + 1 < targets.length) {
            this.record(name, "failover");
            attempt(i + 1);
            return;
          }
          // Export answers an absent key NOT_FOUND rather than with a chunk.
          if (!relayed && moved !== undefined && more && err.code === grpc.status.NOT_FOUND) {
            this.record(name, "absent-next");
            attempt(i + 1);
            return;
          }
          this.record(name, "error");
          call.emit("error", err);
        });
        up.on("end", () => {
          if (ended) return;
          ended = true;
          this.record(name, "ok");
          call.end();
        });
      };
      attempt(0);
    };
  }

  /**
   * The Replica service with forwarding in front of the calls that name a key; each call's marks
   * are checked first, before anything reads them.
   */
  wrap(impl: ReplicaServer): ReplicaServer {
    return this.checkingMarks({
      ...impl,
      // An Add with a request id is like an Increment with one: applied once only where its earlier
      // tries are known (after a move, those its former holders took too), and never sent on to
      // another owner once the first may have applied it.
      add: this.unary("Add", this.pulled(impl.add, carriesRequestId), (c) => c.add, { unsentOnly: carriesRequestId }),
      // A Remove without a context and a Delete act on what this node observed of the key: after
      // a move, all its former holders have of it (one with a context waits for the adds it names).
      remove: this.unary("Remove", this.pulled(impl.remove, (req) => req.context === undefined), (c) => c.remove),
      query: this.read("Query", this.pulled(impl.query), (c) => c.query),
      merge: this.unary("Merge", impl.merge, (c) => c.merge),
      // An Increment with a request id is applied once only if this node has seen the id's
      // earlier tries: after a move, those its former holders took too.
      increment: this.unary("Increment", this.pulled(impl.increment, (req) => req.requestId !== ""), (c) => c.increment, { unsentOnly: true }),
      delete: this.unary("Delete", this.pulled(impl.delete, () => true), (c) => c.delete),
      scan: this.stream("Scan", this.pulled(impl.scan), (c) => c.scan, (first) => first.total === 0n && isEmptyContext(first.context)),
      export: this.stream("Export", this.pulled(impl.export), (c) => c.export, () => false),
      watch: this.stream("Watch", impl.watch, (c) => c.watch),
      import: forwardImport(this, impl.import),
    });
  }

  private checkingMarks(service: ReplicaServer): ReplicaServer {
    const marks = this.d.marks;
    if (marks === undefined) return service;
    type Call = { metadata: grpc.Metadata; getAuthContext(): { transportSecurityType?: string; sslPeerCertificate?: unknown } };
    return wrapHandlers(ReplicaService, service, (method, handler) => {
      const h = handler as (call: Call, ...rest: unknown[]) => unknown;
      const checked = (call: Call, ...rest: unknown[]) => {
        marks.check(call.metadata, method.path, call);
        return h(call, ...rest);
      };
      return checked as AnyHandler;
    });
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }
}

/**
 * An owner's failure to answer as the caller gets it: naming the owner the call was forwarded to,
 * since the node the caller reached did answer (grpc-js's "No connection established" read as
 * if it had not). An owner's own answers (a refusal, a limit) go back as they are.
 */
function fromOwner(err: grpc.ServiceError, t: Target): Partial<grpc.ServiceError> {
  if (err.code !== grpc.status.UNAVAILABLE && err.code !== grpc.status.DEADLINE_EXCEEDED) return err;
  return { code: err.code, details: `forwarded to the key's owner ${t.nodeId} (${t.address}), which did not answer: ${connectionFailureReason(err.details)}`, metadata: err.metadata };
}

/** An Add that carries a request id (applied once per id: pulled first, never failed over once sent). */
const carriesRequestId = (req: AddRequest) => (req.requestId ?? "") !== "";

/** A context in a first chunk that names no add at all: the key is absent where it was read. */
function isEmptyContext(ctx: { vv: unknown[]; cloud: unknown[] } | undefined): boolean {
  return ctx === undefined || (ctx.vv.length === 0 && ctx.cloud.length === 0);
}
