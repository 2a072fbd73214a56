// The LinkClock of a running server: the monotonic clock, Node timers, and a random source.

import { performance } from "node:perf_hooks";

import type { LinkClock } from "./stage.js";

export function systemClock(random: () => number = Math.random): LinkClock {
  return {
    now: () => performance.now(),
    setTimer: (ms, fire) => setTimeout(fire, Math.max(0, ms)),
    clearTimer: (handle) => clearTimeout(handle as NodeJS.Timeout),
    random,
  };
}
