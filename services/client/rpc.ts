// Promise helpers over the generated grpc-js clients: the RPC client layer that the CLI, the chaos
// harness and the tests share (it depends only on the generated code).
import * as grpc from "@grpc/grpc-js";
import { ReplicaClient } from "../gen/deltaset/v1/replica.js";
import { MembershipClient } from "../gen/deltaset/v1/membership.js";

export function replicaClient(addr: string, creds = grpc.credentials.createInsecure(), maxMessageBytes = 64 * 1024 * 1024): ReplicaClient {
  return new ReplicaClient(addr, creds, {
    "grpc.max_receive_message_length": maxMessageBytes,
    "grpc.max_send_message_length": maxMessageBytes,
  });
}

export function membershipClient(addr: string, creds = grpc.credentials.createInsecure()): MembershipClient {
  return new MembershipClient(addr, creds);
}

type UnaryMethod<Req, Res> = (
  req: Req,
  metadata: grpc.Metadata,
  options: Partial<grpc.CallOptions>,
  cb: (err: grpc.ServiceError | null, res: Res) => void,
) => grpc.ClientUnaryCall;

/** Call a unary method with a deadline; rejects with the ServiceError. */
export function call<Req, Res>(
  client: grpc.Client,
  method: UnaryMethod<Req, Res>,
  req: Req,
  opts: { timeoutMs?: number; metadata?: grpc.Metadata } = {},
): Promise<Res> {
  return new Promise((resolve, reject) => {
    method.call(client, req, opts.metadata ?? new grpc.Metadata(), { deadline: Date.now() + (opts.timeoutMs ?? 10_000) }, (err, res) =>
      err ? reject(err) : resolve(res),
    );
  });
}
