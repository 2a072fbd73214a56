// A plain node:http2 server for bench:http2-gc: no gRPC library, no deltaset code. Each POST's
// data is kept until it ends (KEEP_DATA=0: read and dropped), then it is answered 5 ms later the
// way a unary gRPC call is (headers, a 12-byte body, trailers). Prints "listening HOST:PORT".
// usage: node test/bench/http2-plain-server.ts HOST   (through bin/register-ts.mjs)
import { createServer } from "node:http2";
import type { AddressInfo } from "node:net";

const host = process.argv[2] ?? "127.0.0.1";
const server = createServer();
const keepData = process.env.KEEP_DATA !== "0";
server.on("stream", (stream) => {
  const chunks: Buffer[] = [];
  stream.on("data", (d: Buffer) => keepData && chunks.push(d));
  stream.on("end", () =>
    setTimeout(() => {
      if (stream.destroyed) return;
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(Buffer.alloc(12));
    }, 5),
  );
});
server.listen(0, host, () => process.stdout.write(`listening ${host}:${(server.address() as AddressInfo).port}\n`));
process.on("SIGTERM", () => process.exit(0));
