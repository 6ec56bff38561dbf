// Reads a multipart/form-data request body into the nested object of the
// bracket convention (form-fields.ts). Whatever is wrong with the bytes the
// client sent (no or a bad boundary, a body cut short, a part without a
// name, too many parts) is answered as the client's mistake: 400
// bad_request or 413 payload_too_large, never a 500. The service is only
// called once the whole body was read, so a request that fails here has
// stored nothing.
import type { Multipart } from "@fastify/multipart";
import { ConnectError } from "@connectrpc/connect";
import type { FastifyRequest } from "fastify";
import { appError, errorDetail, type Violations } from "../../kernel/errors.js";
import { fromFastify } from "../edge/fastify-errors.js";
import { FormBuilder } from "./form-fields.js";
import type { UploadedFile } from "./rest-json.js";

export interface MultipartLimits {
  /** Largest file part (4 MiB, docs/devices.md); a larger one is 422 on its field. */
  maxFileBytes: number;
  /** Largest request (all parts together): 413 beyond. */
  bodyLimitBytes: number;
}

// Explicit part counts besides the byte limits: a log batch of 100 items with
// a file each and about ten fields per item fits with room to spare; a body of
// hundreds of thousands of empty parts does not keep the parser busy.
export const MAX_FORM_FILES = 200;
export const MAX_FORM_FIELDS = 20_000;
export const MAX_FORM_PARTS = 20_000;

const BOUNDARY_RE = /;\s*boundary\s*=\s*(?:"([^"]*)"|([^";\s]*))/i;

export async function readMultipart(req: FastifyRequest, v: Violations, limits: MultipartLimits): Promise<Record<string, unknown>> {
  // A declared length over the limit is refused before anything is read
  // (Node then drops the unread body, as for other routes' bodies).
  if (Number(req.headers["content-length"] ?? 0) > limits.bodyLimitBytes) throw appError("payload_too_large");
  // Busboy takes an empty boundary and then reports a truncated body: say what is wrong.
  if (!BOUNDARY_RE.exec(String(req.headers["content-type"] ?? ""))?.slice(1).some(Boolean)) {
    throw appError("bad_request", "Malformed multipart body: the multipart/form-data content type has no boundary.");
  }
  const form = new FormBuilder(v);
  let total = 0;
  const parts = req.parts({
    limits: { fileSize: limits.maxFileBytes, files: MAX_FORM_FILES, fields: MAX_FORM_FIELDS, parts: MAX_FORM_PARTS },
  })[Symbol.asyncIterator]();
  try {
    for (;;) {
      const step: IteratorResult<Multipart> = await parts.next().catch(rethrowAsClientError);
      if (step.done) break;
      const part = step.value;
      // Busboy hands over a part whose Content-Disposition has no name with
      // an undefined field name; nothing can be done with its value.
      if (typeof part.fieldname !== "string" || part.fieldname === "") {
        throw appError("bad_request", "Malformed multipart body: a part has no field name.");
      }
      const path = part.fieldname.replace(/\[(\w*)\]/g, ".$1").replace(/\.$/, "");
      if (part.type === "file") {
        const data = await part.toBuffer().catch(rethrowAsClientError);
        total += data.length;
        if (part.file.truncated) {
          v.add(path, `The file must not be greater than ${Math.floor(limits.maxFileBytes / 1024)} kilobytes.`);
          continue;
        }
        const file: UploadedFile = { __file: true, filename: part.filename, contentType: part.mimetype, data };
        form.add(part.fieldname, file);
      } else {
        // A part declared application/json arrives parsed (@fastify/multipart).
        const value: unknown = part.value;
        total += part.fieldname.length + (typeof value === "string" ? value.length : JSON.stringify(value ?? null).length);
        if (part.valueTruncated) v.add(path, "The field value is too long.");
        else form.add(part.fieldname, value);
      }
      if (total > limits.bodyLimitBytes) throw appError("payload_too_large");
    }
    await restOfBody(req, limits.bodyLimitBytes - total);
  } catch (err) {
    discardRest(req, limits.bodyLimitBytes);
    throw err;
  }
  return form.build();
}

/**
 * Errors out of the multipart parser (busboy) and of the request stream are
 * about the bytes the client sent, never a fault of the server: map them to
 * the catalogue, keeping the original as cause.
 */
function rethrowAsClientError(err: unknown): never {
  if (err instanceof ConnectError) throw err;
  const code = (err as { code?: unknown }).code;
  const text = err instanceof Error ? err.message : String(err);
  // @fastify/multipart's own errors: the one translation of Fastify's errors
  // (one it does not know is the bytes' fault all the same, below).
  if (typeof code === "string" && code.startsWith("FST_")) {
    const known = fromFastify(err, { maxFiles: MAX_FORM_FILES, maxFields: MAX_FORM_FIELDS });
    if (errorDetail(known)) throw known;
  }
  if (/boundary not found/i.test(text)) {
    throw appError("bad_request", "Malformed multipart body: the multipart/form-data content type has no boundary.", { cause: err });
  }
  if (/unexpected end|terminated early/i.test(text)) {
    throw appError("bad_request", "Malformed multipart body: the body ends before the closing boundary.", { cause: err });
  }
  throw appError("bad_request", "Malformed multipart body.", { cause: err });
}

/**
 * The form is complete at the closing boundary, the request only once its
 * whole body arrived: reads and drops what may follow the closing boundary
 * (an epilogue), and refuses a request whose client went away before the end
 * of its body rather than process it unanswered. Over HTTP/2 a stream reset
 * by the client also ends its request stream (marked aborted), which busboy
 * takes for the end of a complete form.
 */
function restOfBody(req: FastifyRequest, limit: number): Promise<void> {
  const raw = req.raw;
  const cutShort = () => appError("bad_request", "Malformed multipart body: the request ended before the end of its body.");
  // (HTTP/2: a stream the client cancelled also ends its request stream, aborted)
  if (raw.readableEnded) return raw.aborted ? Promise.reject(cutShort()) : Promise.resolve();
  return new Promise((resolve, reject) => {
    let seen = 0;
    const done = (err?: unknown) => {
      raw.off("data", onData).off("end", onEnd).off("close", onClose).off("error", onClose);
      if (err) reject(err);
      else resolve();
    };
    const onData = (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > limit) done(appError("payload_too_large"));
    };
    const onEnd = () => done(raw.aborted ? cutShort() : undefined);
    const onClose = () => done(cutShort());
    raw.on("data", onData).once("end", onEnd).once("close", onClose).once("error", onClose);
    raw.resume();
  });
}

/**
 * After an error found before the whole body arrived, the rest is read and
 * dropped: the connection stays usable for the client's next request, and
 * the answer is not lost to a reset caused by closing a socket with unread
 * data. A body going on past the body limit gets its connection closed.
 */
function discardRest(req: FastifyRequest, limit: number): void {
  const raw = req.raw;
  if (raw.readableEnded || raw.destroyed) return;
  raw.unpipe();
  let seen = 0;
  raw.on("data", (chunk: Buffer) => {
    seen += chunk.length;
    if (seen > limit) raw.destroy();
  });
  raw.resume();
}
