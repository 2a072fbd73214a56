// Errors the HTTP API reports, with the messages and status codes Toxiproxy 2.x uses, so a client
// that matches on them behaves the same against either server. The body is {"error": msg, "status": N}.

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
    this.name = "ApiError";
  }

  /** The same error with a detail appended, as Toxiproxy does ("missing required field: name"). */
  withDetail(detail: string): ApiError {
    return new ApiError(`${this.message}: ${detail}`, this.status);
  }

  toJSON(): { error: string; status: number } {
    return { error: this.message, status: this.status };
  }
}

export const ErrBadRequestBody = new ApiError("bad request body", 400);
export const ErrMissingField = new ApiError("missing required field", 400);
export const ErrProxyNotFound = new ApiError("proxy not found", 404);
export const ErrProxyAlreadyExists = new ApiError("proxy already exists", 409);
export const ErrInvalidStream = new ApiError("stream was invalid, can be either upstream or downstream", 400);
export const ErrInvalidToxicType = new ApiError("invalid toxic type", 400);
export const ErrToxicAlreadyExists = new ApiError("toxic already exists", 409);
export const ErrToxicNotFound = new ApiError("toxic not found", 404);

/** Any other failure (a listen error, say) is a 500 carrying the underlying message. */
export function internalError(message: string): ApiError {
  return new ApiError(message, 500);
}
