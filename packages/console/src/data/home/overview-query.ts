// The home page's data: one GetOverview per team the caller belongs to
// (the administrator asks once for every team).
import type { Me } from "../../../../../gen/pulsebase/admin/v1/account_pb.js";
import type { Overview } from "../../../../../gen/pulsebase/admin/v1/overview_pb.js";
import { api } from "../../api";

export async function loadOverview(me: Me): Promise<Overview[]> {
  if (me.admin) return [await api.overview.getOverview({ teamId: 0n })];
  return Promise.all(me.teams.map((t) => api.overview.getOverview({ teamId: t.teamId })));
}

/** Merges the per-team answers: queues are the instance's, so they are listed once. */
export function mergeOverviews(list: Overview[]) {
  return {
    apps: list.flatMap((o) => o.apps),
    totalApps: list.reduce((n, o) => n + Number(o.totalApps), 0),
    databases: list.flatMap((o) => o.databases),
    queues: list[0]?.queues ?? [],
    cap: Number(list[0]?.countCap ?? 0n),
  };
}

/** "100000+" once a count reached the cap. */
export function capped(n: bigint | number, cap: number): string {
  const v = Number(n);
  return cap > 0 && v >= cap ? `${cap.toLocaleString()}+` : v.toLocaleString();
}

export function bytes(n: bigint | number): string {
  const v = Number(n);
  if (v < 1024) return `${v} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let x = v / 1024;
  let i = 0;
  while (x >= 1024 && i < units.length - 1) {
    x /= 1024;
    i++;
  }
  return `${x.toFixed(x < 10 ? 1 : 0)} ${units[i]}`;
}
