// The gRPC status a call ended with (code 0 when it succeeded), for tests that expect refusals.
import type * as grpc from "@grpc/grpc-js";

export async function statusOf(p: Promise<unknown>): Promise<{ code: number; details: string }> {
  try {
    await p;
    return { code: 0, details: "" };
  } catch (err) {
    return { code: (err as grpc.ServiceError).code, details: (err as grpc.ServiceError).details };
  }
}
