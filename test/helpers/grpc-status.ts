// The gRPC status a call ended with (code 0 when it succeeded), for tests that expect refusals.
import { strict as assert } from "node:assert";
import type * as grpc from "@grpc/grpc-js";

export async function statusOf(p: Promise<unknown>): Promise<{ code: number; details: string }> {
  try {
    await p;
    return { code: 0, details: "" };
  } catch (err) {
    return { code: (err as grpc.ServiceError).code, details: (err as grpc.ServiceError).details };
  }
}

/** Assert that a call is refused with this status and a message matching text. */
export async function expectRefused(p: Promise<unknown>, code: number, text: RegExp): Promise<void> {
  const s = await statusOf(p);
  assert.equal(s.code, code, s.details);
  assert.match(s.details, text);
}
