// A small History API router: the admin listener answers index.html for any
// path, so links are real URLs (back/forward, reload, bookmarks work).
import { createContext, useContext, useEffect, useState, type AnchorHTMLAttributes, type ReactNode } from "react";

interface Location {
  path: string;
  query: URLSearchParams;
}

const RouterContext = createContext<{ loc: Location; go(to: string): void }>({ loc: { path: "/", query: new URLSearchParams() }, go: () => {} });

const read = (): Location => ({ path: window.location.pathname, query: new URLSearchParams(window.location.search) });

export function Router({ children }: { children: ReactNode }) {
  const [loc, setLoc] = useState(read);
  useEffect(() => {
    const on = () => setLoc(read());
    window.addEventListener("popstate", on);
    return () => window.removeEventListener("popstate", on);
  }, []);
  const go = (to: string) => {
    window.history.pushState(null, "", to);
    setLoc(read());
    window.scrollTo(0, 0);
  };
  return <RouterContext.Provider value={{ loc, go }}>{children}</RouterContext.Provider>;
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
