// A LinkClock whose time only moves when told to, with a scripted random source: toxic behaviour
// can then be checked exactly, with no real waiting.

import type { LinkClock } from "./stage.js";

interface PendingTimer {
  id: number;
  at: number;
  fire: () => void;
}

export class ManualClock implements LinkClock {
  private time = 0;
  private nextId = 1;
  private timers: PendingTimer[] = [];

  /** `randoms` are returned in order by random(), then `fallback` forever. */
  constructor(
    private readonly randoms: number[] = [],
    private readonly fallback = 0.5,
  ) {}

  now(): number {
    return this.time;
  }

  setTimer(ms: number, fire: () => void): unknown {
    const timer = { id: this.nextId++, at: this.time + Math.max(0, ms), fire };
    this.timers.push(timer);
    return timer.id;
  }

  clearTimer(handle: unknown): void {
    this.timers = this.timers.filter((t) => t.id !== handle);
  }

  random(): number {
    return this.randoms.length > 0 ? this.randoms.shift()! : this.fallback;
  }

  get pendingTimers(): number {
    return this.timers.length;
  }

  /** Moves time forward by `ms`, firing due timers in time order (ties in creation order). */
  advance(ms: number): void {
    const target = this.time + ms;
    for (;;) {
      let next: PendingTimer | undefined;
      for (const t of this.timers) {
        if (t.at <= target && (!next || t.at < next.at || (t.at === next.at && t.id < next.id))) next = t;
      }
      if (!next) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.time = Math.max(this.time, next.at);
      next.fire();
    }
    this.time = target;
  }
}
