// The boot id each peer last named (GossipFrame, StateChunk, GossipReply, StateReply). A peer whose
// boot id changed restarted, possibly without what it had acknowledged (a wiped data directory,
// writes not yet synced), so its acks must be reset: the engine asks here (noticeBoot).
export class PeerBoots {
  private readonly seen = new Map<string, bigint>();

  /** Record a boot id; true when the peer named another one before (it restarted). 0 means unknown. */
  restarted(peer: string, boot: bigint): boolean {
    if (boot === 0n) return false;
    const known = this.seen.get(peer);
    this.seen.set(peer, boot);
    return known !== undefined && known !== boot;
  }

  /** Forget every peer not in keep. */
  forgetExcept(keep: ReadonlySet<string>): void {
    for (const id of this.seen.keys()) if (!keep.has(id)) this.seen.delete(id);
  }

  ids(): IterableIterator<string> {
    return this.seen.keys();
  }
}
