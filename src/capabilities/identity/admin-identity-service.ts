// pulsebase.admin.v1.IdentityService: the operator API for users, teams,
// applications, plans, and reading consumers and sessions.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  AppSchema,
  IdentityService,
  PlanSchema,
  type App,
  type Plan,
} from "../../../gen/pulsebase/admin/v1/identity_pb.js";
import { appError, Violations } from "../../kernel/errors.js";
import { pageById } from "../../kernel/paging.js";
import type { Authenticator } from "./authenticator.js";
import type { AppRow, IdentityStore } from "./identity-store.js";
import type { ChangeBus } from "../../infra/cluster/change-bus.js";
import { FREE_PLAN, normalisePlan, type PlanLimits } from "./plan.js";

const EMAIL_RE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export function toPlanMessage(p: PlanLimits): Plan {
  return create(PlanSchema, { ...p, cmsRequestsPerDay: BigInt(p.cmsRequestsPerDay) });
}

function planFromMessage(p: Plan | undefined): PlanLimits {
  if (!p) return { ...FREE_PLAN };
  return normalisePlan({ ...p, cmsRequestsPerDay: Number(p.cmsRequestsPerDay) });
}

export function toApp(r: AppRow): App {
  return create(AppSchema, {
    id: BigInt(r.id),
    teamId: BigInt(r.team_id),
    name: r.name,
    appKey: r.app_key,
    plan: toPlanMessage(r.plan),
    strictTokenMode: r.strict_token_mode,
    createdAt: timestampFromDate(r.created_at),
  });
}

function requireName(v: Violations, field: string, value: string, max = 200): void {
  if (!value.trim()) v.add(field, `The ${field} field is required.`);
  else if (value.length > max) v.add(field, `The ${field} field must not be longer than ${max} characters.`);
}

/**
 * `changes` carries revocations (a deleted consumer, a rotated key) and plan
 * changes to every process's caches; this process's own caches are dropped
 * before the call answers, the others' within the change bus's bound.
 */
export function createAdminIdentityServiceImpl({ store, auth, changes }: { store: IdentityStore; auth: Authenticator; changes?: ChangeBus }): ServiceImpl<typeof IdentityService> {
  async function mustApp(id: bigint): Promise<AppRow> {
    const app = await store.getApp(Number(id));
    if (!app) throw appError("not_found", "Application not found.");
    return app;
  }
  return {
    async createUser(req) {
      const v = new Violations();
      requireName(v, "name", req.name);
      if (!EMAIL_RE.test(req.email)) v.add("email", "The email field must be a valid email address.");
      v.throwIfAny();
      const u = await store.createUser(req.name, req.email.toLowerCase());
      return { id: BigInt(u.id), name: u.name, email: u.email, createdAt: timestampFromDate(u.created_at) };
    },
    async createTeam(req) {
      const v = new Violations();
      requireName(v, "name", req.name);
      v.throwIfAny();
      const t = await store.createTeam(req.name, req.memberUserIds.map(Number));
      return { id: BigInt(t.id), name: t.name, memberUserIds: req.memberUserIds, createdAt: timestampFromDate(t.created_at) };
    },
    async createApp(req) {
      const v = new Violations();
      requireName(v, "name", req.name);
      if (req.teamId <= 0n) v.add("team_id", "The team_id field is required.");
      v.throwIfAny();
      if (!(await store.teamExists(Number(req.teamId)))) throw appError("not_found", "Team not found.");
      return toApp(await store.createApp(Number(req.teamId), req.name, planFromMessage(req.plan)));
    },
    async getApp(req) {
      const row = req.key.case === "id" ? await store.getApp(Number(req.key.value))
        : req.key.case === "appKey" ? await store.getAppByKey(req.key.value)
        : undefined;
      if (!row) throw appError("not_found", "Application not found.");
      return toApp(row);
    },
    async listApps(req) {
      const { rows, next } = await pageById(req, (afterId, limit) => store.listApps(req.teamId > 0n ? Number(req.teamId) : undefined, { afterId, limit }));
      return { apps: rows.map(toApp), nextPageToken: next };
    },
    async rotateAppKey(req) {
      const row = await store.rotateAppKey(Number(req.appId));
      if (!row) throw appError("not_found", "Application not found.");
      auth.forgetApp(row.id);
      // The old key stops working everywhere: tokens, the CMS key cache, cached CMS media URLs.
      await changes?.publish("app", row.id);
      return toApp(row);
    },
    async setAppPlan(req) {
      await mustApp(req.appId);
      if (!req.plan) throw appError("validation_failed", "The plan field is required.", { fields: { plan: ["The plan field is required."] } });
      const row = await store.updateApp(Number(req.appId), { plan: planFromMessage(req.plan) });
      if (!row) throw appError("not_found", "Application not found.");
      // This process's cached plans go now, so the next request uses the new
      // one; the other processes' within the change bus's bound.
      await changes?.publish("app", row.id);
      return toApp(row);
    },
    async updateAppSettings(req) {
      await mustApp(req.appId);
      const row = await store.updateApp(Number(req.appId), { strictTokenMode: req.strictTokenMode, name: req.name });
      return toApp(row!);
    },
    async listConsumers(req) {
      await mustApp(req.appId);
      const { rows, next } = await pageById(req, (afterId, limit) => store.listConsumers(Number(req.appId), { afterId, limit }));
      return {
        consumers: rows.map((r) => ({
          id: BigInt(r.id),
          appId: BigInt(r.app_id),
          userId: r.user_id,
          userEmail: r.user_email ?? "",
          deviceId: r.device_id,
          deviceModel: r.device_model,
          os: r.os,
          country: r.country,
          language: r.language,
          createdAt: timestampFromDate(r.created_at),
          updatedAt: timestampFromDate(r.updated_at),
        })),
        nextPageToken: next,
      };
    },
    async deleteConsumer(req) {
      const appId = await store.deleteConsumer(Number(req.consumerId));
      if (appId === undefined) throw appError("not_found", "Consumer not found.");
      auth.forgetConsumer(Number(req.consumerId));
      await changes?.publish("consumer", appId, Number(req.consumerId));
      return {};
    },
    async listSessions(req) {
      const { rows, next } = await pageById(req, (afterId, limit) => store.listSessions(Number(req.consumerId), { afterId, limit }));
      return {
        sessions: rows.map((r) => ({
          sessionId: BigInt(r.id),
          consumerId: BigInt(r.consumer_id),
          startedAt: timestampFromDate(r.started_at),
          endedAt: r.ended_at ? timestampFromDate(r.ended_at) : undefined,
        })),
        nextPageToken: next,
      };
    },
  };
}
