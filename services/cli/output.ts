// Human and JSON output for CLI commands.
export interface Output {
  json: boolean;
  /** Print a result: JSON object in --json mode, else the human text. */
  result(obj: unknown, human: string): void;
  /** Progress line on stderr (human mode on a terminal only). */
  progress(text: string): void;
  done(): void;
}

export function createOutput(json: boolean): Output {
  const tty = process.stderr.isTTY === true;
  let dirty = false;
  return {
    json,
    result(obj, human) {
      process.stdout.write((json ? JSON.stringify(obj, replacer) : human) + "\n");
    },
    progress(text) {
      if (json || !tty) return;
      process.stderr.write(`\r\x1b[2K${text}`);
      dirty = true;
    },
    done() {
      if (dirty) process.stderr.write("\r\x1b[2K");
      dirty = false;
    },
  };
}

function replacer(_k: string, v: unknown): unknown {
  if (typeof v === "bigint") return v.toString();
  return v;
}

/** A text bar: [#####.....] 50% */
export function bar(done: number, total: number, width = 30): string {
  const f = total <= 0 ? 1 : Math.min(1, done / total);
  const n = Math.round(f * width);
  return `[${"#".repeat(n)}${".".repeat(width - n)}] ${(f * 100).toFixed(0).padStart(3)}%`;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * How a command shows elements: with --hex, as hex always (the exact bytes, for scripts), else as
 * showElement does (the text "0x00ff" and the bytes 00 ff then look alike).
 */
export function elementShower(hex: boolean): (b: Uint8Array) => string {
  return hex ? (b) => Buffer.from(b).toString("hex") : showElement;
}

/** An element for people: its text when it is printable UTF-8, else 0x-hex. */
export function showElement(b: Uint8Array): string {
  try {
    const t = utf8.decode(b);
    if (/^[\P{C}]*$/u.test(t)) return t;
  } catch {
    // not UTF-8
  }
  return "0x" + Buffer.from(b).toString("hex");
}

/**
 * A probability as a percentage for people: three significant digits, and "below 0.0001%" under
 * that (a filter holding a few elements estimates rates like 1e-47, which read as noise).
 */
export function percent(rate: number): string {
  if (rate === 0) return "0%";
  if (rate < 1e-6) return "below 0.0001%";
  return `${Number((rate * 100).toPrecision(3))}%`;
}
