// An application's plan: named limits read by functions and the CMS. Stored
// as JSON on the app with the proto's field names (camelCase).
export interface PlanLimits {
  name: string;
  functionsEnabled: boolean;
  /** 0 = unlimited */
  functionInvocationsPerMinute: number;
  /** 0 = unlimited */
  cmsRequestsPerDay: number;
  /** 0 = unlimited */
  cmsRequestsPerSecond: number;
  functionMaxTimeoutMs: number;
  functionMaxMemoryMb: number;
}

export const FREE_PLAN: PlanLimits = {
  name: "free",
  functionsEnabled: true,
  functionInvocationsPerMinute: 6000,
  cmsRequestsPerDay: 1_000_000,
  cmsRequestsPerSecond: 0,
  functionMaxTimeoutMs: 10_000,
  functionMaxMemoryMb: 128,
};

/** Fills unset (zero/empty) values of a partial plan from the free plan. */
export function normalisePlan(p: Partial<PlanLimits> | undefined): PlanLimits {
  if (!p) return { ...FREE_PLAN };
  return {
    name: p.name || FREE_PLAN.name,
    functionsEnabled: p.functionsEnabled ?? FREE_PLAN.functionsEnabled,
    functionInvocationsPerMinute: Number(p.functionInvocationsPerMinute ?? FREE_PLAN.functionInvocationsPerMinute),
    cmsRequestsPerDay: Number(p.cmsRequestsPerDay ?? FREE_PLAN.cmsRequestsPerDay),
    cmsRequestsPerSecond: Number(p.cmsRequestsPerSecond ?? FREE_PLAN.cmsRequestsPerSecond),
    functionMaxTimeoutMs: Number(p.functionMaxTimeoutMs || FREE_PLAN.functionMaxTimeoutMs),
    functionMaxMemoryMb: Number(p.functionMaxMemoryMb || FREE_PLAN.functionMaxMemoryMb),
  };
}
