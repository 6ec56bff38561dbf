// The console's session cookie: parsed from the Cookie header, written with
// HttpOnly (no script reads it), Secure (browsers still accept it on
// http://localhost and 127.0.0.1, which count as secure origins) and
// SameSite=Strict (no cross-site request carries it).
//
// Cookies do not separate ports, so a page on the public listener (a
// tenant's function) shares the console's cookie jar when both use one host
// name (issue #28, "cookie tossing"). The name carries the `__Host-` prefix:
// browsers then take it only with Secure, Path=/ and no Domain, so nobody can
// plant a copy with a longer Path (sent first) or for a parent domain. A
// request carrying more than one session cookie (the name twice, or the old
// `pb_session` beside it) is refused rather than one of them picked.
export const SESSION_COOKIE = "__Host-pb_session";
/** The name before the prefix: never read as a session, cleared when seen. */
export const LEGACY_SESSION_COOKIE = "pb_session";

export function cookieValue(header: string | null | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

export type SessionCookies =
  | { kind: "none"; legacy: boolean }
  | { kind: "one"; secret: string; legacy: false }
  | { kind: "conflict"; legacy: boolean };

/** The session cookie of a request: none, exactly one, or a conflict (two or more, legacy name included). */
export function sessionCookies(header: string | null | undefined): SessionCookies {
  let secret: string | undefined;
  let count = 0;
  let legacy = false;
  for (const part of (header ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    if (name === SESSION_COOKIE) {
      count++;
      secret = part.slice(eq + 1).trim();
    } else if (name === LEGACY_SESSION_COOKIE) {
      count++;
      legacy = true;
    }
  }
  if (count > 1) return { kind: "conflict", legacy };
  if (secret !== undefined) return { kind: "one", secret, legacy: false };
  return { kind: "none", legacy };
}

export const SESSION_CONFLICT_MESSAGE =
  "This request carried more than one console session cookie (another site on this host name may have set one), so none was used. Sign in again; if this keeps happening, clear this site's cookies.";

export function sessionCookie(value: string, maxAgeSeconds: number): string {
  return `${SESSION_COOKIE}=${value}; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=${maxAgeSeconds}`;
}

export function clearedSessionCookie(): string {
  return `${SESSION_COOKIE}=; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=0`;
}

/**
 * Set-Cookie values removing every session cookie this request could carry:
 * ours (Path=/) and the legacy name at each Path the request's path falls
 * under (a browser deletes a cookie only for the same name and Path, and a
 * planted one may have any prefix of the path).
 */
export function clearingCookies(requestPath: string): string[] {
  const out = [clearedSessionCookie()];
  const path = (requestPath.split("?")[0] ?? "/").slice(0, 512);
  const paths = new Set(["/"]);
  for (let i = 1; i < path.length; i++) {
    if (path[i] === "/") {
      paths.add(path.slice(0, i));
      paths.add(path.slice(0, i + 1));
    }
  }
  paths.add(path);
  // A bound on the answer's size: deep paths are not the console's.
  for (const p of [...paths].filter((x) => !/[;,\s]/.test(x)).slice(0, 16)) out.push(`${LEGACY_SESSION_COOKIE}=; Path=${p}; Secure; SameSite=Strict; Max-Age=0`);
  return out;
}
