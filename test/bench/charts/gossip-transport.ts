// The chart of docs/results/gossip-transport.json (npm run bench:gossip-transport): CPU per second
// of the node taking the Adds and of the nodes receiving them by gossip, with an Exchange call per
// frame and with one ExchangeStream per neighbour, at each Add rate.
import { type ChartSpec, barChart } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

interface Run {
  transport: string;
  addsPerSecond: number;
  originCpuMsPerSecond: number;
  receiverCpuMsPerSecond: number;
}

export function gossipTransportChart(doc: ResultDoc): ChartSpec {
  const runs = (doc.metrics as { runs: Run[] }).runs;
  const rates = [...new Set(runs.map((r) => r.addsPerSecond))];
  const categories = rates.flatMap((rate) => [`origin, ${rate} Adds/s`, `receiver, ${rate} Adds/s`]);
  const values = (transport: string) =>
    rates.flatMap((rate) => {
      const r = runs.find((x) => x.transport === transport && x.addsPerSecond === rate);
      return [r?.originCpuMsPerSecond ?? null, r?.receiverCpuMsPerSecond ?? null];
    });
  return barChart({
    title: "Node CPU (ms per second), 3 nodes, every local change pushed: an Exchange call per frame vs one stream per neighbour",
    categories,
    series: [
      { name: "Exchange calls", values: values("calls") },
      { name: "ExchangeStream", values: values("stream") },
    ],
    yLabel: "CPU ms per second",
  });
}
