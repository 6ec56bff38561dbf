// The signed-in layout: navigation, the current application (kept in the
// URL as ?app=ID so links and reloads keep it), the user menu.
import { createContext, useContext, useEffect, useState, type ReactNode } from "react";
import type { App } from "../../../gen/pulsebase/admin/v1/identity_pb.js";
import { Role } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { api } from "./api";
import { Link, useRouter } from "./router";
import { useSession } from "./session";
import { ErrorBox, Loading, useAsync } from "./ui";

interface AppsContext {
  apps: App[];
  loading?: boolean;
  app?: App;
  select(id: bigint): void;
  reload(): void;
}

const Ctx = createContext<AppsContext>({ apps: [], select: () => {}, reload: () => {} });

export function useApps(): AppsContext {
  return useContext(Ctx);
}

/** A link that keeps the selected application. */
export function AppLink({ to, children, ...rest }: { to: string; children: ReactNode; className?: string; "aria-current"?: "page" | undefined }) {
  const { app } = useApps();
  const sep = to.includes("?") ? "&" : "?";
  return (
    <Link to={app ? `${to}${sep}app=${app.id}` : to} {...rest}>
      {children}
    </Link>
  );
}

const APP_PAGES = ["/apps", "/analytics", "/database", "/functions", "/cms"];
const KEEP_ON_APP_CHANGE = new Set(["app", "tab", "from", "to", "type"]);

export type Theme = "system" | "light" | "dark";
const THEME_KEY = "pulsebase.theme";

/** The remembered choice (this browser); "system" follows prefers-color-scheme. */
export function storedTheme(): Theme {
  try {
    const t = window.localStorage.getItem(THEME_KEY);
    return t === "light" || t === "dark" ? t : "system";
  } catch {
    return "system";
  }
}

/** data-theme on <html> picks the palette (styles.css); none follows the system. */
export function applyTheme(t: Theme): void {
  if (t === "system") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = t;
}

function ThemeSwitch() {
  const [theme, setTheme] = useState<Theme>(storedTheme);
  const choose = (t: Theme) => {
    setTheme(t);
    applyTheme(t);
    try {
      if (t === "system") window.localStorage.removeItem(THEME_KEY);
      else window.localStorage.setItem(THEME_KEY, t);
    } catch {
      /* storage refused: the choice lasts this page */
    }
  };
  return (
    <label className="theme-switch">
      <span className="visually-hidden">Theme</span>
      <select aria-label="Theme" value={theme} onChange={(e) => choose(e.target.value as Theme)}>
        <option value="system">Theme: system</option>
        <option value="light">Theme: light</option>
        <option value="dark">Theme: dark</option>
      </select>
    </label>
  );
}

const NAV: [string, string][] = [
  ["/", "Home"],
  ["/apps", "Apps"],
  ["/analytics", "Analytics"],
  ["/database", "Database"],
  ["/functions", "Functions"],
  ["/cms", "CMS"],
  ["/channels", "Channels"],
  ["/team", "Team"],
];

export function Shell({ children }: { children: ReactNode }) {
  const session = useSession();
  const { loc, go, replace } = useRouter();
  const apps = useAsync(async () => {
    const lists = await Promise.all(session.me.teams.map((t) => api.identity.listApps({ teamId: t.teamId, pageSize: 500 })));
    return lists.flatMap((l) => l.apps);
  }, [session.me.teams.map((t) => t.teamId).join(",")]);
  const wanted = loc.query.get("app");
  const list = apps.data ?? [];
  const app = list.find((a) => String(a.id) === wanted) ?? list[0];
  useEffect(() => {
    // Pages that work on one application keep it in the URL (Home and Team span every one).
    if (app && wanted !== String(app.id) && APP_PAGES.some((p) => loc.path === p || loc.path.startsWith(p + "/"))) {
      const q = new URLSearchParams(loc.query);
      q.set("app", String(app.id));
      // Through the router, so the pages' query state sees the application too.
      replace(`${loc.path}?${q}`);
    }
  }, [app?.id, wanted, loc.path]);
  const select = (id: bigint) => {
    const q = new URLSearchParams(loc.query);
    q.set("app", String(id));
    // Deep pages name another app's resources: go to the section's root.
    const section = "/" + (loc.path.split("/")[1] ?? "");
    // The tab and the range stay; selections named the other application's records.
    for (const k of [...q.keys()]) if (!KEEP_ON_APP_CHANGE.has(k)) q.delete(k);
    go(`${section}?${q}`);
  };
  const me = session.me;
  const role = app ? Role[session.roleIn(app.teamId)]?.toLowerCase() : undefined;
  return (
    <Ctx.Provider value={{ apps: list, app, select, reload: apps.reload, loading: apps.data === undefined }}>
      <div className="shell">
        <a href="#main" className="skip">
          Skip to content
        </a>
        <aside className="sidebar">
          <div className="brand">Pulsebase</div>
          <nav aria-label="Sections">
            {NAV.map(([to, label]) => {
              const current = to === "/" ? loc.path === "/" : loc.path === to || loc.path.startsWith(to + "/");
              return (
                <AppLink key={to} to={to} className={current ? "nav active" : "nav"} aria-current={current ? "page" : undefined}>
                  {label}
                </AppLink>
              );
            })}
          </nav>
        </aside>
        <div className="main-col">
          <header className="topbar">
            <label className="app-picker">
              <span>Application</span>
              {apps.loading && !apps.data ? (
                <Loading text="" />
              ) : (
                <select value={app ? String(app.id) : ""} onChange={(e) => select(BigInt(e.target.value))} aria-label="Application">
                  {list.length === 0 && <option value="">No applications yet</option>}
                  {list.map((a) => (
                    <option key={String(a.id)} value={String(a.id)}>
                      {a.name} (#{String(a.id)}) — {me.teams.find((t) => t.teamId === a.teamId)?.teamName ?? `team ${a.teamId}`}
                    </option>
                  ))}
                </select>
              )}
            </label>
            {role && <span className={`badge role-${role}`}>{role}</span>}
            <div className="spacer" />
            <ThemeSwitch />
            <details className="user-menu">
              <summary>
                {me.name || "Operator"} <span className="muted">{me.email}</span>
              </summary>
              <div className="menu">
                <button type="button" onClick={() => void session.signOut(false)}>
                  Sign out
                </button>
                <button type="button" onClick={() => void session.signOut(true)}>
                  Sign out everywhere
                </button>
              </div>
            </details>
          </header>
          <ErrorBox error={apps.error} retry={apps.reload} />
          <main id="main" tabIndex={-1}>
            {children}
          </main>
        </div>
      </div>
    </Ctx.Provider>
  );
}

/** For pages that work on the selected application. */
export function NeedApp({ children }: { children: (app: App) => ReactNode }) {
  const { app, apps, loading } = useApps();
  if (loading) return <Loading />;
  if (!app) {
    return (
      <div className="empty">
        {apps.length === 0 && (
          <>
            No application yet. <Link to="/apps">Create one</Link>.
          </>
        )}
      </div>
    );
  }
  return <>{children(app)}</>;
}
