// A small History API router: the admin listener answers index.html for any
// path, so links are real URLs (back/forward, reload, bookmarks work).
import { createContext, useContext, useEffect, useState, type AnchorHTMLAttributes, type ReactNode } from "react";

export interface Location {
  path: string;
  query: URLSearchParams;
}

interface RouterValue {
  loc: Location;
  /** A new history entry (back returns here). */
  go(to: string): void;
  /** Replaces the current entry (a filter typed letter by letter, a default written into the URL). */
  replace(to: string): void;
}

const RouterContext = createContext<RouterValue>({ loc: { path: "/", query: new URLSearchParams() }, go: () => {}, replace: () => {} });

const read = (): Location => ({ path: window.location.pathname, query: new URLSearchParams(window.location.search) });

export function Router({ children }: { children: ReactNode }) {
  const [loc, setLoc] = useState(read);
  useEffect(() => {
    const on = () => setLoc(read());
    window.addEventListener("popstate", on);
    return () => window.removeEventListener("popstate", on);
  }, []);
  const go = (to: string) => {
    const same = to === window.location.pathname + window.location.search;
    if (!same) window.history.pushState(null, "", to);
    setLoc(read());
    // A new page starts at the top; a change of query (a tab, a selection) keeps the scroll.
    if (!same && new URL(to, window.location.href).pathname !== loc.path) window.scrollTo(0, 0);
  };
  const replace = (to: string) => {
    window.history.replaceState(null, "", to);
    setLoc(read());
  };
  return <RouterContext.Provider value={{ loc, go, replace }}>{children}</RouterContext.Provider>;
}

export function useRouter() {
  return useContext(RouterContext);
}

/** Matches "/functions/:id" against the path; the params or undefined. */
export function match(pattern: string, path: string): Record<string, string> | undefined {
  const p = pattern.split("/").filter(Boolean);
  const a = path.split("/").filter(Boolean);
  if (p.length !== a.length) return undefined;
  const out: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    if (p[i]!.startsWith(":")) out[p[i]!.slice(1)] = decodeURIComponent(a[i]!);
    else if (p[i] !== a[i]) return undefined;
  }
  return out;
}

export function Link({ to, children, ...rest }: { to: string; children: ReactNode } & AnchorHTMLAttributes<HTMLAnchorElement>) {
  const { go } = useRouter();
  return (
    <a
      href={to}
      {...rest}
      onClick={(e) => {
        if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
        e.preventDefault();
        go(to);
      }}
    >
      {children}
    </a>
  );
}

/** The URL for the current path with some query parameters set ("" or undefined removes one). */
export function withQuery(loc: Location, patch: Record<string, string | undefined>): string {
  const q = new URLSearchParams(loc.query);
  for (const [k, v] of Object.entries(patch)) {
    if (v === undefined || v === "") q.delete(k);
    else q.set(k, v);
  }
  const qs = q.toString();
  return qs ? `${loc.path}?${qs}` : loc.path;
}

/**
 * State kept in the URL's query (a tab, a selection, a filter): links and
 * reloads keep it, back and forward move through it. The default is not
 * written into the URL. `replace` for values that change as one types.
 */
export function useQueryState(key: string, fallback = ""): [string, (value: string | undefined, opts?: { replace?: boolean }) => void] {
  const { loc, go, replace } = useRouter();
  const value = loc.query.get(key) ?? fallback;
  const set = (v: string | undefined, opts?: { replace?: boolean }) => {
    const url = withQuery(loc, { [key]: v === fallback ? undefined : v });
    (opts?.replace ? replace : go)(url);
  };
  return [value, set];
}

/** Several query parameters at once (a selection that resets another). */
export function useSetQuery(): (patch: Record<string, string | undefined>, opts?: { replace?: boolean }) => void {
  const { loc, go, replace } = useRouter();
  return (patch, opts) => (opts?.replace ? replace : go)(withQuery(loc, patch));
}
