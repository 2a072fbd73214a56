// One toxic applied to one direction of one connection. A stage holds a queue of items in arrival
// order and releases them to the next stage when its toxic allows; it never reorders. Time, timers
// and randomness come from a LinkClock, so the behaviour can be driven by a manual clock in tests.
//
// Every decision about the item at the head of the queue is memoised (its release time, the pacing
// of the next slice), so `pump` can be re-run at any moment (new input, a timer, a changed toxic)
// and will only act on what is due.

import type { ToxicSpec } from "./toxic-spec.js";

export type Item =
  | { readonly kind: "data"; readonly data: Buffer }
  /** The source sent EOF: pass it on after the data before it. */
  | { readonly kind: "end" }
  /** A toxic closes the connection (timeout expired, data limit reached). */
  | { readonly kind: "close" }
  /** A toxic resets the connection (reset_peer). */
  | { readonly kind: "reset" };

export interface LinkClock {
  /** Milliseconds on a monotonic clock. */
  now(): number;
  setTimer(ms: number, fire: () => void): unknown;
  clearTimer(handle: unknown): void;
  /** Uniform in [0, 1). */
  random(): number;
}

export interface StageOutput {
  emit(from: Stage, item: Item): void;
  /** `bytes` of data were discarded by a toxic (timeout, limit_data, reset_peer). */
  drop(bytes: number): void;
}

interface Queued {
  item: Item;
  /** When the item entered this stage. */
  readonly at: number;
}

/** `idle`: nothing to do until new input; a number: call again after that many ms (0 = now). */
type Step = "idle" | number;

const BANDWIDTH_PIECE_MS = 100;

export class Stage {
  private readonly queue: Queued[] = [];
  private timer: unknown = undefined;
  private stopped = false;
  private pumping = false;
  /** Whether this connection drew the toxic (toxicity is a per-connection probability). */
  private active = false;
  /** The stage sent close or reset: it swallows everything after. */
  private finished = false;

  // Plans, forgotten when the toxic changes.
  private headDue: number | undefined;
  private nextSliceAt: number | undefined;
  private deadline: number | undefined;

  // Per-connection state that outlives changes to the toxic.
  private lineFreeAt = 0;
  private sentBytes = 0;
  private resetAt: number | undefined;

  constructor(
    private spec: ToxicSpec,
    private readonly out: StageOutput,
    private readonly clock: LinkClock,
  ) {
    this.begin();
  }

  get name(): string {
    return this.spec.name;
  }

  get isActive(): boolean {
    return this.active;
  }

  push(item: Item): void {
    if (this.stopped) return;
    this.queue.push({ item, at: this.clock.now() });
    this.wake();
  }

  /** The toxic's attributes or toxicity changed: draw toxicity again and re-plan the head item. */
  reconfigure(spec: ToxicSpec): void {
    if (this.stopped) return;
    this.spec = spec;
    this.begin();
  }

  /**
   * Takes the stage out of the chain. Returns what it still held, in order, for the next stage.
   * A timeout toxic closes the connection when removed and a reset already under way completes,
   * as in Toxiproxy.
   */
  detach(): Item[] {
    this.cancelTimer();
    this.stopped = true;
    const pending = this.queue.splice(0).map((q) => q.item);
    if (!this.active || this.finished) return pending;
    if (this.spec.type === "timeout") return [{ kind: "close" }];
    if (this.spec.type === "reset_peer" && this.resetAt !== undefined) return [{ kind: "reset" }];
    return pending;
  }

  /** Stops timers; the connection is going away. */
  dispose(): void {
    this.cancelTimer();
    this.stopped = true;
    this.queue.length = 0;
  }

  private begin(): void {
    this.cancelTimer();
    this.active = this.clock.random() < this.spec.toxicity;
    this.headDue = undefined;
    this.nextSliceAt = undefined;
    this.deadline = undefined;
    const timeout = this.spec.attributes.timeout ?? 0;
    if (this.active && this.spec.type === "timeout" && timeout > 0) {
      this.deadline = this.clock.now() + timeout;
    }
    this.wake();
  }

  private wake(): void {
    this.cancelTimer();
    this.pump();
  }

  private cancelTimer(): void {
    if (this.timer !== undefined) {
      this.clock.clearTimer(this.timer);
      this.timer = undefined;
    }
  }

  private pump(): void {
    if (this.pumping) return; // an emit led back here; the running loop continues
    this.pumping = true;
    try {
      while (!this.stopped && this.timer === undefined) {
        const step = this.step();
        if (step === "idle") break;
        if (step > 0) {
          this.timer = this.clock.setTimer(step, () => {
            this.timer = undefined;
            this.pump();
          });
        }
      }
    } finally {
      this.pumping = false;
    }
  }

  private forwardHead(): void {
    const head = this.queue.shift();
    this.headDue = undefined;
    if (head) this.out.emit(this, head.item);
  }

  private dropHead(): void {
    const head = this.queue.shift();
    this.headDue = undefined;
    if (head && head.item.kind === "data") this.out.drop(head.item.data.length);
  }

  private step(): Step {
    if (this.finished) {
      while (this.queue.length > 0) this.dropHead();
      return "idle";
    }
    if (!this.active) return this.passThrough();
    switch (this.spec.type) {
      case "latency":
        return this.latency();
      case "bandwidth":
        return this.bandwidth();
      case "slicer":
        return this.slicer();
      case "slow_close":
        return this.slowClose();
      case "timeout":
        return this.timeout();
      case "reset_peer":
        return this.resetPeer();
      case "limit_data":
        return this.limitData();
      case "noop":
        return this.passThrough();
    }
  }

  private attr(key: string): number {
    return this.spec.attributes[key] ?? 0;
  }

  private passThrough(): Step {
    if (this.queue.length === 0) return "idle";
    this.forwardHead();
    return 0;
  }

  /** Each chunk leaves latency ± jitter after it arrived, and never before the chunk ahead of it. */
  private latency(): Step {
    const head = this.queue[0];
    if (!head) return "idle";
    if (head.item.kind !== "data") return this.passThrough();
    if (this.headDue === undefined) {
      const jitter = this.attr("jitter");
      const offset = jitter > 0 ? Math.floor(this.clock.random() * 2 * jitter) - jitter : 0;
      this.headDue = head.at + Math.max(0, this.attr("latency") + offset);
    }
    const wait = this.headDue - this.clock.now();
    if (wait > 0) return wait;
    this.forwardHead();
    return 0;
  }

  /**
   * `rate` KB/s (1 KB = 1000 bytes, i.e. `rate` bytes per ms). Data leaves in pieces of at most
   * 100 ms worth, each once the line would have carried it.
   */
  private bandwidth(): Step {
    const head = this.queue[0];
    if (!head) return "idle";
    const rate = this.attr("rate");
    if (head.item.kind !== "data" || rate <= 0) return this.passThrough();
    const data = head.item.data;
    const pieceLength = Math.min(data.length, rate * BANDWIDTH_PIECE_MS);
    if (this.headDue === undefined) {
      this.headDue = Math.max(this.clock.now(), this.lineFreeAt) + pieceLength / rate;
    }
    const wait = this.headDue - this.clock.now();
    if (wait > 0) return wait;
    this.lineFreeAt = this.headDue;
    this.releasePiece(head, pieceLength);
    return 0;
  }

  /** Sends the first `length` bytes of the head item on and keeps the rest at the head. */
  private releasePiece(head: Queued, length: number): void {
    if (head.item.kind !== "data") return;
    const data = head.item.data;
    if (length >= data.length) {
      this.forwardHead();
      return;
    }
    head.item = { kind: "data", data: data.subarray(length) };
    this.headDue = undefined;
    this.out.emit(this, { kind: "data", data: data.subarray(0, length) });
  }

  /** Pieces of average_size ± size_variation bytes, `delay` µs apart. */
  private slicer(): Step {
    const head = this.queue[0];
    if (!head) return "idle";
    const average = this.attr("average_size");
    if (head.item.kind !== "data" || average <= 0) return this.passThrough();
    if (this.nextSliceAt !== undefined) {
      const wait = this.nextSliceAt - this.clock.now();
      if (wait > 0) return wait;
      this.nextSliceAt = undefined;
    }
    const variation = Math.max(0, this.attr("size_variation"));
    const offset = variation > 0 ? Math.floor(this.clock.random() * (2 * variation + 1)) - variation : 0;
    const size = Math.max(1, average + offset);
    this.releasePiece(head, size);
    const delayMs = this.attr("delay") / 1000;
    if (delayMs > 0) this.nextSliceAt = this.clock.now() + delayMs;
    return 0;
  }

  /** Data passes; the close (EOF or a toxic's close) waits `delay` ms. */
  private slowClose(): Step {
    const head = this.queue[0];
    if (!head) return "idle";
    if (head.item.kind === "data" || head.item.kind === "reset") return this.passThrough();
    this.headDue ??= head.at + this.attr("delay");
    const wait = this.headDue - this.clock.now();
    if (wait > 0) return wait;
    this.forwardHead();
    return 0;
  }

  /** Drops all data; closes the connection `timeout` ms after it took effect (0: never). */
  private timeout(): Step {
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      if (head.item.kind === "data") {
        this.dropHead();
        continue;
      }
      this.finished = true;
      this.forwardHead();
      return "idle";
    }
    if (this.deadline === undefined) return "idle";
    const wait = this.deadline - this.clock.now();
    if (wait > 0) return wait;
    this.finished = true;
    this.out.emit(this, { kind: "close" });
    return "idle";
  }

  /** The first input (data or EOF) arms a reset `timeout` ms later; nothing gets through meanwhile. */
  private resetPeer(): Step {
    const head = this.queue[0];
    if (this.resetAt === undefined) {
      if (!head) return "idle";
      if (head.item.kind === "close" || head.item.kind === "reset") return this.passThrough();
      this.resetAt = head.at + this.attr("timeout");
    }
    while (this.queue.length > 0) this.dropHead();
    const wait = this.resetAt - this.clock.now();
    if (wait > 0) return wait;
    this.finished = true;
    this.out.emit(this, { kind: "reset" });
    return "idle";
  }

  /** Lets `bytes` bytes through in total on this connection, then closes it. */
  private limitData(): Step {
    const head = this.queue[0];
    if (!head) return "idle";
    if (head.item.kind !== "data") return this.passThrough();
    const remaining = Math.max(0, this.attr("bytes") - this.sentBytes);
    const data = head.item.data;
    if (data.length <= remaining) {
      this.sentBytes += data.length;
      this.forwardHead();
    } else {
      this.queue.shift();
      this.headDue = undefined;
      if (remaining > 0) this.out.emit(this, { kind: "data", data: data.subarray(0, remaining) });
      this.out.drop(data.length - remaining);
      this.sentBytes += remaining;
    }
    if (this.attr("bytes") - this.sentBytes <= 0) {
      this.finished = true;
      this.out.emit(this, { kind: "close" });
      return "idle";
    }
    return 0;
  }
}
