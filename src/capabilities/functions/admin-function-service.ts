// pulsebase.admin.v1.FunctionService: the operator API for functions.
import { create, fromJson, toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  EgressPolicySchema,
  FunctionDeadLetterSchema,
  FunctionSchema,
  FunctionService,
  FunctionVersionSchema,
  InvocationSchema,
  KvEntrySchema,
  LogLineSchema,
  ScheduleRunSchema,
  RunFunctionResponseSchema,
  TriggerKind,
  TriggerSchema,
  type Function as FunctionMsg,
  type FunctionVersion,
  type Invocation,
  type Trigger,
} from "../../../gen/pulsebase/admin/v1/functions_pb.js";
import { appError, errorDetail, Violations } from "../../kernel/errors.js";
import type { PlanLimits } from "../identity/index.js";
import type { Sandbox } from "../../infra/sandbox/sandbox.js";
import { CompileError } from "../../infra/sandbox/function-isolate.js";
import type { Sql } from "../../infra/storage/sql.js";
import type { FunctionsConfig } from "./config.js";
import {
  invocationsAfter,
  lastInvocationId,
  listInvocations,
  NotFound,
  type FunctionRow,
  type FunctionStore,
  type InvocationRow,
  type Settings,
  type TriggerAuth,
  type TriggerRow,
  type VersionRow,
} from "./function-store.js";
import { parseSchedule } from "./cron-schedule.js";
import type { KvStore } from "./kv-store.js";
import type { EgressPolicyStore, StoredEgressPolicy } from "./egress-policy-store.js";
import {
  DEFAULT_SIGNATURE_HEADER,
  DEFAULT_SIGNATURE_TOLERANCE_S,
  MAX_SECRET_BYTES as MAX_SIGNING_SECRET_BYTES,
  MAX_SIGNATURE_TOLERANCE_S,
  MIN_SECRET_BYTES,
  newSigningSecret,
} from "./webhook-signature.js";
import type { FunctionRuntime } from "./function-runtime.js";
import type { InvocationRecorder } from "./invocation-recorder.js";
import type { DeadLetterStore, StoredDeadLetter } from "./events/event-worker.js";
import type { EventWorker } from "./events/event-worker.js";
import { pageById, pageLimit } from "../../kernel/paging.js";
import { sleep } from "../../kernel/retry.js";

export interface AdminFunctionServiceDeps {
  sql: Sql;
  store: FunctionStore;
  sandbox: Sandbox;
  runtime: FunctionRuntime;
  recorder: InvocationRecorder;
  config: FunctionsConfig;
  /** The applications' key-value stores (ctx.kv), for the operator. */
  kv: KvStore;
  /** The applications' egress policies (fetch). */
  egress: EgressPolicyStore;
  /** How often FollowInvocations looks for new records. */
  followPollMs?: number;
  /** The event worker's dead letters; unset when event triggers are not configured. */
  deadLetters?: DeadLetterStore;
  /**
   * Installs an application's db change capture now (the event worker's
   * syncApp); unset when event triggers are not configured (then db triggers
   * are stored but nothing captures or delivers changes in this process).
   */
  capture?: Pick<EventWorker, "syncApp">;
  /** Failures of best-effort work (removing the capture of a disabled or deleted trigger). */
  onError?: (err: unknown) => void;
  /** Tells the other processes that an application's functions changed (the change bus, kind functions). */
  announce?: (appId: number) => Promise<void>;
}

export const MAX_CODE_BYTES = 1024 * 1024;
export const MAX_SECRETS = 100;
export const MAX_SECRET_BYTES = 32 * 1024;
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$/;
const SLUG_RE = /^[a-z0-9][a-z0-9_-]{0,99}$/;
const SECRET_RE = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const TABLE_RE = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const COLLECTION_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const OPERATIONS = ["insert", "update", "delete"] as const;

function toFunction(row: FunctionRow): FunctionMsg {
  return create(FunctionSchema, {
    id: BigInt(row.id),
    appId: BigInt(row.app_id),
    name: row.name,
    settings: { timeoutMs: row.timeout_ms, memoryMb: row.memory_mb, invocationsPerMinute: row.invocations_per_minute },
    activeVersion: row.active_version ?? 0,
    latestVersion: Number(row.latest_version),
    secretNames: row.secret_names ?? [],
    createdAt: timestampFromDate(new Date(row.created_at)),
    updatedAt: timestampFromDate(new Date(row.updated_at)),
  });
}

const KINDS = { http: TriggerKind.HTTP, event: TriggerKind.EVENT, schedule: TriggerKind.SCHEDULE } as const;
const AUTH_MODES: readonly TriggerAuth[] = ["consumer", "public", "signed"];
const HEADER_RE = /^[a-z0-9][a-z0-9-]{0,99}$/;

/** The trigger as the operator sees it; the signing secret only when `withSecret` (the call that made it). */
function toTrigger(row: TriggerRow, withSecret = false): Trigger {
  return create(TriggerSchema, {
    id: BigInt(row.id),
    functionId: BigInt(row.function_id),
    kind: KINDS[row.kind],
    enabled: row.enabled,
    slug: row.slug ?? "",
    source: row.source ?? "",
    target: row.target ?? "",
    operations: row.operations ?? [],
    createdAt: timestampFromDate(new Date(row.created_at)),
    ...(row.kind === "http" ? { auth: row.auth } : {}),
    ...(row.kind === "http" && row.auth === "signed"
      ? {
        signatureHeader: row.signature_header ?? "",
        signatureToleranceSeconds: row.signature_tolerance_s ?? 0,
        ...(withSecret ? { signingSecret: row.signing_secret ?? "" } : {}),
      }
      : {}),
    ...(row.kind === "schedule" ? { cron: row.cron ?? "", timezone: row.timezone ?? "", missedTicks: row.missed_ticks ?? "skip" } : {}),
    nextRunAt: row.kind === "schedule" && row.enabled && row.next_run_at ? timestampFromDate(new Date(row.next_run_at)) : undefined,
  });
}

function toVersion(v: VersionRow, extra: { code?: string; deduplicated?: boolean } = {}): FunctionVersion {
  return create(FunctionVersionSchema, {
    functionId: BigInt(v.function_id),
    version: v.version,
    codeSize: Number(v.code_size),
    active: v.active,
    createdAt: timestampFromDate(new Date(v.created_at)),
    sha256: v.code_sha256,
    deduplicated: extra.deduplicated ?? false,
    ...(extra.code !== undefined ? { code: extra.code } : {}),
  });
}

function toInvocation(r: InvocationRow): Invocation {
  return create(InvocationSchema, {
    id: BigInt(r.id),
    functionId: BigInt(r.function_id),
    version: r.version ?? 0,
    triggerKind: r.trigger_kind,
    triggerId: BigInt(r.trigger_id ?? 0),
    status: r.status,
    outcome: r.outcome,
    durationMs: Number(r.duration_ms),
    memoryBytes: BigInt(r.memory_bytes),
    error: r.error ?? "",
    errorName: r.error_name ?? "",
    errorMessage: r.error_message ?? "",
    errorStack: r.error_stack ?? "",
    logs: r.logs.map((l) => create(LogLineSchema, l)),
    logsTruncated: r.logs_truncated,
    requestId: r.request_id,
    createdAt: timestampFromDate(new Date(r.created_at)),
  });
}

/** An operator-given signing secret, or a new one. */
function signingSecretOf(given: string | undefined, v: Violations): string {
  if (given === undefined) return newSigningSecret();
  const n = Buffer.byteLength(given);
  if (n < MIN_SECRET_BYTES || n > MAX_SIGNING_SECRET_BYTES || given.includes("\u0000")) {
    v.add("signing_secret", `A signing secret is ${MIN_SECRET_BYTES} to ${MAX_SIGNING_SECRET_BYTES} bytes.`);
  }
  return given;
}

/** A schedule's expression and time zone checked; the first tick after now. */
function checkSchedule(v: Violations, cron: string, timezone: string): Date | null {
  try {
    const next = parseSchedule(cron, timezone).next(new Date());
    if (!next) v.add("cron", "The expression never fires.");
    return next;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    v.add(/time zone/i.test(message) ? "timezone" : "cron", message);
    return null;
  }
}


function toDeadLetter(d: StoredDeadLetter) {
  const ev = d.event;
  return create(FunctionDeadLetterSchema, {
    id: d.id,
    appId: BigInt(d.appId),
    functionId: BigInt(d.functionId),
    triggerId: BigInt(d.triggerId),
    eventId: ev?.id ?? "",
    source: ev?.source ?? "",
    target: (ev?.source === "cms" ? ev.collection : ev?.table) ?? "",
    operation: ev?.operation ?? "",
    event: ev ? (ev as unknown as JsonObject) : undefined,
    attempts: d.attempts,
    lastError: d.error,
    deadLetteredAt: timestampFromDate(d.deadAt),
  });
}

/** Bounds of the settings under a plan and the process limits. */
export function settingBounds(plan: PlanLimits, config: FunctionsConfig) {
  return {
    maxTimeoutMs: Math.min(plan.functionMaxTimeoutMs || Infinity, config.maxTimeoutMs),
    maxMemoryMb: Math.min(plan.functionMaxMemoryMb || Infinity, config.maxMemoryMb),
    maxPerMinute: plan.functionInvocationsPerMinute > 0 ? plan.functionInvocationsPerMinute : Infinity,
  };
}

function checkSettings(v: Violations, s: Settings, plan: PlanLimits, config: FunctionsConfig): void {
  const b = settingBounds(plan, config);
  if (!Number.isInteger(s.timeoutMs) || s.timeoutMs < 1 || s.timeoutMs > b.maxTimeoutMs) {
    v.add("timeout_ms", `The timeout must be from 1 to ${b.maxTimeoutMs} ms (the plan's limit).`);
  }
  if (!Number.isInteger(s.memoryMb) || s.memoryMb < config.minMemoryMb || s.memoryMb > b.maxMemoryMb) {
    v.add("memory_mb", `The memory limit must be from ${config.minMemoryMb} to ${b.maxMemoryMb} MB (the plan's limit).`);
  }
  if (!Number.isInteger(s.invocationsPerMinute) || s.invocationsPerMinute < 0 || s.invocationsPerMinute > b.maxPerMinute) {
    v.add("invocations_per_minute", `The invocation limit must be from 0 to ${b.maxPerMinute} per minute (the plan's limit).`);
  }
}

function conflictAs(err: unknown, message: string): unknown {
  return errorDetail(err)?.code === "conflict" ? appError("conflict", message, { cause: err }) : err;
}

/** Function lists page at most 200 (docs/functions.md). */
const MAX_PAGE = 200;

export function createAdminFunctionServiceImpl(deps: AdminFunctionServiceDeps): ServiceImpl<typeof FunctionService> {
  const { sql, store, sandbox, runtime, recorder, config, kv } = deps;

  function deadLetterStore(): DeadLetterStore {
    if (!deps.deadLetters) throw appError("failed_precondition", "Event triggers are not configured in this process.");
    return deps.deadLetters;
  }
  /** The function filter of the dead-letter calls: 0, or a function of the application. */
  async function functionFilter(appId: number, functionId: bigint): Promise<number> {
    if (functionId === 0n) return 0;
    const row = await store.get(Number(functionId));
    if (!row || Number(row.app_id) !== appId) throw appError("not_found", "No such function in this application.", { fields: { function_id: ["No such function in this application."] } });
    return row.id;
  }

  /**
   * Installs the capture of an enabled db trigger on `table` before the
   * operator API answers, so the very next write to the table is delivered.
   * Throws a catalogue error when that is not possible (no linked or active
   * database, the table does not exist, the database failed).
   */
  async function installCapture(appId: number, table: string): Promise<void> {
    if (!deps.capture) return;
    let missing: string[];
    try {
      ({ missing } = await deps.capture.syncApp(appId));
    } catch (err) {
      if (errorDetail(err)) throw err; // database_not_linked, database_unavailable, ...
      const reason = err instanceof Error ? err.message : String(err);
      throw appError("unavailable", `The change capture could not be installed in the application's database: ${reason}`, { cause: err });
    }
    if (missing.includes(table)) {
      const message = `The table ${table} does not exist in the application's database; create it before the trigger.`;
      throw appError("failed_precondition", message, { fields: { target: [message] } });
    }
  }
  /** After a db trigger was disabled or deleted: drops capture nobody needs now (the event worker retries on failure). */
  async function releaseCapture(appId: number): Promise<void> {
    if (!deps.capture) return;
    await deps.capture.syncApp(appId).catch((err: unknown) => deps.onError?.(err));
  }

  /** Cached resolutions go: here at once, in the other processes within the change bus's bound. */
  async function changed(appId: number | undefined): Promise<void> {
    runtime.invalidate();
    if (appId !== undefined) await deps.announce?.(appId);
  }

  function checkCodeSize(v: Violations, code: string): void {
    if (code.trim() === "") v.add("code", "The code is required.");
    else if (Buffer.byteLength(code) > MAX_CODE_BYTES) v.add("code", `At most ${MAX_CODE_BYTES} bytes.`);
  }
  async function compile(code: string, memoryMb: number): Promise<void> {
    try {
      await sandbox.check(code, memoryMb);
    } catch (err) {
      if (err instanceof CompileError) {
        throw appError("validation_failed", `The code was refused: ${err.message}`, { fields: { code: [err.message] } });
      }
      throw err;
    }
  }

  async function mustGet(id: bigint | number): Promise<FunctionRow> {
    const row = await store.get(Number(id));
    if (!row) throw appError("not_found", "No such function.");
    return row;
  }
  async function planOf(appId: number): Promise<PlanLimits> {
    const plan = await store.appPlan(appId);
    if (!plan) throw appError("not_found", "No such application.");
    return plan;
  }

  return {
    async createFunction(req) {
      const appId = Number(req.appId);
      const plan = await planOf(appId);
      const b = settingBounds(plan, config);
      const s: Settings = {
        timeoutMs: req.timeoutMs ?? Math.min(config.defaultTimeoutMs, b.maxTimeoutMs),
        memoryMb: req.memoryMb ?? Math.min(config.defaultMemoryMb, b.maxMemoryMb),
        invocationsPerMinute: req.invocationsPerMinute ?? 0,
      };
      const v = new Violations();
      if (!NAME_RE.test(req.name)) v.add("name", "The name is required: 1 to 100 letters, digits, - or _, starting with a letter or digit.");
      checkSettings(v, s, plan, config);
      if (req.code !== undefined) checkCodeSize(v, req.code);
      v.throwIfAny();
      try {
        if (req.code === undefined) return toFunction(await store.create(appId, req.name, s));
        // Compiled before anything is stored: refused code creates nothing.
        await compile(req.code, s.memoryMb);
        const row = await store.createWithVersion(appId, req.name, s, req.code);
        await changed(appId);
        return toFunction(row);
      } catch (err) {
        throw conflictAs(err, "A function with this name already exists in the application.");
      }
    },

    async getFunction(req) {
      return toFunction(await mustGet(req.id));
    },

    async listFunctions(req) {
      const { rows, next } = await pageById(req, (afterId, limit) => store.list(Number(req.appId), afterId, limit), MAX_PAGE);
      return { functions: rows.map(toFunction), nextPageToken: next };
    },

    async updateFunctionSettings(req) {
      const row = await mustGet(req.id);
      const plan = await planOf(row.app_id);
      const s: Settings = {
        timeoutMs: req.timeoutMs ?? row.timeout_ms,
        memoryMb: req.memoryMb ?? row.memory_mb,
        invocationsPerMinute: req.invocationsPerMinute ?? row.invocations_per_minute,
      };
      const v = new Violations();
      checkSettings(v, s, plan, config);
      v.throwIfAny();
      await store.updateSettings(row.id, s);
      // Warm isolates carry the old heap limit: release the idle ones now.
      if (s.memoryMb !== row.memory_mb) for (const v of await store.listVersions(row.id)) sandbox.evictVersion(v.id);
      await changed(row.app_id);
      return toFunction(await mustGet(req.id));
    },

    async deleteFunction(req) {
      const row = await store.get(Number(req.id));
      const watchedDb = row ? (await store.listTriggers(row.id)).some((t) => t.kind === "event" && t.source === "db") : false;
      let versionIds: number[];
      try {
        versionIds = await store.delete(Number(req.id));
      } catch (err) {
        if (err instanceof NotFound) throw appError("not_found", "No such function.");
        throw err;
      }
      for (const id of versionIds) sandbox.evictVersion(id);
      await changed(row?.app_id);
      if (row && watchedDb) await releaseCapture(row.app_id);
      return {};
    },

    async setSecret(req) {
      const row = await mustGet(req.functionId);
      const v = new Violations();
      if (!SECRET_RE.test(req.name)) v.add("name", "A secret name is 1 to 128 letters, digits or _, not starting with a digit.");
      if (Buffer.byteLength(req.value) > MAX_SECRET_BYTES) v.add("value", `A secret value is at most ${MAX_SECRET_BYTES} bytes.`);
      if (!row.secret_names.includes(req.name) && row.secret_names.length >= MAX_SECRETS) v.add("name", `A function has at most ${MAX_SECRETS} secrets.`);
      v.throwIfAny();
      await store.setSecret(row.id, req.name, req.value);
      await changed(row.app_id);
      return toFunction(await mustGet(row.id));
    },

    async deleteSecret(req) {
      const row = await mustGet(req.functionId);
      if (!(await store.deleteSecret(row.id, req.name))) throw appError("not_found", "No such secret.");
      await changed(row.app_id);
      return toFunction(await mustGet(row.id));
    },

    async deployVersion(req) {
      const row = await mustGet(req.functionId);
      const v = new Violations();
      checkCodeSize(v, req.code);
      v.throwIfAny();
      await compile(req.code, row.memory_mb);
      const stored = await store.insertVersion(row.id, req.code, req.activate);
      if (!stored) throw appError("not_found", "No such function.");
      if (stored.previous_active_id) sandbox.evictVersion(stored.previous_active_id);
      if (!stored.existing || stored.previous_active_id) await changed(row.app_id);
      return toVersion(stored, { code: req.code, deduplicated: stored.existing });
    },

    async listVersions(req) {
      await mustGet(req.functionId);
      const rows = await store.listVersions(Number(req.functionId));
      // With include_code (the console's diff view), every version's code.
      const code = req.includeCode ? await Promise.all(rows.map((v) => store.versionCode(v.id))) : undefined;
      return { versions: rows.map((v, i) => toVersion(v, code ? { code: code[i] ?? "" } : {})) };
    },

    async getVersion(req) {
      await mustGet(req.functionId);
      const v = await store.getVersion(Number(req.functionId), req.version);
      if (!v) throw appError("not_found", `The function has no version ${req.version}.`, { fields: { version: ["No such version."] } });
      return toVersion(v, { code: v.code ?? "" });
    },

    async activateVersion(req) {
      const row = await mustGet(req.functionId);
      const r = await store.activate(row.id, req.version);
      if (!r.ok) throw appError("not_found", `The function has no version ${req.version}.`, { fields: { version: ["No such version."] } });
      if (r.previousVersionId) sandbox.evictVersion(r.previousVersionId);
      await changed(row.app_id);
      return toFunction(await mustGet(row.id));
    },

    async createHttpTrigger(req) {
      const row = await mustGet(req.functionId);
      if (!SLUG_RE.test(req.slug)) {
        throw appError("validation_failed", "Invalid slug.", { fields: { slug: ["A slug is 1 to 100 lower-case letters, digits, - or _, starting with a letter or digit."] } });
      }
      const auth = (req.auth || "consumer") as TriggerAuth;
      const v = new Violations();
      if (!AUTH_MODES.includes(auth)) v.add("auth", "The authentication mode is consumer, public or signed.");
      let signed = null;
      if (auth === "signed") {
        const header = (req.signatureHeader ?? DEFAULT_SIGNATURE_HEADER).toLowerCase();
        if (!HEADER_RE.test(header)) v.add("signature_header", "A header name: letters, digits and -.");
        const toleranceS = req.signatureToleranceSeconds ?? DEFAULT_SIGNATURE_TOLERANCE_S;
        if (!Number.isInteger(toleranceS) || toleranceS < 1 || toleranceS > MAX_SIGNATURE_TOLERANCE_S) {
          v.add("signature_tolerance_seconds", `The tolerance is 1 to ${MAX_SIGNATURE_TOLERANCE_S} seconds.`);
        }
        signed = { secret: signingSecretOf(req.signingSecret, v), header, toleranceS };
      } else if (req.signingSecret !== undefined || req.signatureHeader !== undefined || req.signatureToleranceSeconds !== undefined) {
        v.add("auth", "A signing secret, header or tolerance needs auth \"signed\".");
      }
      v.throwIfAny();
      try {
        const t = await store.createHttpTrigger(row.id, req.slug, req.enabled ?? true, auth, signed);
        await changed(row.app_id);
        return toTrigger(t!, true);
      } catch (err) {
        throw conflictAs(err, "Another HTTP trigger of this application already uses this slug.");
      }
    },

    async createEventTrigger(req) {
      const row = await mustGet(req.functionId);
      const v = new Violations();
      if (req.source !== "db" && req.source !== "cms") v.add("source", "The source must be db or cms.");
      const re = req.source === "cms" ? COLLECTION_RE : TABLE_RE;
      if (!re.test(req.target)) v.add("target", req.source === "cms" ? "A collection name is required." : "A table name (SQLite identifier) is required.");
      const ops = [...new Set(req.operations.map((o) => o.toLowerCase()))];
      if (ops.length === 0) v.add("operations", "At least one operation is required.");
      ops.forEach((o, i) => {
        if (!(OPERATIONS as readonly string[]).includes(o)) v.add(`operations.${i}`, "An operation is insert, update or delete.");
      });
      v.throwIfAny();
      const t = await store.createEventTrigger(row.id, req.source, req.target, ops, req.enabled ?? true);
      if (!t) throw appError("not_found", "No such function.");
      if (t.source === "db" && t.enabled) {
        try {
          await installCapture(t.app_id, t.target!);
        } catch (err) {
          // No half-created trigger: one that cannot capture is not kept. (A
          // process that installed its capture meanwhile drops it on its next
          // drain: the watched tables changed.)
          await store.deleteTrigger(t.id).catch((undo: unknown) => deps.onError?.(undo));
          throw err;
        }
      }
      await changed(t.app_id);
      return toTrigger(t);
    },

    async createScheduleTrigger(req) {
      const row = await mustGet(req.functionId);
      const timezone = req.timezone || "UTC";
      const missed = (req.missedTicks || "skip") as "skip" | "run_once";
      const v = new Violations();
      const cron = req.cron.trim().replace(/\s+/g, " ");
      // Bounded before parsing: the parser's work grows with the text.
      if (cron.length > 200) v.add("cron", "A cron expression is at most 200 characters.");
      if (timezone.length > 64) v.add("timezone", "Unknown time zone (an IANA name such as Europe/Berlin).");
      const next = v.empty ? checkSchedule(v, cron, timezone) : null;
      if (missed !== "skip" && missed !== "run_once") v.add("missed_ticks", "The missed-tick policy is skip or run_once.");
      v.throwIfAny();
      const t = await store.createScheduleTrigger(row.id, { cron, timezone, missedTicks: missed, enabled: req.enabled ?? true, nextRunAt: next! }, config.maxSchedulesPerApp);
      if (!t) throw appError("not_found", "No such function.");
      if (t === "limit") throw appError("failed_precondition", `An application has at most ${config.maxSchedulesPerApp} schedules.`);
      return toTrigger(t);
    },

    async updateScheduleTrigger(req) {
      const before = await store.getTrigger(Number(req.triggerId));
      if (!before) throw appError("not_found", "No such trigger.");
      if (before.kind !== "schedule") throw appError("failed_precondition", "Only a schedule trigger has a cron expression.");
      const v = new Violations();
      const cron = (req.cron ?? before.cron ?? "").trim().replace(/\s+/g, " ");
      const timezone = (req.timezone ?? before.timezone) || "UTC";
      const missed = ((req.missedTicks ?? before.missed_ticks) || "skip") as "skip" | "run_once";
      // Bounded before parsing, as at creation.
      if (cron.length > 200) v.add("cron", "A cron expression is at most 200 characters.");
      if (timezone.length > 64) v.add("timezone", "Unknown time zone (an IANA name such as Europe/Berlin).");
      const next = v.empty ? checkSchedule(v, cron, timezone) : null;
      if (missed !== "skip" && missed !== "run_once") v.add("missed_ticks", "The missed-tick policy is skip or run_once.");
      v.throwIfAny();
      // From the new expression's next tick: ticks of the old one are not caught up.
      const t = await store.updateScheduleTrigger(before.id, { cron, timezone, missedTicks: missed, nextRunAt: next! });
      if (!t) throw appError("not_found", "No such trigger.");
      return toTrigger(t);
    },

    async rotateTriggerSecret(req) {
      const before = await store.getTrigger(Number(req.triggerId));
      if (!before) throw appError("not_found", "No such trigger.");
      if (before.kind !== "http" || before.auth !== "signed") throw appError("failed_precondition", "Only a signed HTTP trigger has a signing secret.");
      const v = new Violations();
      const secret = signingSecretOf(req.signingSecret, v);
      v.throwIfAny();
      const t = await store.setSigningSecret(before.id, secret);
      if (!t) throw appError("not_found", "No such trigger.");
      await changed(t.app_id);
      return toTrigger(t, true);
    },

    async listScheduleRuns(req) {
      const t = await store.getTrigger(Number(req.triggerId));
      if (!t) throw appError("not_found", "No such trigger.");
      const { rows, next } = await pageById(req, async (before, limit) => (await sql.query<{
        id: number; trigger_id: number; scheduled_for: Date; status: string; missed: number; invocation_id: number | null;
        error: string | null; started_at: Date; finished_at: Date | null;
      }>(
        `SELECT id, trigger_id, scheduled_for, status, missed, invocation_id, error, started_at, finished_at
         FROM function_schedule_runs WHERE trigger_id = $1 AND ($2::bigint = 0 OR id < $2) ORDER BY id DESC LIMIT $3`,
        [t.id, before, limit],
      )).rows, MAX_PAGE);
      return {
        runs: rows.map((x) =>
          create(ScheduleRunSchema, {
            id: BigInt(x.id),
            triggerId: BigInt(x.trigger_id),
            scheduledFor: timestampFromDate(new Date(x.scheduled_for)),
            status: x.status,
            missed: x.missed,
            invocationId: BigInt(x.invocation_id ?? 0),
            error: x.error ?? "",
            startedAt: timestampFromDate(new Date(x.started_at)),
            finishedAt: x.finished_at ? timestampFromDate(new Date(x.finished_at)) : undefined,
          }),
        ),
        nextPageToken: next,
      };
    },

    async setTriggerEnabled(req) {
      const before = await store.getTrigger(Number(req.triggerId));
      if (!before) throw appError("not_found", "No such trigger.");
      // A schedule enabled again starts from its next tick: the time it was off is not caught up.
      const nextRunAt = before.kind === "schedule" && req.enabled && !before.enabled
        ? (parseSchedule(before.cron!, before.timezone!).next(new Date()) ?? undefined)
        : undefined;
      const t = await store.setTriggerEnabled(before.id, req.enabled, nextRunAt);
      if (!t) throw appError("not_found", "No such trigger.");
      await changed(t.app_id);
      if (t.kind === "event" && t.source === "db") {
        if (!t.enabled) await releaseCapture(t.app_id);
        else {
          try {
            // Also when it was enabled already: enabling (re)installs the capture at once.
            await installCapture(t.app_id, t.target!);
          } catch (err) {
            if (!before.enabled) await store.setTriggerEnabled(t.id, false).catch((undo: unknown) => deps.onError?.(undo));
            throw err;
          }
        }
      }
      return toTrigger(t);
    },

    async deleteTrigger(req) {
      const t = await store.getTrigger(Number(req.triggerId));
      if (!t || !(await store.deleteTrigger(t.id))) throw appError("not_found", "No such trigger.");
      await changed(t.app_id);
      if (t.kind === "event" && t.source === "db") await releaseCapture(t.app_id);
      return {};
    },

    async listTriggers(req) {
      await mustGet(req.functionId);
      return { triggers: (await store.listTriggers(Number(req.functionId))).map((t) => toTrigger(t)) };
    },

    async runFunction(req) {
      const payload = req.payload ? (toJson(ValueSchema, req.payload) as JsonValue) : null;
      const report = await runtime.runManual(Number(req.functionId), req.version, payload);
      const bodyText = report.response ? report.response.body.toString("utf8") : "";
      let result: JsonValue | undefined;
      if (report.response && /json/i.test(report.response.headers["content-type"] ?? "")) {
        try {
          result = JSON.parse(bodyText) as JsonValue;
        } catch {
          result = undefined;
        }
      }
      return create(RunFunctionResponseSchema, {
        invocationId: BigInt(report.invocationId ?? 0),
        version: report.version,
        status: report.status,
        headers: report.response?.headers ?? {},
        body: bodyText,
        result: result === undefined ? undefined : fromJson(ValueSchema, result),
        durationMs: report.durationMs,
        outcome: report.outcome,
        error: report.error ?? "",
        errorName: report.errorName,
        errorMessage: report.errorMessage,
        errorStack: report.errorStack,
        logs: report.logs.map((l) => create(LogLineSchema, l)),
        logsTruncated: report.logsTruncated,
      });
    },

    async listInvocations(req) {
      await mustGet(req.functionId);
      // This process's buffered records first, so a run is listed right after it.
      await recorder.flush();
      const { rows, next } = await pageById(req, (afterId, limit) => listInvocations(sql, Number(req.functionId), afterId, limit), MAX_PAGE);
      return { invocations: rows.map(toInvocation), nextPageToken: next };
    },

    async *followInvocations(req, ctx) {
      const functionId = Number(req.functionId);
      await mustGet(functionId);
      let after = req.afterId > 0n ? Number(req.afterId) : await lastInvocationId(sql, functionId);
      const pollMs = deps.followPollMs ?? 250;
      while (!ctx.signal.aborted) {
        // This process's buffered records first (the others' flush on their own, within their flush interval).
        await recorder.flush();
        const rows = await invocationsAfter(sql, functionId, after, 100);
        for (const r of rows) {
          after = Number(r.id);
          yield toInvocation(r);
        }
        if (rows.length < 100) {
          await sleep(pollMs, ctx.signal);
          // Deleted meanwhile: the stream ends.
          if (!ctx.signal.aborted && !(await store.get(functionId))) return;
        }
      }
    },

    async listKvEntries(req) {
      const appId = Number(req.appId);
      await planOf(appId);
      const limit = req.pageSize < 0 ? -1 : req.pageSize || 100;
      const page = await kv.list(appId, { prefix: req.prefix, limit: Math.min(limit, kv.limits.maxListLimit), cursor: req.pageToken || undefined });
      const usage = await kv.usage(appId);
      return {
        entries: page.entries.map((e) => create(KvEntrySchema, {
          key: e.key,
          size: e.size,
          expiresAt: e.expires_at ? timestampFromDate(new Date(e.expires_at)) : undefined,
          updatedAt: timestampFromDate(new Date(e.updated_at)),
        })),
        nextPageToken: page.cursor ?? "",
        totalBytes: BigInt(usage.bytes),
        totalKeys: BigInt(usage.keys),
        maxBytes: BigInt(kv.limits.maxBytesPerApp),
      };
    },

    async getKvEntry(req) {
      const appId = Number(req.appId);
      await planOf(appId);
      const e = await kv.getEntry(appId, req.key);
      if (!e) throw appError("not_found", "No such key (or it has expired).");
      return create(KvEntrySchema, {
        key: e.key,
        value: e.value ?? "",
        size: e.size,
        expiresAt: e.expires_at ? timestampFromDate(new Date(e.expires_at)) : undefined,
        updatedAt: timestampFromDate(new Date(e.updated_at)),
      });
    },

    async deleteKvEntry(req) {
      const appId = Number(req.appId);
      await planOf(appId);
      return { deleted: await kv.delete(appId, req.key) };
    },

    async getEgressPolicy(req) {
      const appId = Number(req.appId);
      await planOf(appId);
      return egressMessage(appId, await deps.egress.get(appId));
    },

    async setEgressPolicy(req) {
      const appId = Number(req.appId);
      await planOf(appId);
      const p = await deps.egress.set(appId, { allowHosts: req.allowHosts, allowPrivate: req.allowPrivate });
      // the other processes drop their cached policy (kind functions)
      await deps.announce?.(appId);
      return egressMessage(appId, p);
    },

    async listFunctionDeadLetters(req) {
      const appId = Number(req.appId);
      await planOf(appId);
      const functionId = await functionFilter(appId, req.functionId);
      const page = await deadLetterStore().listDeadLetters({ appId, functionId, pageSize: pageLimit(req.pageSize, MAX_PAGE), pageToken: req.pageToken });
      return { deadLetters: page.entries.map(toDeadLetter), nextPageToken: page.nextPageToken };
    },

    async replayFunctionDeadLetters(req) {
      const appId = Number(req.appId);
      await planOf(appId);
      const functionId = await functionFilter(appId, req.functionId);
      const replayed = await deadLetterStore().replayDeadLetters(appId, { ...(req.ids.length > 0 ? { ids: req.ids } : {}), functionId });
      return { replayed };
    },
  };
}

function egressMessage(appId: number, p: StoredEgressPolicy) {
  return create(EgressPolicySchema, {
    appId: BigInt(appId),
    allowHosts: [...p.allowHosts],
    allowPrivate: p.allowPrivate,
    updatedAt: p.updatedAt ? timestampFromDate(p.updatedAt) : undefined,
  });
}
