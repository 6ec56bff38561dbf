// Operator-side life cycle of linked databases: create and provision,
// link/unlink, suspend/resume, delete (data removed only once no application
// links the database any more).
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { appError, Violations } from "../../kernel/errors.js";
import type { DatabaseStatus } from "./database-status.js";
import type { DatabaseKind, DatabaseRecord, DatabaseStore } from "./database-store.js";
import type { EnginePool } from "../../infra/libsql/engine-pool.js";
import type { RemoteExecutor } from "../../infra/libsql/remote-executor.js";
import { checkRemote, provisionEmbedded, removeEmbedded } from "./provisioner.js";

export interface DatabaseManagerDeps {
  store: DatabaseStore;
  /** Closes every connection to an embedded file before it is removed. */
  files: Pick<EnginePool, "closeFile">;
  /** Its client of a deleted remote database is closed. */
  remote?: RemoteExecutor;
  dataDir: string;
  remoteCheckTimeoutMs?: number;
  /** Called after every change so the query path drops cached lookups. */
  onChange?: () => void;
}

export interface CreateDatabaseInput {
  teamId: number;
  name: string;
  kind?: DatabaseKind;
  url?: string;
  authToken?: string;
}

export interface DatabaseManager {
  create(input: CreateDatabaseInput): Promise<DatabaseRecord>;
  provision(id: number): Promise<DatabaseRecord>;
  get(id: number): Promise<DatabaseRecord>;
  list(teamId: number, includeDeleted?: boolean): Promise<DatabaseRecord[]>;
  link(databaseId: number, appId: number): Promise<DatabaseRecord>;
  unlink(databaseId: number, appId: number): Promise<DatabaseRecord>;
  suspend(id: number): Promise<DatabaseRecord>;
  resume(id: number): Promise<DatabaseRecord>;
  delete(id: number): Promise<DatabaseRecord>;
}

const REMOTE_SCHEMES = ["libsql:", "http:", "https:", "ws:", "wss:"];

export function createDatabaseManager(deps: DatabaseManagerDeps): DatabaseManager {
  const { store } = deps;
  const changed = () => deps.onChange?.();

  async function get(id: number): Promise<DatabaseRecord> {
    const db = await store.get(id);
    if (!db) throw appError("not_found", "No database with this id.");
    return db;
  }

  async function move(id: number, to: DatabaseStatus, statusMessage?: string): Promise<DatabaseRecord> {
    const db = await store.transition(id, to, statusMessage);
    if (db) {
      changed();
      return db;
    }
    const now = await get(id);
    throw appError("failed_precondition", `A ${now.status} database cannot become ${to}.`);
  }

  async function provision(id: number): Promise<DatabaseRecord> {
    const db = await move(id, "provisioning");
    try {
      if (db.kind === "embedded") {
        let file = db.filePath;
        if (!file) {
          file = join("databases", `${db.id}-${randomBytes(6).toString("hex")}.db`);
          await store.setFilePath(db.id, file);
        }
        await provisionEmbedded(join(deps.dataDir, file));
      } else {
        await checkRemote(db.url ?? "", db.authToken ?? "", deps.remoteCheckTimeoutMs ?? 5000);
      }
    } catch (e) {
      // back to pending with the reason; ProvisionDatabase retries
      return move(id, "pending", `provisioning failed: ${e instanceof Error ? e.message : String(e)}`);
    }
    return move(id, "active");
  }

  /** Removes the data of a deleting database with no links left. */
  async function finishDelete(db: DatabaseRecord): Promise<DatabaseRecord> {
    if (db.status !== "deleting" || db.linkedAppIds.length > 0) return db;
    if (db.kind === "embedded" && db.filePath) {
      const path = join(deps.dataDir, db.filePath);
      await deps.files.closeFile(path);
      await removeEmbedded(path);
    }
    if (db.kind === "remote") deps.remote?.forget(db.id);
    return move(db.id, "deleted");
  }

  return {
    async create(input) {
      const v = new Violations();
      const name = (input.name ?? "").trim();
      const kind = input.kind ?? "embedded";
      if (!Number.isSafeInteger(input.teamId) || input.teamId <= 0) v.add("team_id", "The team_id field is required.");
      if (!name) v.add("name", "The name field is required.");
      else if (name.length > 255) v.add("name", "The name may not be longer than 255 characters.");
      if (kind === "remote") {
        let scheme = "";
        try {
          scheme = new URL(input.url ?? "").protocol;
        } catch {
          // reported below
        }
        if (!REMOTE_SCHEMES.includes(scheme)) v.add("url", "A remote database needs a libsql://, https:// or wss:// URL.");
      }
      v.throwIfAny();
      const db = await store.create({ teamId: input.teamId, name, kind, url: input.url, authToken: input.authToken });
      return provision(db.id);
    },
    provision,
    get,
    list: (teamId, includeDeleted = false) => store.listByTeam(teamId, includeDeleted),
    async link(databaseId, appId) {
      const db = await get(databaseId);
      const team = await store.appTeam(appId);
      if (team === undefined) throw appError("not_found", "No application with this id.");
      if (team !== db.teamId) {
        throw appError("permission_denied", "The application belongs to another team than the database.");
      }
      if (db.status === "deleting" || db.status === "deleted") {
        throw appError("failed_precondition", `A ${db.status} database cannot be linked.`);
      }
      await store.link(databaseId, appId);
      changed();
      return get(databaseId);
    },
    async unlink(databaseId, appId) {
      await get(databaseId);
      if (!(await store.unlink(databaseId, appId))) {
        throw appError("not_found", "The application is not linked to this database.");
      }
      changed();
      return finishDelete(await get(databaseId));
    },
    suspend: (id) => move(id, "suspended"),
    resume: (id) => move(id, "active"),
    async delete(id) {
      const db = await move(id, "deleting");
      return finishDelete(db);
    },
  };
}
