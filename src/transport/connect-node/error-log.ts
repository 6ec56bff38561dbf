// Logs the server-side failures of Connect/gRPC calls. The Connect plugin
// turns a thrown error into the protocol's error response and logs nothing,
// so an internal error (a driver failure, a bug) would leave no trace. Client
// errors (4xx-class codes) are the access log's business, not an error line.
import type { Interceptor, StreamRequest, UnaryRequest } from "@connectrpc/connect";
import type { Logger } from "pino";
import { isServerFault, restStatusOf, toAppError } from "../../kernel/errors.js";
import { kRequestId } from "../../kernel/principal.js";

export function errorLogInterceptor(logger: Logger): Interceptor {
  const failed = (req: UnaryRequest | StreamRequest, err: unknown): never => {
    const e = toAppError(err);
    const status = restStatusOf(e);
    if (isServerFault(e, status)) {
      // The original error (not its translation) heads the line: its cause chain reaches the driver.
      logger.error({ err, reqId: req.contextValues.get(kRequestId), procedure: `${req.service.typeName}/${req.method.name}`, status }, "rpc failed");
    }
    throw err;
  };
  // No async frame on the success path: the handler's own promise with a
  // rejection handler chained (a streaming response is passed through as
  // before: its messages are not touched).
  return (next) => (req) => {
    try {
      return next(req).catch((err: unknown) => failed(req, err));
    } catch (err) {
      // An inner interceptor that throws instead of rejecting.
      return Promise.reject(err).catch((e: unknown) => failed(req, e));
    }
  };
}
