// Builds a nested object from form field names in the bracket convention
// (docs/devices.md): events[0][name], events[0][metadata][screen], logs[2][file].
// Numeric keys make arrays; a gap or a mix of numeric and named keys is a
// validation error on that field.
import type { Violations } from "../../kernel/errors.js";

const NAME_RE = /^([^[\]]+)((?:\[[^[\]]*\])*)$/;
export const MAX_FORM_DEPTH = 6;

/** "a[0][b]" -> ["a", "0", "b"]; undefined when malformed. */
export function splitFieldName(name: string): string[] | undefined {
  const m = NAME_RE.exec(name);
  if (!m) return undefined;
  const rest = [...m[2]!.matchAll(/\[([^[\]]*)\]/g)].map((x) => x[1]!);
  // "tags[]" appends: represented by an empty segment.
  return [m[1]!, ...rest];
}

type Node = Record<string, unknown>;

// Field names come from the client: with plain objects, "a[__proto__][x]"
// would walk into Object.prototype and set x on every object of the process.
// Nodes without a prototype make "__proto__" and "constructor" ordinary keys.
function newNode(): Node {
  return Object.create(null) as Node;
}

export class FormBuilder {
  private readonly root: Node = newNode();
  constructor(private readonly violations: Violations) {}

  add(name: string, value: unknown): void {
    const path = splitFieldName(name);
    if (!path || path.length > MAX_FORM_DEPTH) {
      this.violations.add(name, `The field name ${name} is malformed.`);
      return;
    }
    let node = this.root;
    for (let i = 0; i < path.length - 1; i++) {
      const key = path[i] === "" ? String(Object.keys(node).length) : path[i]!;
      const next = node[key];
      if (next === undefined) node = node[key] = newNode();
      else if (typeof next === "object" && next !== null && !isLeaf(next)) node = next as Node;
      else {
        this.violations.add(path.slice(0, i + 1).join("."), "The field is given both as a value and as an object.");
        return;
      }
    }
    const last = path[path.length - 1] === "" ? String(Object.keys(node).length) : path[path.length - 1]!;
    if (last in node) {
      this.violations.add(path.join("."), "The field is given more than once.");
      return;
    }
    node[last] = value;
  }

  build(): Record<string, unknown> {
    return toArrays(this.root, "", this.violations) as Record<string, unknown>;
  }
}

function isLeaf(v: object): boolean {
  return Buffer.isBuffer(v) || (v as { __file?: boolean }).__file === true;
}

function toArrays(node: unknown, path: string, v: Violations): unknown {
  if (typeof node !== "object" || node === null || isLeaf(node)) return node;
  const obj = node as Node;
  const keys = Object.keys(obj);
  const numeric = keys.length > 0 && keys.every((k) => /^\d+$/.test(k));
  if (numeric) {
    const idx = keys.map(Number).sort((a, b) => a - b);
    if (idx.some((n, i) => n !== i)) {
      v.add(path, `The ${path} field must be a list indexed from 0 without gaps.`);
      return [];
    }
    return idx.map((i) => toArrays(obj[String(i)], path ? `${path}.${i}` : String(i), v));
  }
  const out: Node = newNode();
  for (const k of keys) out[k] = toArrays(obj[k], path ? `${path}.${k}` : k, v);
  return out;
}
