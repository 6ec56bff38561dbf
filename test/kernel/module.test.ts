// binding() keeps connect-es's type check: an implementation binds to its
// own service only, and fast paths name methods of that service.
import { describe, expect, it } from "vitest";
import type { ServiceImpl } from "@connectrpc/connect";
import { DatabaseService as AdminDatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { DatabaseService } from "../../gen/pulsebase/platform/v1/database_pb.js";
import { binding, type RestJsonPath } from "../../src/kernel/module.js";

const device = { query: () => ({}), batch: () => ({}) } as unknown as ServiceImpl<typeof DatabaseService>;
const admin = {} as ServiceImpl<typeof AdminDatabaseService>;
const json: RestJsonPath = () => undefined;

describe("binding", () => {
  it("takes the service's own implementation and fast paths", () => {
    const b = binding(DatabaseService, device, { jsonPaths: { query: json } });
    expect(b.service).toBe(DatabaseService);
    expect(b.impl).toBe(device);
    expect(b.jsonPaths?.["query"]).toBe(json);
  });

  it("does not compile with another service's implementation or method names", () => {
    // @ts-expect-error the operator DatabaseService's implementation is not the device one's
    binding(DatabaseService, admin);
    // @ts-expect-error the device DatabaseService has no method "nope"
    binding(DatabaseService, device, { jsonPaths: { nope: json } });
  });
});
