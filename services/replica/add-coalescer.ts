// Unary Adds of one key that arrive while an earlier operation of that key runs or waits for its
// turn are made as one add when their turn comes: one lock turn, one header write, one delta for
// gossip, instead of one each. Nothing waits longer than it would have: a group forms only behind
// the key's lock (Store.addTaking takes the group's elements when its turn comes), and each caller
// is answered when the group is durable, with its own elements' dots and how many of them it made
// present. A group holds adds of one time to live, and at most maxElements elements (a caller
// that would pass it starts the next group).
import { type Dot, ObjectType } from "../crdt/index.js";
import type { Store } from "../store/store.js";

export interface AddAnswer {
  /** The dot of each element of the caller's add, in its order. */
  dots: Dot[];
  /** Its elements that were not present before (each counted once, and only for the first caller naming it). */
  added: number;
}

interface Member {
  elements: Uint8Array[];
  resolve: (a: AddAnswer) => void;
  reject: (e: unknown) => void;
}

interface Group {
  ttlMs: number | undefined;
  elements: number;
  members: Member[];
}

export class AddCoalescer {
  /** Per key, the group still open to joiners: its turn has not come yet. */
  private readonly open = new Map<string, Group>();
  /** Adds answered, and groups made (the difference is what joining spared). */
  adds = 0;
  groups = 0;

  constructor(
    private readonly store: Store,
    private readonly notify: (key: string, type: ObjectType, delta: unknown) => void,
    private readonly maxElements: number,
  ) {}

  add(key: string, elements: Uint8Array[], ttlMs: number | undefined): Promise<AddAnswer> {
    const waiting = this.open.get(key);
    if (waiting !== undefined && waiting.ttlMs === ttlMs && waiting.elements + elements.length <= this.maxElements) {
      waiting.elements += elements.length;
      return new Promise((resolve, reject) => waiting.members.push({ elements, resolve, reject }));
    }
    const group: Group = { ttlMs, elements: elements.length, members: [] };
    const answer = new Promise<AddAnswer>((resolve, reject) => group.members.push({ elements, resolve, reject }));
    this.open.set(key, group);
    void this.run(key, group);
    return answer;
  }

  private async run(key: string, group: Group): Promise<void> {
    const close = () => {
      if (this.open.get(key) === group) this.open.delete(key);
    };
    try {
      await this.store.commitTurn();
      const r = await this.store.addTaking(
        key,
        () => {
          close();
          const { members } = group;
          return members.length === 1 ? members[0]!.elements : members.flatMap((m) => m.elements);
        },
        group.ttlMs,
      );
      this.groups++;
      this.adds += group.members.length;
      this.notify(key, ObjectType.AWSET, r.delta);
      let at = 0;
      for (const m of group.members) {
        const end = at + m.elements.length;
        let added = 0;
        for (let i = at; i < end; i++) if (r.fresh[i]) added++;
        m.resolve({ dots: r.dots.slice(at, end), added });
        at = end;
      }
    } catch (err) {
      close();
      for (const m of group.members) m.reject(err);
    }
  }
}
