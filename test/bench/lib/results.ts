// Benchmarks use the result writer that chaos runs share (services/report).
export * from "../../../services/report/results.js";
