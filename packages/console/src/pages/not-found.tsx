// An unknown path says so (it used to show Apps silently).
import { Link, useRouter } from "../router";

export function NotFoundPage() {
  const { loc } = useRouter();
  return (
    <div className="page not-found">
      <h1>Page not found</h1>
      <p>
        There is no page at <code>{loc.path}</code>.
      </p>
      <p>
        <Link to="/">Go to the overview</Link>
      </p>
    </div>
  );
}
