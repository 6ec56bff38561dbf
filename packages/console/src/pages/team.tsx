// Team: members and roles, invitations by link, the audit log; the team
// and the audit log's scope are in the URL.
import { useState } from "react";
import type { AuditEntry, Invitation } from "../../../../gen/pulsebase/admin/v1/account_pb.js";
import { Role } from "../../../../gen/pulsebase/common/v1/options_pb.js";
import { api } from "../api";
import { useQueryState } from "../router";
import { useSession } from "../session";
import { Async, ErrorBox, Field, fmtTime, Table, useAction, useAsync } from "../ui";

const ROLES: [Role, string][] = [
  [Role.VIEWER, "viewer"],
  [Role.DEVELOPER, "developer"],
  [Role.OWNER, "owner"],
];

export function TeamPage() {
  const session = useSession();
  const teams = session.me.teams;
  // The team and the audit log's scope are in the URL: /team?team=2&scope=all
  const [teamParam, setTeamParam] = useQueryState("team");
  const teamId = teams.find((t) => String(t.teamId) === teamParam)?.teamId ?? teams[0]?.teamId;
  const setTeamId = (id: bigint) => setTeamParam(String(id));
  const [newTeam, setNewTeam] = useState("");
  const createTeam = useAction(async () => {
    // The instance administrator creates teams; the first member listed is the team's owner.
    const t = await api.identity.createTeam({ name: newTeam, memberUserIds: session.me.userId ? [session.me.userId] : [] });
    setNewTeam("");
    await session.refresh();
    setTeamId(t.id);
  });
  const teamForm = session.me.admin && (
    <form
      className="row-form"
      onSubmit={(e) => {
        e.preventDefault();
        void createTeam.run();
      }}
    >
      <Field label="New team">
        <input name="team-name" required value={newTeam} onChange={(e) => setNewTeam(e.target.value)} />
      </Field>
      <button type="submit" disabled={createTeam.busy}>
        Create team
      </button>
      <ErrorBox error={createTeam.error} />
    </form>
  );
  if (teamId === undefined) return <div className="page empty">You are not in a team yet. {teamForm}</div>;
  const isOwner = session.roleIn(teamId) >= Role.OWNER;
  return (
    <div className="page">
      <h1>Team</h1>
      {teamForm}
      <Field label="Team">
        <select aria-label="Team" value={String(teamId)} onChange={(e) => setTeamId(BigInt(e.target.value))}>
          {teams.map((t) => (
            <option key={String(t.teamId)} value={String(t.teamId)}>
              {t.teamName}
            </option>
          ))}
        </select>
      </Field>
      <Members key={`m${teamId}`} teamId={teamId} isOwner={isOwner} />
      {isOwner && <Invitations key={`i${teamId}`} teamId={teamId} />}
      <AuditLog key={`a${teamId}`} teamId={teamId} all={session.me.admin} />
    </div>
  );
}

function Members({ teamId, isOwner }: { teamId: bigint; isOwner: boolean }) {
  const { me } = useSession();
  const list = useAsync(() => api.account.listMembers({ teamId }), [teamId]);
  const setRole = useAction(async (userId: bigint, role: Role) => {
    await api.account.setMemberRole({ teamId, userId, role });
    list.reload();
  });
  const remove = useAction(async (userId: bigint) => {
    if (!window.confirm("Remove this member from the team?")) return;
    await api.account.removeMember({ teamId, userId });
    list.reload();
  });
  return (
    <section className="card">
      <h2>Members</h2>
      <ErrorBox error={setRole.error ?? remove.error} />
      <Async state={list} isEmpty={(d) => d.members.length === 0} empty="No members.">
        {(d) => (
          <Table
            label="Members"
            rows={d.members}
            rowKey={(m) => String(m.userId)}
            columns={[
              { label: "Name", cell: (m) => m.name },
              { label: "Email", cell: (m) => m.email },
              {
                label: "Role",
                cell: (m) =>
                  isOwner && m.userId !== me.userId ? (
                    <select aria-label={`Role of ${m.email}`} value={m.role} onChange={(e) => void setRole.run(m.userId, Number(e.target.value) as Role)}>
                      {ROLES.map(([r, n]) => (
                        <option key={r} value={r}>
                          {n}
                        </option>
                      ))}
                    </select>
                  ) : (
                    Role[m.role]?.toLowerCase()
                  ),
              },
              {
                label: "",
                cell: (m) =>
                  isOwner &&
                  m.userId !== me.userId && (
                    <button type="button" className="danger" onClick={() => void remove.run(m.userId)}>
                      Remove
                    </button>
                  ),
              },
            ]}
          />
        )}
      </Async>
    </section>
  );
}

function Invitations({ teamId }: { teamId: bigint }) {
  const list = useAsync(() => api.account.listInvitations({ teamId }), [teamId]);
  const [email, setEmail] = useState("");
  const [role, setRole] = useState<Role>(Role.VIEWER);
  const [made, setMade] = useState<Invitation>();
  const invite = useAction(async () => {
    setMade(await api.account.createInvitation({ teamId, email, role }));
    setEmail("");
    list.reload();
  });
  const revoke = useAction(async (id: bigint) => {
    await api.account.revokeInvitation({ teamId, invitationId: id });
    list.reload();
  });
  const link = made ? `${window.location.origin}/invite#token=${made.token}` : "";
  return (
    <section className="card">
      <h2>Invitations</h2>
      <form
        className="row-form"
        onSubmit={(e) => {
          e.preventDefault();
          void invite.run();
        }}
      >
        <Field label="Email">
          <input type="email" name="invite-email" required value={email} onChange={(e) => setEmail(e.target.value)} />
        </Field>
        <Field label="Role">
          <select name="invite-role" value={role} onChange={(e) => setRole(Number(e.target.value) as Role)}>
            {ROLES.map(([r, n]) => (
              <option key={r} value={r}>
                {n}
              </option>
            ))}
          </select>
        </Field>
        <button type="submit" className="primary" disabled={invite.busy}>
          Create invitation link
        </button>
      </form>
      <ErrorBox error={invite.error ?? revoke.error} />
      {made && (
        <div className="notice" role="status">
          Send this one-time link to {made.email} (valid 7 days; it is shown only now):
          <input readOnly className="mono wide" aria-label="Invitation link" data-testid="invitation-link" value={link} onFocus={(e) => e.target.select()} />
          <button type="button" onClick={() => void navigator.clipboard?.writeText(link)}>
            Copy
          </button>
        </div>
      )}
      <Async state={list} isEmpty={(d) => d.invitations.length === 0} empty="No invitations.">
        {(d) => (
          <Table
            label="Invitations"
            rows={d.invitations}
            rowKey={(i) => String(i.id)}
            columns={[
              { label: "Email", cell: (i) => i.email },
              { label: "Role", cell: (i) => Role[i.role]?.toLowerCase() },
              { label: "Created", cell: (i) => fmtTime(i.createdAt) },
              { label: "Status", cell: (i) => (i.acceptedAt ? `accepted ${fmtTime(i.acceptedAt)}` : `pending until ${fmtTime(i.expiresAt)}`) },
              {
                label: "",
                cell: (i) =>
                  !i.acceptedAt && (
                    <button type="button" onClick={() => void revoke.run(i.id)}>
                      Revoke
                    </button>
                  ),
              },
            ]}
          />
        )}
      </Async>
    </section>
  );
}

function AuditLog({ teamId, all }: { teamId: bigint; all: boolean }) {
  const [scopeParam, setScopeParam] = useQueryState("scope", "team");
  const scope = all && scopeParam === "all" ? "all" : "team";
  const setScope = (v: "team" | "all") => setScopeParam(v);
  const [tokens, setTokens] = useState<string[]>([""]);
  const token = tokens.at(-1)!;
  const list = useAsync(() => api.account.listAuditLog({ teamId: scope === "all" ? 0n : teamId, pageSize: 50, pageToken: token }), [teamId, scope, token]);
  return (
    <section className="card">
      <h2>Audit log</h2>
      {all && (
        <Field label="Show">
          <select value={scope} onChange={(e) => (setScope(e.target.value as "team" | "all"), setTokens([""]))}>
            <option value="team">This team</option>
            <option value="all">Every team and sign-ins</option>
          </select>
        </Field>
      )}
      <Async state={list} isEmpty={(d) => d.entries.length === 0} empty="No changes recorded yet.">
        {(d) => (
          <>
            <Table<AuditEntry>
              label="Audit log"
              rows={d.entries}
              rowKey={(e) => String(e.id)}
              columns={[
                { label: "When", cell: (e) => fmtTime(e.at) },
                { label: "Who", cell: (e) => e.actorEmail || (e.actorKind === "service" ? "operator token" : e.actorKind) },
                { label: "What", cell: (e) => e.method.split("/")[1] },
                { label: "Resource", cell: (e) => Object.entries(e.resource).map(([k, v]) => `${k}=${v}`).join(" ") },
                { label: "Outcome", cell: (e) => <span className={`badge ${e.outcome === "ok" ? "ok" : "error"}`}>{e.outcome}</span> },
                { label: "From", cell: (e) => e.address },
              ]}
            />
            <div className="pager">
              <button type="button" disabled={tokens.length < 2} onClick={() => setTokens(tokens.slice(0, -1))}>
                Newer
              </button>
              <button type="button" disabled={!d.nextPageToken} onClick={() => setTokens([...tokens, d.nextPageToken])}>
                Older
              </button>
            </div>
          </>
        )}
      </Async>
    </section>
  );
}
