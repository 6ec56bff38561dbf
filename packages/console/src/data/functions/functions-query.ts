// The Functions page's calls to the admin API (FunctionService), in one
// place: triggers of every kind, schedules and their runs, invocations (a
// page, and the live stream the CLI's `functions logs --follow` reads), and a
// version's code for the source lines of a stack.
import { Code, ConnectError } from "@connectrpc/connect";
import type { Invocation, ScheduleRun, Trigger } from "../../../../../gen/pulsebase/admin/v1/functions_pb.js";
import { TriggerKind } from "../../../../../gen/pulsebase/admin/v1/functions_pb.js";
import { api } from "../../api";

export type HttpAuth = "consumer" | "public" | "signed";
export const HTTP_AUTH_MODES: { value: HttpAuth; label: string; hint: string }[] = [
  { value: "consumer", label: "consumer", hint: "A consumer (device) token is required: Authorization: Bearer …" },
  { value: "public", label: "public", hint: "No token: anyone may call it at /api/fn/{app_key}/{slug} (devices with a token at /api/fn/{slug} too)." },
  { value: "signed", label: "signed", hint: "At /api/fn/{app_key}/{slug}: the caller signs the timestamp and body with HMAC-SHA256 (webhooks such as Stripe's)." },
];
export const OPERATIONS = ["insert", "update", "delete"] as const;
export type Operation = (typeof OPERATIONS)[number];
export type MissedTicks = "skip" | "run_once";

export const listTriggers = (functionId: bigint) => api.functions.listTriggers({ functionId }).then((r) => r.triggers);
export const isSchedule = (t: Trigger) => t.kind === TriggerKind.SCHEDULE;

export interface HttpTriggerInput {
  slug: string;
  auth: HttpAuth;
  /** Signed only; empty: the server makes one (shown once). */
  signingSecret: string;
  signatureHeader: string;
  toleranceSeconds: string;
}

export function createHttpTrigger(functionId: bigint, f: HttpTriggerInput): Promise<Trigger> {
  const signed = f.auth === "signed";
  return api.functions.createHttpTrigger({
    functionId,
    slug: f.slug.trim(),
    auth: f.auth,
    ...(signed && f.signingSecret ? { signingSecret: f.signingSecret } : {}),
    ...(signed && f.signatureHeader.trim() ? { signatureHeader: f.signatureHeader.trim() } : {}),
    ...(signed && f.toleranceSeconds.trim() ? { signatureToleranceSeconds: Number(f.toleranceSeconds) } : {}),
  });
}

export const createEventTrigger = (functionId: bigint, source: "db" | "cms", target: string, operations: Operation[]) =>
  api.functions.createEventTrigger({ functionId, source, target: target.trim(), operations });

export interface ScheduleInput {
  cron: string;
  timezone: string;
  missedTicks: MissedTicks;
}

export const createSchedule = (functionId: bigint, s: ScheduleInput, enabled: boolean) =>
  api.functions.createScheduleTrigger({ functionId, cron: s.cron, timezone: s.timezone, missedTicks: s.missedTicks, enabled });
export const updateSchedule = (triggerId: bigint, s: ScheduleInput) =>
  api.functions.updateScheduleTrigger({ triggerId, cron: s.cron, timezone: s.timezone, missedTicks: s.missedTicks });
export const setTriggerEnabled = (triggerId: bigint, enabled: boolean) => api.functions.setTriggerEnabled({ triggerId, enabled });
export const deleteTrigger = (triggerId: bigint) => api.functions.deleteTrigger({ triggerId });
export const rotateSecret = (triggerId: bigint) => api.functions.rotateTriggerSecret({ triggerId });

export async function scheduleRuns(triggerId: bigint, pageToken = ""): Promise<{ runs: ScheduleRun[]; next: string }> {
  const r = await api.functions.listScheduleRuns({ triggerId, pageSize: 20, pageToken });
  return { runs: r.runs, next: r.nextPageToken };
}

export async function invocationsPage(functionId: bigint, pageSize = 50): Promise<Invocation[]> {
  return (await api.functions.listInvocations({ functionId, pageSize })).invocations;
}

/** The code of one deployed version, cached: a stack's frames all point into few versions. */
const codeCache = new Map<string, Promise<string | undefined>>();
export function versionCode(functionId: bigint, version: number): Promise<string | undefined> {
  const key = `${functionId}@${version}`;
  let p = codeCache.get(key);
  if (!p) {
    p = api.functions.getVersion({ functionId, version }).then(
      (v) => v.code,
      () => {
        codeCache.delete(key);
        return undefined;
      },
    );
    codeCache.set(key, p);
  }
  return p;
}

/**
 * Follows a function's invocations as they are recorded (FollowInvocations,
 * a server stream over Connect, the same operation as `functions logs
 * --follow`), from after `afterId`. Reopens after a dropped stream from the
 * last id seen, so nothing is missed or shown twice. Returns a stop function.
 */
export function followInvocations(
  functionId: bigint,
  afterId: bigint,
  on: { invocation(i: Invocation): void; state(s: "live" | "reconnecting", error?: unknown): void },
): () => void {
  const abort = new AbortController();
  let after = afterId;
  void (async () => {
    let failures = 0;
    while (!abort.signal.aborted) {
      try {
        // after_id 0 means "from now on" (nothing was listed yet); open-ended: no deadline.
        const stream = api.functions.followInvocations({ functionId, afterId: after }, { signal: abort.signal, timeoutMs: 2_147_483_647 });
        on.state("live");
        for await (const inv of stream) {
          failures = 0;
          if (inv.id > after) after = inv.id;
          on.invocation(inv);
        }
        // The server ended it (the function was deleted, or a restart): open again.
      } catch (e) {
        if (abort.signal.aborted) return;
        const err = ConnectError.from(e);
        if (err.code === Code.NotFound || err.code === Code.PermissionDenied || err.code === Code.Unauthenticated) {
          on.state("reconnecting", err);
          return;
        }
        on.state("reconnecting", err);
      }
      if (abort.signal.aborted) return;
      failures++;
      await new Promise((r) => setTimeout(r, Math.min(500 * 2 ** Math.min(failures, 4), 8000)));
    }
  })();
  return () => abort.abort();
}

/** What an event trigger can watch: the linked database's tables, or the CMS content types (slugs). */
export async function eventTargets(appId: bigint, source: "db" | "cms"): Promise<string[]> {
  try {
    if (source === "db") return (await api.sql.getSchema({ appId })).tables.filter((t) => t.type === "table" && !t.name.startsWith("_pulsebase_")).map((t) => t.name);
    return (await api.cms.listContentTypes({ appId })).contentTypes.map((t) => t.slug);
  } catch {
    // No linked database yet (or no rights to read it): the name is typed instead.
    return [];
  }
}
