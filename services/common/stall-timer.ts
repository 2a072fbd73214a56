// A watchdog for long transfers: fires once when the transfer has not moved for a whole period,
// however long it has run. Moving costs a clock read, not a timer per step.

export class StallTimer {
  private last: number;
  private timer: NodeJS.Timeout | undefined;

  /**
   * @param ms how long the transfer may stand still
   * @param onStall called once, when it stood still that long
   * @param now the clock (ms)
   */
  constructor(
    private readonly ms: number,
    private readonly onStall: () => void,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.last = now();
    this.arm(ms);
  }

  /** The transfer moved: the period starts again. */
  moved(): void {
    this.last = this.now();
  }

  /** The transfer ended (or failed): never fire. */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(delay: number): void {
    this.timer = setTimeout(() => {
      const still = this.now() - this.last;
      if (still >= this.ms) {
        this.timer = undefined;
        this.onStall();
      } else this.arm(this.ms - still);
    }, delay);
    this.timer.unref?.();
  }
}
