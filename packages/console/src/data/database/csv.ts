// CSV as RFC 4180 writes it: CRLF line ends, a field quoted when it holds a
// comma, a quote, CR or LF (a quote doubled inside), NULL as an empty field,
// JSON values (blobs come as base64 text) as their text. The file is built
// in chunks (one string per page of rows), so a large export never makes
// one giant string.

export function csvField(v: unknown): string {
  if (v === null || v === undefined) return "";
  const s = typeof v === "object" ? JSON.stringify(v) : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export const csvLine = (values: readonly unknown[]): string => values.map(csvField).join(",") + "\r\n";

export function csvChunk(rows: readonly (readonly unknown[])[]): string {
  let out = "";
  for (const r of rows) out += csvLine(r);
  return out;
}

/** Saves the parts as a file through a temporary link (the browser's download). */
export function saveFile(name: string, type: string, parts: BlobPart[]): void {
  const url = URL.createObjectURL(new Blob(parts, { type }));
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  // The download has its own copy once it started.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
