// The console's entry: router, session, layout and pages.
import { lazy, StrictMode, Suspense } from "react";
import { createRoot } from "react-dom/client";
import "./styles.css";
import { Loading } from "./ui";
import { Router, useRouter } from "./router";
import { SessionProvider } from "./session";
import { applyTheme, Shell, storedTheme } from "./shell";

// Each section is its own chunk: the editors (CodeMirror, TipTap) load with the pages that use them.
const AnalyticsPage = lazy(() => import("./pages/analytics").then((m) => ({ default: m.AnalyticsPage })));
const AppsPage = lazy(() => import("./pages/apps").then((m) => ({ default: m.AppsPage })));
const ChannelsPage = lazy(() => import("./pages/channels").then((m) => ({ default: m.ChannelsPage })));
const CmsPage = lazy(() => import("./pages/cms").then((m) => ({ default: m.CmsPage })));
const DatabasePage = lazy(() => import("./pages/database").then((m) => ({ default: m.DatabasePage })));
const FunctionsPage = lazy(() => import("./pages/functions").then((m) => ({ default: m.FunctionsPage })));
const TeamPage = lazy(() => import("./pages/team").then((m) => ({ default: m.TeamPage })));
const HomePage = lazy(() => import("./pages/home").then((m) => ({ default: m.HomePage })));
const NotFoundPage = lazy(() => import("./pages/not-found").then((m) => ({ default: m.NotFoundPage })));

// The theme is applied before the first render (no flash of the other one).
applyTheme(storedTheme());

function Pages() {
  const { loc } = useRouter();
  const section = loc.path.split("/")[1] ?? "";
  const page =
    section === "" ? <HomePage />
    : section === "apps" && loc.path.split("/").filter(Boolean).length === 1 ? <AppsPage />
    : section === "analytics" && loc.path.split("/").filter(Boolean).length === 1 ? <AnalyticsPage />
    : section === "database" ? <DatabasePage />
    : section === "functions" ? <FunctionsPage />
    : section === "cms" ? <CmsPage />
    : section === "channels" && loc.path.split("/").filter(Boolean).length === 1 ? <ChannelsPage />
    : section === "team" && loc.path.split("/").filter(Boolean).length === 1 ? <TeamPage />
    : <NotFoundPage />;
  return (
    <Shell>
      <Suspense fallback={<Loading />}>{page}</Suspense>
    </Shell>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <Router>
      <SessionProvider>
        <Pages />
      </SessionProvider>
    </Router>
  </StrictMode>,
);
