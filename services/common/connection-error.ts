// The reason inside grpc-js's "No connection established. Last error: ... Resolution note: ..."
// details (the connect error a person can act on); the details as they are when none is named.
export function connectionFailureReason(details: string): string {
  return /Last error: (?:Error: )?(.*?)\.?(?: Resolution note:.*)?$/s.exec(details)?.[1] ?? details;
}
