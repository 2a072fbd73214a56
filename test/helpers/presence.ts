// Whether a node reads one element of a key as present (a Query of that element at that address).
import { call, replicaClient } from "../../services/client/rpc.ts";

export async function present(address: string, key: string, element: string): Promise<boolean> {
  const c = replicaClient(address);
  try {
    const q = await call(c, c.query, { key, elements: [Buffer.from(element)], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false });
    return q.presence[0]!.present;
  } finally {
    c.close();
  }
}
