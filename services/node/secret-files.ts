// Files that hold secrets (client tokens, cluster keys, the TLS private key) should not be
// readable by every user of the host. A node warns about such a file at start and after each
// reload instead of refusing it: Kubernetes mounts Secrets group-readable (defaultMode 0440 with
// fsGroup), which is fine, and a refusal at a reload would leave the old credentials in place.
import { statSync } from "node:fs";

export interface OpenSecret {
  what: string;
  path: string;
  /** Permission bits, octal (e.g. "644"). */
  mode: string;
}

/** The files among `files` that every user may read (o+r); files that cannot be read are skipped. */
export function worldReadable(files: ReadonlyArray<{ what: string; path: string | undefined }>): OpenSecret[] {
  const open: OpenSecret[] = [];
  for (const f of files) {
    if (f.path === undefined || f.path === "") continue;
    try {
      const mode = statSync(f.path).mode & 0o777; // follows symlinks (Kubernetes' ..data links)
      if ((mode & 0o004) !== 0) open.push({ what: f.what, path: f.path, mode: mode.toString(8) });
    } catch {
      // unreadable: loading it reports that
    }
  }
  return open;
}
