// The example app: registers the device, records events and breadcrumbs
// (kept while offline, sent once when the server is back), turns an uncaught
// error into a crash log, and lists published CMS articles.
// Open it as /?appKey=pk_... from examples/web/dev-server.ts.
import { captureCrashes, createAnalytics, createClient, createCms } from "./pulsebase-client.js";

const params = new URLSearchParams(location.search);
const appKey = params.get("appKey");
const status = document.getElementById("status");

if (!appKey) {
  status.textContent = "Open this page with ?appKey=<your app key>.";
} else {
  const client = createClient({ baseUrl: location.origin, appKey });
  const analytics = createAnalytics(client, {
    appVersion: "example-1.0",
    flushAt: Number(params.get("flushAt") ?? 50),
    flushInterval: Number(params.get("flushInterval") ?? 5000),
    retryBase: Number(params.get("retryBase") ?? 1000),
    retryMax: Number(params.get("retryMax") ?? 30000),
    onError: (e) => (status.textContent = `not sent yet: ${e.message}`),
  });
  captureCrashes(analytics);
  const cms = createCms(client);
  window.pb = { client, analytics, cms };

  const show = () => {
    const s = analytics.stats();
    status.textContent = `consumer ${client.identity?.consumerId ?? "(not registered yet)"} · queued ${s.queued.events} events · sent ${s.sent.events}`;
  };
  setInterval(show, 500);
  client.ready().then(show, (e) => (status.textContent = `offline: ${e.message}`));

  analytics.breadcrumb("opened home");
  document.getElementById("tap").onclick = () => {
    analytics.breadcrumb("tapped the button");
    analytics.track("button_tap", { screen: "home" });
  };
  document.getElementById("flush").onclick = () => analytics.flush().then(show, (e) => (status.textContent = e.message));
  document.getElementById("crash").onclick = function explode() {
    analytics.breadcrumb("pressed crash");
    const order = undefined;
    return order.total; // TypeError: an uncaught error in the page, captured as a crash log
  };

  const list = document.getElementById("articles");
  (async () => {
    list.textContent = "";
    for await (const a of cms.from("article").sort("-published_at").fields("title", "category").perPage(10)) {
      const el = document.createElement("article");
      el.textContent = `${a.title} (${a.category})`;
      list.append(el);
    }
    if (!list.children.length) list.textContent = "No articles published yet.";
  })().catch((e) => (list.textContent = `${e.name}: ${e.message}`));
}
