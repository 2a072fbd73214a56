// The bearer token of a client command, from (in order of preference) --token-file,
// $DELTASET_TOKEN_FILE, $DELTASET_TOKEN, then --token, which other users of the machine can read
// in the process list and so earns a warning. A token is never printed: a bad one (a line break,
// a character a header cannot carry) is reported by where it came from.

export class TokenError extends Error {}

export interface TokenSources {
  flag?: string;
  file?: string;
  env: NodeJS.ProcessEnv;
  readFile: (path: string) => string;
  warn: (line: string) => void;
}

/** Visible ASCII without spaces: what an HTTP/2 header value carries and a token is made of. */
const TOKEN = /^[\x21-\x7e]{1,4096}$/;

export function resolveToken(s: TokenSources): string | undefined {
  const file = nonEmpty(s.file) ?? nonEmpty(s.env.DELTASET_TOKEN_FILE);
  const envToken = nonEmpty(s.env.DELTASET_TOKEN);
  const flag = nonEmpty(s.flag);
  if (flag !== undefined) {
    s.warn(
      file !== undefined || envToken !== undefined
        ? "deltaset: --token ignored: using --token-file / $DELTASET_TOKEN_FILE / $DELTASET_TOKEN instead"
        : "deltaset: warning: --token is visible to other users of this machine (ps); prefer --token-file or $DELTASET_TOKEN",
    );
  }
  if (file !== undefined) {
    const flagName = nonEmpty(s.file) !== undefined ? "--token-file" : "$DELTASET_TOKEN_FILE";
    let text: string;
    try {
      text = s.readFile(file);
    } catch (err) {
      throw new TokenError(`${flagName} ${file}: ${(err as NodeJS.ErrnoException).code ?? "cannot be read"}`);
    }
    // The first line that is not empty or a comment.
    const line = text.split(/\r?\n/).map((l) => l.trim()).find((l) => l !== "" && !l.startsWith("#"));
    if (line === undefined) throw new TokenError(`${flagName} ${file} holds no token`);
    return checked(line, `the token in ${file}`);
  }
  if (envToken !== undefined) return checked(envToken, "$DELTASET_TOKEN");
  if (flag !== undefined) return checked(flag, "--token");
  return undefined;
}

function checked(token: string, source: string): string {
  if (!TOKEN.test(token)) {
    throw new TokenError(
      `${source} is not a usable token (${token.length} characters, including a line break, space or other character ` +
        `a request header cannot carry; it is not shown): check ${source}`,
    );
  }
  return token;
}

const nonEmpty = (v: string | undefined) => (v === undefined || v === "" ? undefined : v);
