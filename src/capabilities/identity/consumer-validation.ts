// Field rules of consumer registration and update (documented in the README).
import { Violations } from "../../kernel/errors.js";
import { COUNTRY_CODES, LANGUAGE_CODES } from "./iso-codes.js";

export const LIMITS = {
  app_key: 128,
  device_id: 255,
  device_model: 255,
  user_id: 255,
  os: 100,
  user_email: 254,
} as const;

const EMAIL_RE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
// PostgreSQL text cannot hold U+0000: a 422 here, not a 500 at the insert.
const NUL = "\u0000";

export function requireString(v: Violations, field: keyof typeof LIMITS, value: string): void {
  if (value.trim() === "") v.add(field, `The ${field} field is required.`);
  else if (value.length > LIMITS[field]) v.add(field, `The ${field} field must not be longer than ${LIMITS[field]} characters.`);
  else if (value.includes(NUL)) v.add(field, `The ${field} field must not contain NUL characters.`);
}

export function checkOptionalString(v: Violations, field: keyof typeof LIMITS, value: string | undefined): void {
  if (value === undefined) return;
  if (value.trim() === "") v.add(field, `The ${field} field must not be empty.`);
  else if (value.length > LIMITS[field]) v.add(field, `The ${field} field must not be longer than ${LIMITS[field]} characters.`);
  else if (value.includes(NUL)) v.add(field, `The ${field} field must not contain NUL characters.`);
}

/** Returns the normalised code or undefined after adding a violation. */
function checkCode(v: Violations, field: string, value: string | undefined, required: boolean, code: string, standard: string, codes: ReadonlySet<string>): string | undefined {
  if (value === undefined || value === "") {
    if (required) v.add(field, `The ${field} field is required.`);
    return undefined;
  }
  if (codes.has(code)) return code;
  v.add(field, `The ${field} field must be an ${standard} code.`);
  return undefined;
}

/** The upper-case country code, or undefined after adding a violation. */
export const checkCountry = (v: Violations, value: string | undefined, required: boolean) =>
  checkCode(v, "country", value, required, value?.trim().toUpperCase() ?? "", "ISO 3166-1 alpha-2", COUNTRY_CODES);

/** The lower-case language code, or undefined after adding a violation. */
export const checkLanguage = (v: Violations, value: string | undefined, required: boolean) =>
  checkCode(v, "language", value, required, value?.trim().toLowerCase() ?? "", "ISO 639-1", LANGUAGE_CODES);

export function checkEmail(v: Violations, value: string | undefined): void {
  if (value === undefined || value === "") return;
  if (value.length > LIMITS.user_email) v.add("user_email", `The user_email field must not be longer than ${LIMITS.user_email} characters.`);
  else if (!EMAIL_RE.test(value) || value.includes(NUL)) v.add("user_email", "The user_email field must be a valid email address.");
}
