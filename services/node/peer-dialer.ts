// How a node dials its peers: directly, or through a per-link fault proxy (chaos runs).
export interface PeerDialer {
  dial(nodeId: string, address: string): Promise<string> | string;
}
