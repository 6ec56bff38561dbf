// One Connect transport to the admin API (the same generated code as the
// server and CLI). The session lives in an HttpOnly cookie the browser sends
// by itself; the CSRF token is kept in memory only (never localStorage) and
// sent as X-CSRF-Token on every call.
import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { AccessRulesService } from "../../../gen/pulsebase/admin/v1/access_rules_pb.js";
import { AccountService } from "../../../gen/pulsebase/admin/v1/account_pb.js";
import { AnalyticsService } from "../../../gen/pulsebase/admin/v1/analytics_pb.js";
import { CmsService } from "../../../gen/pulsebase/admin/v1/cms_pb.js";
import { DatabaseService } from "../../../gen/pulsebase/admin/v1/database_pb.js";
import { FunctionService } from "../../../gen/pulsebase/admin/v1/functions_pb.js";
import { IdentityService } from "../../../gen/pulsebase/admin/v1/identity_pb.js";
import { OverviewService } from "../../../gen/pulsebase/admin/v1/overview_pb.js";
import { RealtimeAdminService } from "../../../gen/pulsebase/admin/v1/realtime_pb.js";
import { SqlService } from "../../../gen/pulsebase/admin/v1/sql_pb.js";

let csrf = "";
let onSignedOut: () => void = () => {};

export function setCsrf(token: string): void {
  csrf = token;
}

export function whenSignedOut(fn: () => void): void {
  onSignedOut = fn;
}

const transport = createConnectTransport({
  baseUrl: window.location.origin,
  interceptors: [
    (next) => async (req) => {
      if (csrf) req.header.set("x-csrf-token", csrf);
      try {
        return await next(req);
      } catch (e) {
        const err = ConnectError.from(e);
        if (err.code === Code.Unauthenticated && req.method.name !== "Login" && req.method.name !== "GetMe" && req.method.name !== "AcceptInvitation") onSignedOut();
        throw err;
      }
    },
  ],
});

const client = <S extends DescService>(s: S): Client<S> => createClient(s, transport);

export const api = {
  account: client(AccountService),
  identity: client(IdentityService),
  analytics: client(AnalyticsService),
  cms: client(CmsService),
  databases: client(DatabaseService),
  functions: client(FunctionService),
  sql: client(SqlService),
  rules: client(AccessRulesService),
  overview: client(OverviewService),
  realtime: client(RealtimeAdminService),
};

/** The message to show for a failed call, with field errors when any. */
export function errorText(e: unknown): string {
  const err = ConnectError.from(e);
  return err.rawMessage || Code[err.code] || "Request failed";
}

export function isCode(e: unknown, code: Code): boolean {
  return ConnectError.from(e).code === code;
}
