// Whether a peer channel can take a call now: used where a call must not be sent to an owner that
// may fail it half-way (a failover after a call was sent could apply it twice).
import * as grpc from "@grpc/grpc-js";

/** Whether the channel is (or becomes) READY before until (ms since the epoch); a failed connection answers false at once. */
export async function channelReady(channel: ReturnType<grpc.Client["getChannel"]>, until: number): Promise<boolean> {
  for (;;) {
    const s = channel.getConnectivityState(true);
    if (s === grpc.connectivityState.READY) return true;
    if (s === grpc.connectivityState.TRANSIENT_FAILURE || s === grpc.connectivityState.SHUTDOWN || Date.now() >= until) return false;
    const moved = await new Promise<boolean>((resolve) => channel.watchConnectivityState(s, until, (err) => resolve(err === undefined)));
    if (!moved) return false;
  }
}
