// pulsebase.admin.v1.DatabaseService (operator API, admin listener only).
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  DatabaseKind,
  DatabaseSchema,
  DatabaseService,
  DatabaseStatus,
  ListDatabasesResponseSchema,
  type Database,
} from "../../../gen/pulsebase/admin/v1/database_pb.js";
import type { DatabaseStatus as Status } from "./database-status.js";
import type { DatabaseManager } from "./database-manager.js";
import type { DatabaseRecord } from "./database-store.js";

const statusToProto: Record<Status, DatabaseStatus> = {
  pending: DatabaseStatus.PENDING,
  provisioning: DatabaseStatus.PROVISIONING,
  active: DatabaseStatus.ACTIVE,
  suspended: DatabaseStatus.SUSPENDED,
  deleting: DatabaseStatus.DELETING,
  deleted: DatabaseStatus.DELETED,
};

export function databaseToProto(d: DatabaseRecord): Database {
  return create(DatabaseSchema, {
    id: BigInt(d.id),
    teamId: BigInt(d.teamId),
    name: d.name,
    kind: d.kind === "remote" ? DatabaseKind.REMOTE : DatabaseKind.EMBEDDED,
    status: statusToProto[d.status],
    statusMessage: d.statusMessage,
    filePath: d.filePath ?? "",
    url: d.url ?? "",
    linkedAppIds: d.linkedAppIds.map(BigInt),
    createdAt: timestampFromDate(d.createdAt),
    updatedAt: timestampFromDate(d.updatedAt),
  });
}

export function createDatabaseAdminServiceImpl(deps: { manager: DatabaseManager }): ServiceImpl<typeof DatabaseService> {
  const m = deps.manager;
  return {
    async createDatabase(req) {
      const kind = req.kind === DatabaseKind.REMOTE ? "remote" : "embedded";
      return databaseToProto(await m.create({ teamId: Number(req.teamId), name: req.name, kind, url: req.url, authToken: req.authToken }));
    },
    provisionDatabase: async (req) => databaseToProto(await m.provision(Number(req.id))),
    getDatabase: async (req) => databaseToProto(await m.get(Number(req.id))),
    async listDatabases(req) {
      const list = await m.list(Number(req.teamId), req.includeDeleted);
      return create(ListDatabasesResponseSchema, { databases: list.map(databaseToProto) });
    },
    linkDatabase: async (req) => databaseToProto(await m.link(Number(req.databaseId), Number(req.appId))),
    unlinkDatabase: async (req) => databaseToProto(await m.unlink(Number(req.databaseId), Number(req.appId))),
    suspendDatabase: async (req) => databaseToProto(await m.suspend(Number(req.id))),
    resumeDatabase: async (req) => databaseToProto(await m.resume(Number(req.id))),
    deleteDatabase: async (req) => databaseToProto(await m.delete(Number(req.id))),
  };
}
