// A content type's definition as the services use it, and the validation of
// an operator's input against the type table's rules.
import { Violations } from "../../kernel/errors.js";
import { isFieldType, TYPE_RULES, type FieldDef } from "./field-types.js";

export interface ContentTypeDef {
  id: number;
  appId: number;
  slug: string;
  name: string;
  description: string;
  icon: string;
  fields: FieldDef[];
  filterable: string[];
  sortable: string[];
  searchable: string[];
  defaultSort: string;
  defaultPerPage: number;
  createdAt: Date;
  updatedAt: Date;
}

export interface ContentTypeInputData {
  slug: string;
  name: string;
  description: string;
  icon: string;
  fields: (FieldDef & { searchable?: boolean; previousName?: string })[];
  filterable: string[];
  sortable: string[];
  searchable: string[];
  defaultSort: string;
  defaultPerPage: number;
}

export const TIMESTAMP_COLUMNS = ["published_at", "created_at", "updated_at"] as const;
export const RESERVED_FIELD_NAMES = new Set(["id", ...TIMESTAMP_COLUMNS]);
const SLUG_RE = /^[a-z][a-z0-9_-]{0,63}$/;
const FIELD_NAME_RE = /^[a-z][a-z0-9_]{0,62}$/;
export const MAX_FIELDS = 100;

export function isTimestampColumn(s: string): boolean {
  return (TIMESTAMP_COLUMNS as readonly string[]).includes(s);
}

/**
 * Validates and normalises a content type input. `existingSlugs` are the
 * application's other content types (relation targets); the type's own slug
 * is always a valid target.
 */
export function validateContentTypeInput(input: ContentTypeInputData, existingSlugs: Set<string>): ContentTypeInputData {
  const v = new Violations();
  const p = "content_type";
  if (!SLUG_RE.test(input.slug) || input.slug === "search") {
    v.add(`${p}.slug`, "slug must start with a lower-case letter and hold only a-z, 0-9, - and _ (at most 64 characters); 'search' is reserved.");
  }
  if (!input.name.trim()) v.add(`${p}.name`, "name is required.");
  if (input.fields.length === 0) v.add(`${p}.fields`, "at least one field is required.");
  if (input.fields.length > MAX_FIELDS) v.add(`${p}.fields`, `at most ${MAX_FIELDS} fields.`);
  const names = new Set<string>();
  const fields: ContentTypeInputData["fields"] = [];
  input.fields.forEach((f, i) => {
    const fp = `${p}.fields.${i}`;
    if (!FIELD_NAME_RE.test(f.name)) v.add(`${fp}.name`, "field names start with a lower-case letter and hold only a-z, 0-9 and _.");
    else if (RESERVED_FIELD_NAMES.has(f.name)) v.add(`${fp}.name`, `${f.name} is reserved.`);
    else if (names.has(f.name)) v.add(`${fp}.name`, `duplicate field ${f.name}.`);
    names.add(f.name);
    if (!isFieldType(f.type)) {
      v.add(`${fp}.type`, `unknown type ${f.type}; one of text, rich_text, number, boolean, date, date_time, email, url, select, media, relation, json.`);
      return;
    }
    const out: ContentTypeInputData["fields"][number] = {
      name: f.name,
      type: f.type,
      required: f.required,
      label: f.label || f.name,
    };
    if (f.previousName) out.previousName = f.previousName;
    if (f.type === "select") {
      const opts = [...new Set(f.options ?? [])];
      if (opts.length === 0 || opts.some((o) => o === "")) v.add(`${fp}.options`, "a select field needs non-empty options.");
      out.options = opts;
      out.multi = !!f.multi;
    } else if (f.type === "relation") {
      if (!f.target || !(existingSlugs.has(f.target) || f.target === input.slug)) {
        v.add(`${fp}.target`, `relation target ${f.target ?? ""} is not a content type of this application.`);
      }
      out.target = f.target ?? "";
      out.multi = !!f.multi;
    } else if (f.multi) {
      v.add(`${fp}.multi`, "only select and relation fields can be multi.");
    }
    if (f.searchable && !TYPE_RULES[f.type].searchable) v.add(`${fp}.searchable`, `a ${f.type} field cannot be searchable.`);
    fields.push(out);
  });
  // media fields bring a <field>_url companion in responses
  for (const f of fields) {
    if (f.type === "media" && names.has(`${f.name}_url`)) {
      v.add(`${p}.fields`, `${f.name}_url clashes with the URL companion of media field ${f.name}.`);
    }
  }
  const byName = new Map(fields.map((f) => [f.name, f]));
  const checkList = (list: string[], key: "filterable" | "sortable" | "searchable", path: string): string[] => {
    const out: string[] = [];
    list.forEach((name, i) => {
      const f = byName.get(name);
      if (!f) v.add(`${p}.${path}.${i}`, `unknown field ${name}.`);
      else if (!TYPE_RULES[f.type][key]) v.add(`${p}.${path}.${i}`, `a ${f.type} field cannot be ${key}.`);
      else if (!out.includes(name)) out.push(name);
    });
    return out;
  };
  const filterable = checkList(input.filterable, "filterable", "filterable_fields");
  const sortable = checkList(input.sortable, "sortable", "sortable_fields");
  const searchable = checkList(
    [...input.searchable, ...input.fields.filter((f) => f.searchable).map((f) => f.name)],
    "searchable",
    "searchable_fields",
  );
  let defaultSort = input.defaultSort.trim();
  if (defaultSort) {
    const name = defaultSort.replace(/^[-+]/, "");
    if (!sortable.includes(name) && !isTimestampColumn(name)) {
      v.add(`${p}.default_sort`, `default_sort must name a sortable field or a timestamp column.`);
    }
  } else defaultSort = "";
  let perPage = input.defaultPerPage || 20;
  if (perPage < 1 || perPage > 100) {
    v.add(`${p}.default_per_page`, "default_per_page must be between 1 and 100.");
    perPage = 20;
  }
  v.throwIfAny();
  return {
    slug: input.slug,
    name: input.name.trim(),
    description: input.description,
    icon: input.icon,
    fields,
    filterable,
    sortable,
    searchable,
    defaultSort,
    defaultPerPage: perPage,
  };
}
