// Request routing under partition placement (--replication-factor R): a Replica call for a key
// whose partition this node does not own is forwarded to a live owner, with the caller's deadline
// and bearer token, one hop only: the forwarded call carries FORWARDED_BY, and a node serves such
// a call itself whatever its view says (a write it takes without owning the key is handed off to
// the owners by gossip). UNAVAILABLE from one owner moves on to the next. Unary calls with a key
// (Add, Remove, Query, Merge, Increment, Delete) and key-addressed streams (Scan, Export, a key
// Watch) are forwarded; Keys, prefix watches, Import and AddStream are served by the node called.
import * as grpc from "@grpc/grpc-js";
import { ReplicaClient, type ReplicaServer } from "../gen/deltaset/v1/replica.js";
import type { Ownership } from "../gossip/ownership.js";
import type { Logger } from "../common/logger.js";
import { type CausalContext, contextToProto } from "../crdt/index.js";

/** Metadata naming the node that forwarded a call: its receiver never forwards it again. */
export const FORWARDED_BY = "x-deltaset-forwarded-by";

export interface RoutingDeps {
  ownership: Ownership;
  credentials?: grpc.ChannelCredentials;
  channelOptions: grpc.ChannelOptions;
  maxMessageBytes: number;
  log: Logger;
}

/** Counts of routed calls, for metrics and tests. */
export interface RoutingCounters {
  forwarded: number;
  failovers: number;
  forwardErrors: number;
}

type Target = { nodeId: string; address: string };

export class Router {
  readonly counters: RoutingCounters = { forwarded: 0, failovers: 0, forwardErrors: 0 };
  private readonly clients = new Map<string, ReplicaClient>();

  constructor(private readonly d: RoutingDeps) {}

  /** The owners to forward a call for key to, in order; undefined: serve it here. */
  targets(key: unknown, metadata: grpc.Metadata): Target[] | undefined {
    const o = this.d.ownership;
    if (o.full || typeof key !== "string" || key === "" || metadata.get(FORWARDED_BY).length > 0) return undefined;
    const p = o.partitionOf(key);
    if (o.owns(p)) return undefined;
    const out = o.ownerAddresses(p).filter((t) => t.nodeId !== o.self && t.address !== "");
    return out.length === 0 ? undefined : out;
  }

  private client(address: string): ReplicaClient {
    let c = this.clients.get(address);
    if (c === undefined) {
      c = new ReplicaClient(address, this.d.credentials ?? grpc.credentials.createInsecure(), {
        "grpc.max_receive_message_length": this.d.maxMessageBytes,
        "grpc.max_send_message_length": this.d.maxMessageBytes,
        "grpc.initial_reconnect_backoff_ms": 200,
        "grpc.max_reconnect_backoff_ms": 2000,
        ...this.d.channelOptions,
      });
      this.clients.set(address, c);
    }
    return c;
  }

  /** The caller's credentials and deadline, and the one-hop mark. */
  private outgoing(call: { metadata: grpc.Metadata; getDeadline(): grpc.Deadline }): { metadata: grpc.Metadata; options: Partial<grpc.CallOptions> } {
    const metadata = new grpc.Metadata();
    for (const v of call.metadata.get("authorization")) metadata.add("authorization", v);
    metadata.set(FORWARDED_BY, this.d.ownership.self);
    const deadline = call.getDeadline();
    const finite = deadline instanceof Date ? Number.isFinite(deadline.getTime()) : Number.isFinite(deadline);
    return { metadata, options: finite ? { deadline } : {} };
  }

  /** A unary handler that forwards calls for keys owned elsewhere. */
  unary<Req extends { key?: unknown }, Res>(
    local: grpc.handleUnaryCall<Req, Res>,
    method: (c: ReplicaClient) => (req: Req, md: grpc.Metadata, opts: Partial<grpc.CallOptions>, cb: (err: grpc.ServiceError | null, res?: Res) => void) => unknown,
  ): grpc.handleUnaryCall<Req, Res> {
    return (call, callback) => {
      const targets = this.targets(call.request.key, call.metadata);
      if (targets === undefined) return local(call, callback);
      const { metadata, options } = this.outgoing(call);
      const attempt = (i: number) => {
        this.counters.forwarded++;
        const c = this.client(targets[i]!.address);
        method(c).call(c, call.request, metadata, options, (err, res) => {
          if (err !== null && err.code === grpc.status.UNAVAILABLE && i + 1 < targets.length) {
            this.counters.failovers++;
            attempt(i + 1);
            return;
          }
          if (err !== null) {
            this.counters.forwardErrors++;
            callback(err);
          } else callback(null, res);
        });
      };
      attempt(0);
    };
  }

  /** A server-streaming handler that forwards calls for keys owned elsewhere, relaying the stream. */
  stream<Req extends { key?: unknown }, Res>(
    local: grpc.handleServerStreamingCall<Req, Res>,
    method: (c: ReplicaClient) => (req: Req, md: grpc.Metadata, opts: Partial<grpc.CallOptions>) => grpc.ClientReadableStream<Res>,
  ): grpc.handleServerStreamingCall<Req, Res> {
    return (call) => {
      const targets = this.targets(call.request.key, call.metadata);
      if (targets === undefined) return local(call);
      const { metadata, options } = this.outgoing(call);
      let upstream: grpc.ClientReadableStream<Res> | undefined;
      call.on("cancelled", () => upstream?.cancel());
      const attempt = (i: number) => {
        this.counters.forwarded++;
        const c = this.client(targets[i]!.address);
        const up = (upstream = method(c).call(c, call.request, metadata, options));
        let relayed = false;
        let ended = false;
        up.on("data", (m: Res) => {
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
            this.counters.failovers++;
            attempt(i + 1);
            return;
          }
          this.counters.forwardErrors++;
          call.emit("error", err);
        });
        up.on("end", () => {
          if (ended) return;
          ended = true;
          call.end();
        });
      };
      attempt(0);
    };
  }

  /**
   * Give a deferred remove to an owner of its key (the hand-off of a partition this node no longer
   * owns): a Remove of the element with the dots it waits for, marked forwarded so the owner takes
   * it whatever its view. Tries the owners in order; rejects when none took it.
   */
  async removeAtOwner(key: string, element: Buffer, unseen: CausalContext, timeoutMs: number): Promise<void> {
    const o = this.d.ownership;
    const owners = o.ownerAddresses(o.partitionOf(key)).filter((t) => t.nodeId !== o.self && t.address !== "");
    let last: unknown = new Error(`no owner of "${key}" to hand a deferred remove to`);
    for (const t of owners) {
      const c = this.client(t.address);
      const metadata = new grpc.Metadata();
      metadata.set(FORWARDED_BY, o.self);
      try {
        await new Promise<void>((resolve, reject) =>
          c.remove({ key, elements: [element], texts: [], context: contextToProto(unseen) }, metadata, { deadline: Date.now() + timeoutMs }, (err) => (err ? reject(err) : resolve())),
        );
        return;
      } catch (err) {
        last = err;
      }
    }
    throw last;
  }

  /** The Replica service with forwarding in front of the calls that name a key. */
  wrap(impl: ReplicaServer): ReplicaServer {
    return {
      ...impl,
      add: this.unary(impl.add, (c) => c.add),
      remove: this.unary(impl.remove, (c) => c.remove),
      query: this.unary(impl.query, (c) => c.query),
      merge: this.unary(impl.merge, (c) => c.merge),
      increment: this.unary(impl.increment, (c) => c.increment),
      delete: this.unary(impl.delete, (c) => c.delete),
      scan: this.stream(impl.scan, (c) => c.scan),
      export: this.stream(impl.export, (c) => c.export),
      watch: this.stream(impl.watch, (c) => c.watch),
    };
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }
}
