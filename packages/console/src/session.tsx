// Signing in: the session bootstraps with GetMe (the cookie alone), and the
// first-owner setup, sign-in, invitation and set-password pages.
import { createContext, useContext, useEffect, useState, type FormEvent, type ReactNode } from "react";
import { Code } from "@connectrpc/connect";
import type { Me } from "../../../gen/pulsebase/admin/v1/account_pb.js";
import { Role } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { api, isCode, setCsrf, whenSignedOut } from "./api";
import { useRouter } from "./router";
import { ErrorBox, Field, Loading, useAction, useAsync } from "./ui";

interface Session {
  me: Me;
  refresh(): Promise<void>;
  signOut(everywhere?: boolean): Promise<void>;
  /** The caller's role in a team. */
  roleIn(teamId: bigint | number): Role;
}

const SessionContext = createContext<Session | undefined>(undefined);

export function useSession(): Session {
  const s = useContext(SessionContext);
  if (!s) throw new Error("no session");
  return s;
}

/** Whether the caller may do what needs `need` in the team. */
export function useCan(teamId: bigint | number | undefined, need: Role): boolean {
  const s = useSession();
  return teamId !== undefined && s.roleIn(teamId) >= need;
}

const PUBLIC = ["/setup", "/login", "/invite", "/set-password"];

export function SessionProvider({ children }: { children: ReactNode }) {
  const { loc, go } = useRouter();
  const [me, setMe] = useState<Me | null | undefined>(undefined);
  const load = async () => {
    try {
      const m = await api.account.getMe({});
      setCsrf(m.csrfToken);
      setMe(m);
    } catch (e) {
      if (!isCode(e, Code.Unauthenticated)) throw e;
      setCsrf("");
      setMe(null);
    }
  };
  useEffect(() => {
    whenSignedOut(() => setMe(null));
    load().catch(() => setMe(null));
  }, []);
  useEffect(() => {
    if (me === null && !PUBLIC.includes(loc.path)) go(`/login?next=${encodeURIComponent(loc.path + window.location.search)}`);
  }, [me, loc.path]);
  if (PUBLIC.includes(loc.path)) {
    const done = (m: Me) => {
      setCsrf(m.csrfToken);
      setMe(m);
      const next = loc.query.get("next");
      // Where the user was going; else Apps, the first thing to do after setup or joining.
      go(next && next.startsWith("/") && !next.startsWith("//") ? next : "/apps");
    };
    if (loc.path === "/setup") return <SetupPage onDone={done} />;
    if (loc.path === "/invite") return <InvitePage onDone={done} />;
    if (loc.path === "/set-password") return <SetPasswordPage onDone={done} />;
    return <LoginPage onDone={done} />;
  }
  if (me === undefined) return <Loading text="Signing in…" />;
  if (me === null) return <Loading text="Redirecting to sign-in…" />;
  const session: Session = {
    me,
    refresh: load,
    async signOut(everywhere) {
      await (everywhere ? api.account.logoutEverywhere({}) : api.account.logout({})).catch(() => {});
      setCsrf("");
      setMe(null);
      go("/login");
    },
    roleIn(teamId) {
      if (me.admin) return Role.ADMIN;
      return me.teams.find((t) => t.teamId === BigInt(teamId))?.role ?? Role.UNSPECIFIED;
    },
  };
  return <SessionContext.Provider value={session}>{children}</SessionContext.Provider>;
}

function AuthCard({ title, children }: { title: string; children: ReactNode }) {
  return (
    <main className="auth">
      <div className="card auth-card">
        <div className="brand">Pulsebase</div>
        <h1>{title}</h1>
        {children}
      </div>
    </main>
  );
}

const tokenFromHash = () => new URLSearchParams(window.location.hash.slice(1)).get("token") ?? "";

function LoginPage({ onDone }: { onDone(m: Me): void }) {
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const status = useAsync(() => api.account.getSetupStatus({}), []);
  const act = useAction(async () => onDone(await api.account.login({ email, password })));
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void act.run();
  };
  return (
    <AuthCard title="Sign in">
      {status.data?.needsSetup && <p className="notice">This server has no owner yet: open the one-time setup link the server printed when it started.</p>}
      <form onSubmit={submit}>
        <Field label="Email">
          <input type="email" name="email" autoComplete="username" required value={email} onChange={(e) => setEmail(e.target.value)} autoFocus />
        </Field>
        <Field label="Password">
          <input type="password" name="password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.target.value)} />
        </Field>
        <ErrorBox error={act.error} />
        <button type="submit" className="primary" disabled={act.busy}>
          {act.busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </AuthCard>
  );
}

function SetupPage({ onDone }: { onDone(m: Me): void }) {
  const [form, setForm] = useState({ name: "", email: "", password: "", teamName: "" });
  const token = tokenFromHash();
  const act = useAction(async () => onDone(await api.account.completeSetup({ setupToken: token, ...form })));
  const set = (k: keyof typeof form) => (e: { target: { value: string } }) => setForm({ ...form, [k]: e.target.value });
  return (
    <AuthCard title="Set up the first owner">
      {!token && <p className="notice">Open the setup link printed by the server (it ends in #token=…).</p>}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void act.run();
        }}
      >
        <Field label="Your name">
          <input name="name" required value={form.name} onChange={set("name")} autoFocus />
        </Field>
        <Field label="Email">
          <input type="email" name="email" autoComplete="username" required value={form.email} onChange={set("email")} />
        </Field>
        <Field label="Password" hint="At least 10 characters.">
          <input type="password" name="password" autoComplete="new-password" required minLength={10} value={form.password} onChange={set("password")} />
        </Field>
        <Field label="First team" hint="Applications already made with the CLI keep their team: you join it (a name here renames it).">
          <input name="team" placeholder="Default" value={form.teamName} onChange={set("teamName")} />
        </Field>
        <ErrorBox error={act.error} />
        <button type="submit" className="primary" disabled={act.busy || !token}>
          Create owner account
        </button>
      </form>
    </AuthCard>
  );
}

function InvitePage({ onDone }: { onDone(m: Me): void }) {
  const token = tokenFromHash();
  const inv = useAsync(() => api.account.getInvitation({ token }), [token]);
  const [name, setName] = useState("");
  const [password, setPassword] = useState("");
  const act = useAction(async () => onDone(await api.account.acceptInvitation({ token, name, password })));
  return (
    <AuthCard title="Join a team">
      {inv.error ? (
        <ErrorBox error={inv.error} />
      ) : !inv.data ? (
        <Loading />
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void act.run();
          }}
        >
          <p>
            <strong>{inv.data.email}</strong> is invited to <strong>{inv.data.teamName}</strong> as <strong>{Role[inv.data.role]?.toLowerCase()}</strong>.
          </p>
          {/* The server does not say whether the email has an account: one form for both. */}
          <Field label="Your name" hint="For a new account.">
            <input name="name" value={name} onChange={(e) => setName(e.target.value)} autoFocus />
          </Field>
          <Field label="Password" hint="A new account: choose one (at least 10 characters). An existing account: its password.">
            <input type="password" name="password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.target.value)} />
          </Field>
          <ErrorBox error={act.error} />
          <button type="submit" className="primary" disabled={act.busy}>
            Join {inv.data.teamName}
          </button>
        </form>
      )}
    </AuthCard>
  );
}

function SetPasswordPage({ onDone }: { onDone(m: Me): void }) {
  const token = tokenFromHash();
  const [password, setPassword] = useState("");
  const act = useAction(async () => onDone(await api.account.setPassword({ token, password })));
  return (
    <AuthCard title="Choose your password">
      {!token && <p className="notice">Open the set-password link you were given (it ends in #token=…).</p>}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void act.run();
        }}
      >
        <Field label="Password" hint="At least 10 characters.">
          <input type="password" name="password" autoComplete="new-password" required minLength={10} value={password} onChange={(e) => setPassword(e.target.value)} autoFocus />
        </Field>
        <ErrorBox error={act.error} />
        <button type="submit" className="primary" disabled={act.busy || !token}>
          Set password and sign in
        </button>
      </form>
    </AuthCard>
  );
}
