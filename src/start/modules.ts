// The capability modules the server runs besides identity.
import type { PulsebaseModule } from "../app/module.js";
import type { Shared } from "../app/build.js";
import { join } from "node:path";
import { createDatabasePulsebaseModule } from "../database/pulsebase-module.js";
import { createCmsModule } from "../cms/cms-module.js";

export async function createModules(shared: Shared): Promise<PulsebaseModule[]> {
  const { config, sql } = shared;
  const database = await createDatabasePulsebaseModule({ dataDir: config.dataDir }, { sql });
  const cms = createCmsModule({
    sql,
    natsUrl: config.natsUrl,
    logger: shared.logger,
    config: {
      mediaBaseUrl: config.mediaBaseUrl ?? `https://localhost:${config.httpsPort}`,
      mediaDir: join(config.dataDir, "media"),
    },
  });
  return [database, cms];
}
