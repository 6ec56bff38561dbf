// pulsebase.platform.v1.ConsumerService: registration, update, token issue.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { ConsumerSchema, ConsumerService, type Consumer } from "../../../gen/pulsebase/platform/v1/consumer_pb.js";
import { appError, Violations } from "../../kernel/errors.js";
import { consumerOf, kClientAddress } from "../../kernel/principal.js";
import type { TokenIssueLimiter } from "./token-issue-limiter.js";
import type { Authenticator } from "./authenticator.js";
import type { ConsumerRow, IdentityStore } from "./identity-store.js";
import type { TokenService } from "./tokens.js";
import { checkCountry, checkEmail, checkLanguage, checkOptionalString, requireString } from "./consumer-validation.js";

export interface ConsumerServiceDeps {
  store: IdentityStore;
  tokens: TokenService;
  auth: Authenticator;
  limiter: TokenIssueLimiter;
}

function toConsumer(row: ConsumerRow, appKey: string, extra: Partial<Consumer> = {}): Consumer {
  return create(ConsumerSchema, {
    id: BigInt(row.id),
    appKey,
    userId: row.user_id,
    userEmail: row.user_email ?? undefined,
    deviceId: row.device_id,
    deviceModel: row.device_model,
    os: row.os,
    country: row.country,
    language: row.language,
    ...extra,
  });
}

export function createConsumerServiceImpl({ store, tokens, auth, limiter }: ConsumerServiceDeps): ServiceImpl<typeof ConsumerService> {
  return {
    async createConsumer(req) {
      const v = new Violations();
      requireString(v, "app_key", req.appKey);
      requireString(v, "device_id", req.deviceId);
      requireString(v, "device_model", req.deviceModel);
      requireString(v, "user_id", req.userId);
      requireString(v, "os", req.os);
      const country = checkCountry(v, req.country, true);
      const language = checkLanguage(v, req.language, true);
      checkEmail(v, req.userEmail);
      v.throwIfAny();
      const app = await store.getAppByKey(req.appKey);
      if (!app) throw appError("validation_failed", "The app_key is invalid.", { fields: { app_key: ["The selected app_key is invalid."] } });
      const row = await store.upsertConsumer(app.id, {
        user_id: req.userId,
        user_email: req.userEmail || null,
        device_id: req.deviceId,
        device_model: req.deviceModel,
        os: req.os,
        country: country!,
        language: language!,
      });
      auth.forgetConsumer(row.id);
      const token = await tokens.issue(BigInt(row.id), app.app_key);
      return toConsumer(row, app.app_key, { token });
    },

    async updateConsumer(req, ctx) {
      const me = consumerOf(ctx);
      // Another consumer's id is answered like a missing one.
      if (req.id !== BigInt(me.consumerId)) throw appError("not_found", "Consumer not found.");
      const v = new Violations();
      checkOptionalString(v, "user_id", req.userId);
      checkEmail(v, req.userEmail);
      const country = checkCountry(v, req.country, false);
      const language = checkLanguage(v, req.language, false);
      v.throwIfAny();
      const row = await store.updateConsumer(me.consumerId, me.appId, {
        user_id: req.userId,
        user_email: req.userEmail || undefined,
        country,
        language,
      });
      if (!row) throw appError("not_found", "Consumer not found.");
      auth.forgetConsumer(row.id);
      return toConsumer(row, me.appKey, { updatedAt: timestampFromDate(row.updated_at) });
    },

    async issueToken(req, ctx) {
      const address = ctx.values.get(kClientAddress);
      // Every attempt counts against the caller's address, failed ones too;
      // a consumer's own bucket only once the request proved it may name it.
      await limiter.attempt(address);
      const v = new Violations();
      requireString(v, "app_key", req.appKey);
      const raw = req.consumerId.trim();
      if (raw === "") v.add("consumer_id", "The consumer_id field is required.");
      else if (!/^\d{1,18}$/.test(raw)) v.add("consumer_id", "The consumer_id field must be an integer.");
      v.throwIfAny();
      // (0123 is consumer 123)
      const consumerId = Number(raw);
      const app = await store.getAppByKey(req.appKey);
      const consumer = app ? await store.getConsumer(consumerId) : undefined;
      // Same answer for an unknown key and an unknown consumer: nothing to probe.
      if (!app || !consumer || consumer.app_id !== app.id) throw appError("not_found", "Consumer not found.");
      if (app.strict_token_mode) {
        if (!req.deviceId) throw appError("validation_failed", "The device_id field is required.", { fields: { device_id: ["The device_id field is required."] } });
        if (req.deviceId !== consumer.device_id) throw appError("not_found", "Consumer not found.");
      }
      await limiter.mint(address, app.id, consumer.id, !app.strict_token_mode);
      return { token: await tokens.issue(BigInt(consumer.id), app.app_key) };
    },
  };
}
