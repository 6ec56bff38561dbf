// What other capabilities may use of the identity capability
// (docs/architecture.md, "Layers"): an application's plan.
export { normalisePlan, type PlanLimits } from "./plan.js";
