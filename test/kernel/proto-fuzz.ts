// Shared by the codec fuzz tests: a seeded generator, the strings and keys
// readers got wrong before (U+FEFF, names objects inherit), and a deep
// comparison that also checks prototypes and own-key order.

export function random(seed: number): () => number {
  let x = seed % 2 ** 31;
  return () => ((x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
}

export const BOM = "\uFEFF";
/** Keys an object inherits, or that set its prototype when assigned. */
export const HOSTILE_KEYS = ["__proto__", "constructor", "hasOwnProperty", "toString", "valueOf", "__defineGetter__", "prototype"];
const PIECES = ["", BOM, BOM + BOM, "SELECT 1", "DELETE", "bin", "é", "\u{1F600}", "\u0000", " ", "a=b&c", ...HOSTILE_KEYS];

export function str(r: () => number): string {
  let s = "";
  for (let n = Math.floor(r() * 4); n > 0; n--) s += PIECES[Math.floor(r() * PIECES.length)]!;
  // Often a leading U+FEFF, the case TextDecoder drops unless told not to.
  return r() < 0.3 ? BOM + s : s;
}

export function key(r: () => number): string {
  const x = r();
  // "__proto__" often: a reader that assigns it sets the object's prototype instead.
  return x < 0.25 ? "__proto__" : x < 0.5 ? HOSTILE_KEYS[Math.floor(r() * HOSTILE_KEYS.length)]! : str(r);
}

/** A record whose keys are own data properties, "__proto__" included (as fromBinary makes them). */
export function record<T>(entries: [string, T][]): Record<string, T> {
  const out: Record<string, T> = {};
  for (const [k, v] of entries) Object.defineProperty(out, k, { value: v, writable: true, enumerable: true, configurable: true });
  return out;
}

/**
 * Every object in `got` has the prototype and the own keys (in order) of its
 * counterpart in `want`, and every value is the same (Object.is: -0, NaN,
 * bigint; strings with their U+FEFF); the paths that differ, for a readable failure.
 */
export function differences(got: unknown, want: unknown, at = "$"): string[] {
  if (typeof want !== "object" || want === null) return Object.is(got, want) ? [] : [`${at}: ${String(got)} ≠ ${String(want)}`];
  if (typeof got !== "object" || got === null) return [`${at}: ${String(got)} is not an object`];
  if (want instanceof Uint8Array) return got instanceof Uint8Array && Buffer.from(got).equals(Buffer.from(want)) ? [] : [`${at}: bytes differ`];
  const out: string[] = [];
  if (Object.getPrototypeOf(got) !== Object.getPrototypeOf(want)) out.push(`${at}: another prototype`);
  const gk = Reflect.ownKeys(got).map(String);
  const wk = Reflect.ownKeys(want).map(String);
  if (JSON.stringify(gk) !== JSON.stringify(wk)) out.push(`${at}: own keys ${JSON.stringify(gk)} ≠ ${JSON.stringify(wk)}`);
  for (const k of wk) out.push(...differences(Object.getOwnPropertyDescriptor(got, k)?.value, Object.getOwnPropertyDescriptor(want, k)?.value, `${at}[${JSON.stringify(k)}]`));
  return out;
}
