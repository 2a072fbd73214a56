// The fuzzer's canary: a control set and a control counter written once with valid calls, under
// keys no mutant can produce ("ctl-" plus 32 random hex digits; seeds use short "fz-" keys), and
// the node's health. After every batch, check() reads them back: the set's members and size, the
// counter's value, Health/Check SERVING. Any difference is a corruption.
import { randomBytes } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import { call, replicaClient } from "../../services/client/rpc.ts";
import type { ReplicaClient } from "../../services/gen/deltaset/v1/replica.ts";

const pass = (b: Buffer) => b;
/** HealthCheckResponse { status: SERVING }. */
const SERVING = Buffer.from([0x08, 0x01]);

export interface ControlCheck {
  healthy: boolean;
  /** Empty when the control values are as written; else what differs. */
  corruptions: string[];
}

export class Control {
  readonly setKey = `ctl-set-${randomBytes(16).toString("hex")}`;
  readonly counterKey = `ctl-ctr-${randomBytes(16).toString("hex")}`;
  readonly elements = Array.from({ length: 20 }, (_, i) => `control-${i}`);
  readonly increments = [5n, -3n, 1000n, -1n];
  private readonly client: ReplicaClient;
  private readonly raw: grpc.Client;

  constructor(address: string) {
    this.client = replicaClient(address);
    this.raw = new grpc.Client(address, grpc.credentials.createInsecure());
  }

  get expectedCounter(): bigint {
    return this.increments.reduce((a, b) => a + b, 0n);
  }

  async write(): Promise<void> {
    await call(this.client, this.client.add, { key: this.setKey, elements: [], texts: this.elements });
    for (const amount of this.increments) await call(this.client, this.client.increment, { key: this.counterKey, amount, requestId: "" });
  }

  async healthy(timeoutMs = 5000): Promise<boolean> {
    return new Promise((resolve) => {
      this.raw.makeUnaryRequest("/grpc.health.v1.Health/Check", pass, pass, Buffer.alloc(0), new grpc.Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) =>
        resolve(err === null && res !== undefined && SERVING.equals(res)),
      );
    });
  }

  async check(): Promise<ControlCheck> {
    const corruptions: string[] = [];
    const healthy = await this.healthy();
    try {
      const q = await call(this.client, this.client.query, { key: this.setKey, elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: true });
      const got = q.members.map((m) => m.text).sort();
      const want = [...this.elements].sort();
      if (q.size !== BigInt(want.length)) corruptions.push(`set size ${q.size}, expected ${want.length}`);
      if (got.join("\n") !== want.join("\n")) corruptions.push(`set members [${got.slice(0, 5).join(",")}...] (${got.length}), expected ${want.length}`);
    } catch (err) {
      corruptions.push(`set unreadable: ${(err as grpc.ServiceError).code} ${(err as Error).message}`);
    }
    try {
      const q = await call(this.client, this.client.query, { key: this.counterKey, elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false });
      if (q.counterValue !== this.expectedCounter) corruptions.push(`counter ${q.counterValue}, expected ${this.expectedCounter}`);
    } catch (err) {
      corruptions.push(`counter unreadable: ${(err as grpc.ServiceError).code} ${(err as Error).message}`);
    }
    return { healthy, corruptions };
  }

  close(): void {
    this.client.close();
    this.raw.close();
  }
}
