// Preloaded (--import) into a server of bench:http2-gc to force a full garbage collection every
// second (with --expose-gc), as a process whose old generation grows gets anyway.
const collect = (globalThis as { gc?: () => void }).gc;
if (collect === undefined) throw new Error("force-gc needs --expose-gc");
setInterval(collect, 1000).unref();
