// `deltaset chaos` (filled in with the fault harness).
export async function chaosCommand(_args: string[]): Promise<void> {
  throw new Error("chaos: not available yet");
}
