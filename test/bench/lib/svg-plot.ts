// Benchmarks use the SVG writer that chaos runs share (services/report).
export * from "../../../services/report/svg-plot.js";
