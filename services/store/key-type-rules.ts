// Key types fixed by configuration (--key-types): a rule "PREFIX=TYPE" gives every key starting
// with PREFIX that type before any write creates it, on every node that has the rule. A key's type
// is otherwise fixed by its first write on some node; two writes creating a key at once as two
// types on two nodes leave it split (each node keeps its own, gossip skips the key: see the
// README), which rules shared by every node make impossible: the wrong creation is refused.
import { ObjectType, TYPE_BY_NAME } from "../crdt/index.js";

export interface KeyTypeRule {
  prefix: string;
  type: ObjectType;
  /** As written in the setting, for messages. */
  text: string;
}

/** A --key-types entry that does not parse. */
export class KeyTypeRuleSyntaxError extends Error {}

export class KeyTypeRules {
  /** Longest prefix first: the most specific rule wins. */
  private readonly rules: KeyTypeRule[];

  constructor(rules: readonly KeyTypeRule[] = []) {
    this.rules = [...rules].sort((a, b) => b.prefix.length - a.prefix.length);
  }

  /** Parse entries "PREFIX=TYPE" (TYPE as the CLI's --type names it, or counter). */
  static parse(entries: readonly string[]): KeyTypeRules {
    const rules: KeyTypeRule[] = [];
    for (const text of entries) {
      const at = text.lastIndexOf("=");
      if (at < 0) throw new KeyTypeRuleSyntaxError(`key type rule "${text}" is not PREFIX=TYPE`);
      const prefix = text.slice(0, at);
      const name = text.slice(at + 1).trim().toLowerCase();
      const type = TYPE_BY_NAME[name];
      if (type === undefined) throw new KeyTypeRuleSyntaxError(`key type rule "${text}": "${name}" is not one of ${Object.keys(TYPE_BY_NAME).join(", ")}`);
      const twin = rules.find((r) => r.prefix === prefix);
      if (twin !== undefined) throw new KeyTypeRuleSyntaxError(`key type rules "${twin.text}" and "${text}" name the same prefix`);
      rules.push({ prefix, type, text });
    }
    return new KeyTypeRules(rules);
  }

  /** The rule a key falls under (its longest matching prefix), if any. */
  ruleFor(key: string): KeyTypeRule | undefined {
    return this.rules.find((r) => key.startsWith(r.prefix));
  }
}
