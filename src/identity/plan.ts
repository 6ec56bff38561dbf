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

/**
 * In-process notice of plan changes: SetAppPlan calls changed(appId) after
 * storing the plan, and the caches that hold plans (the functions runtime's
 * resolutions, the CMS key resolver) drop what they hold for it, so the
 * next request of this process uses the new plan. Other processes keep theirs until their cache expires (1 s for
 * functions, 5 s for the CMS).
 */
export class PlanChanges {
  private readonly listeners = new Set<(appId: number) => void>();

  /** Registers a listener; returns the function that removes it. */
  subscribe(fn: (appId: number) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  changed(appId: number): void {
    for (const fn of this.listeners) fn(appId);
  }
}
