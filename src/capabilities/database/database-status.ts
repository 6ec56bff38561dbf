// The life cycle of a linked database. Every change goes through
// `allowedFrom`, and the store applies it with a conditional UPDATE, so a
// refused transition never half-happens (even with concurrent operators).
//
//   pending -> provisioning -> active <-> suspended
//   provisioning -> pending           (provisioning failed; retry later)
//   pending | active | suspended -> deleting -> deleted
export const DATABASE_STATUSES = ["pending", "provisioning", "active", "suspended", "deleting", "deleted"] as const;
export type DatabaseStatus = (typeof DATABASE_STATUSES)[number];

export const TRANSITIONS: Readonly<Record<DatabaseStatus, readonly DatabaseStatus[]>> = {
  pending: ["provisioning", "deleting"],
  provisioning: ["active", "pending"],
  active: ["suspended", "deleting"],
  suspended: ["active", "deleting"],
  deleting: ["deleted"],
  deleted: [],
};

export function canTransition(from: DatabaseStatus, to: DatabaseStatus): boolean {
  return TRANSITIONS[from].includes(to);
}

/** The statuses a database may be in to move to `to`. */
export function allowedFrom(to: DatabaseStatus): DatabaseStatus[] {
  return DATABASE_STATUSES.filter((s) => TRANSITIONS[s].includes(to));
}
