// What an interceptor returns for a call it has nothing to do with: the next layer, as it is.
// grpc-js only chains what interceptors return, and every extra layer costs each message, header
// and status of the call a hop.
import type * as grpc from "@grpc/grpc-js";

export function passThrough(call: grpc.ServerInterceptingCallInterface): grpc.ServerInterceptingCall {
  return call as grpc.ServerInterceptingCall;
}
