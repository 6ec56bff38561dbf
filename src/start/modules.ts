// The capability modules the server runs besides identity.
import type { PulsebaseModule } from "../app/module.js";
import type { Shared } from "../app/build.js";
import { createDatabasePulsebaseModule } from "../database/pulsebase-module.js";

export async function createModules(shared: Shared): Promise<PulsebaseModule[]> {
  const { config, sql } = shared;
  const database = await createDatabasePulsebaseModule({ dataDir: config.dataDir }, { sql });
  return [database];
}
