// The node's data directory is private to the user it runs as: created with mode 0700, and the
// process creates its files with umask 077 (LevelDB's tables, logs and manifest become 0600), so
// other local users cannot read the replicated data. A directory that already exists with looser
// permissions is left as it is (a mounted volume may need them) and reported.
import { existsSync, mkdirSync, statSync } from "node:fs";
import type { Logger } from "../common/logger.js";
import { StoreOpenError } from "../store/store.js";

export function prepareDataDir(dir: string, log: Logger): void {
  process.umask(0o077);
  if (existsSync(dir) && !statSync(dir).isDirectory()) throw new StoreOpenError(`data directory ${dir} is a file, not a directory; point --data-dir at a directory`);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const mode = statSync(dir).mode & 0o777;
  if ((mode & 0o077) !== 0) {
    log.warn("the data directory is accessible to other users; restrict it with chmod 700 unless a volume needs otherwise", {
      dir,
      mode: `0${mode.toString(8)}`,
    });
  }
}
