// One direction of one proxied connection: source bytes go through a chain of stages (one per
// toxic of that direction, in the order the toxics were added) into a sink. Toxics can be added,
// changed and removed while data flows; removing a stage hands what it held to the next one, so no
// byte is lost or reordered by a change.

import { Stage, type Item, type LinkClock, type StageOutput } from "./stage.js";
import type { ToxicSpec } from "./toxic-spec.js";

export interface LinkSink {
  write(data: Buffer): void;
  /** The source's EOF, after all its data. */
  end(): void;
  /** A toxic closed the connection. */
  close(): void;
  /** A toxic reset the connection. */
  reset(): void;
}

export class Link implements StageOutput {
  private readonly stages: Stage[] = [];
  private finished = false;
  /** Bytes read from the source that are still inside the chain. */
  private held = 0;

  constructor(
    toxics: readonly ToxicSpec[],
    private readonly sink: LinkSink,
    private readonly clock: LinkClock,
    /** Called whenever bytes leave the chain, so the owner can resume a paused source. */
    private readonly onRelease: () => void = () => {},
  ) {
    for (const spec of toxics) this.stages.push(new Stage(spec, this, clock));
  }

  get bufferedBytes(): number {
    return this.held;
  }

  get isFinished(): boolean {
    return this.finished;
  }

  /** Names of the toxics in this link, in chain order, with whether this connection drew each. */
  describe(): Array<{ name: string; active: boolean }> {
    return this.stages.map((s) => ({ name: s.name, active: s.isActive }));
  }

  write(data: Buffer): void {
    if (this.finished || data.length === 0) return;
    this.held += data.length;
    this.enter(0, { kind: "data", data });
  }

  end(): void {
    this.enter(0, { kind: "end" });
  }

  addToxic(spec: ToxicSpec): void {
    if (this.finished) return;
    this.stages.push(new Stage(spec, this, this.clock));
  }

  updateToxic(spec: ToxicSpec): void {
    this.stages.find((s) => s.name === spec.name)?.reconfigure(spec);
  }

  removeToxic(name: string): void {
    const index = this.stages.findIndex((s) => s.name === name);
    if (index < 0) return;
    const stage = this.stages[index]!;
    const pending = stage.detach();
    this.stages.splice(index, 1);
    for (const item of pending) this.enter(index, item);
  }

  /** Stops every timer and forgets held data; the connection is gone. */
  dispose(): void {
    this.finished = true;
    for (const stage of this.stages) stage.dispose();
    this.held = 0;
  }

  emit(from: Stage, item: Item): void {
    const index = this.stages.indexOf(from);
    if (index < 0) return; // a detached stage
    this.enter(index + 1, item);
  }

  drop(bytes: number): void {
    if (this.finished) return;
    this.held -= bytes;
    this.onRelease();
  }

  private enter(index: number, item: Item): void {
    if (this.finished) return;
    const stage = this.stages[index];
    if (stage) {
      stage.push(item);
      return;
    }
    this.deliver(item);
  }

  private deliver(item: Item): void {
    switch (item.kind) {
      case "data":
        this.held -= item.data.length;
        this.sink.write(item.data);
        this.onRelease();
        return;
      case "end":
        this.dispose();
        this.sink.end();
        return;
      case "close":
        this.dispose();
        this.sink.close();
        return;
      case "reset":
        this.dispose();
        this.sink.reset();
        return;
    }
  }
}
