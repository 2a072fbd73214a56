// `deltaset cluster` (filled in with the gossip layer).
export async function clusterCommand(_args: string[]): Promise<void> {
  throw new Error("cluster: not available yet");
}
