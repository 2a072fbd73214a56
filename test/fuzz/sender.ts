// Sends raw request bytes to any method of a node, unary or streaming, as the fuzzer needs: a gRPC
// client whose serializers pass Buffers through unchanged, optionally signing peer calls with the
// cluster key the way nodes do (peer-proof.ts: the digest covers the exact bytes sent, so a mutant
// is signed as it is). Every call resolves to the status code it ended with; none rejects.
import * as grpc from "@grpc/grpc-js";
import type { ClusterKeyring } from "../../services/node/cluster-keys.ts";
import { BODY_HEADER, PROOF_HEADER, STREAM_BODY, bodyDigest, newNonce, signProof, signStreamMessage } from "../../services/node/peer-proof.ts";
import { trailingMacField } from "../../services/client/peer-clients.ts";
import { withTrailingMac } from "../../services/common/trailing-mac.ts";
import type { CallKind } from "./seeds.ts";

const pass = (b: Buffer) => b;

export interface Signer {
  keys: ClusterKeyring;
  nodeId: string;
  /** The receiving node's id, named in the proof. */
  to: string;
}

export interface Outcome {
  code: number;
  details: string;
}

export class RawSender {
  private readonly clients: grpc.Client[];
  private next = 0;

  constructor(address: string, channels = 2) {
    this.clients = Array.from({ length: channels }, (_, i) =>
      new grpc.Client(address, grpc.credentials.createInsecure(), { "grpc.max_receive_message_length": 64 * 1024 * 1024, "grpc.channel_id": i } as grpc.ChannelOptions),
    );
  }

  close(): void {
    for (const c of this.clients) c.close();
  }

  private client(): grpc.Client {
    this.next = (this.next + 1) % this.clients.length;
    return this.clients[this.next]!;
  }

  /**
   * One call. `frames` is one request for unary and server-stream calls, the messages of a client
   * or bidirectional stream. With a signer the call carries a proof over the bytes (or the stream
   * marker), and each message of a stream its MAC, appended as its last field the way a node
   * writes it (GossipFrame.mac, field 9; StateChunk.mac, field 20), so mutants reach the handler.
   */
  send(path: string, kind: CallKind, frames: Buffer[], signer: Signer | undefined, deadlineMs: number): Promise<Outcome> {
    const metadata = new grpc.Metadata();
    const streamed = kind === "clientStream" || kind === "bidiStream";
    const nonce = newNonce();
    if (signer !== undefined) {
      const body = streamed ? STREAM_BODY : bodyDigest(frames[0]!);
      metadata.set(PROOF_HEADER, signProof(signer.keys, path, signer.nodeId, body, Date.now(), nonce, signer.to));
      if (!streamed) metadata.set(BODY_HEADER, body);
      const macField = streamed ? trailingMacField(path, "request") : undefined;
      if (macField !== undefined) frames = frames.map((f, i) => withTrailingMac(f, macField, signStreamMessage(signer.keys, "frame", path, nonce, i, bodyDigest(f))));
    }
    const options: grpc.CallOptions = { deadline: Date.now() + deadlineMs };
    const c = this.client();
    return new Promise<Outcome>((resolve) => {
      const done = (err: grpc.ServiceError | null) => resolve(err ? { code: err.code, details: err.details } : { code: 0, details: "" });
      if (kind === "unary") {
        c.makeUnaryRequest(path, pass, pass, frames[0]!, metadata, options, (err) => done(err));
      } else if (kind === "clientStream") {
        const s = c.makeClientStreamRequest(path, pass, pass, metadata, options, (err) => done(err));
        s.on("error", () => {});
        for (const f of frames) s.write(f);
        s.end();
      } else if (kind === "bidiStream") {
        const s = c.makeBidiStreamRequest(path, pass, pass, metadata, options);
        s.on("data", () => {});
        s.on("error", () => {});
        s.on("status", (st: grpc.StatusObject) => resolve({ code: st.code, details: st.details }));
        for (const f of frames) s.write(f);
        s.end();
      } else {
        const s = c.makeServerStreamRequest(path, pass, pass, frames[0]!, metadata, options);
        s.on("data", () => {});
        s.on("error", () => {});
        s.on("status", (st: grpc.StatusObject) => resolve({ code: st.code, details: st.details }));
      }
    });
  }
}
