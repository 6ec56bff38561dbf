// The capability modules the server runs besides identity.
import type { PulsebaseModule } from "../app/module.js";
import type { Shared } from "../app/build.js";

export async function createModules(_shared: Shared): Promise<PulsebaseModule[]> {
  return [];
}
