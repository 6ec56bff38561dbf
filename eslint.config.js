import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["gen/**", "node_modules/**", ".data/**", "coverage/**", "bench/tmp/**", "packages/*/dist/**", "dist/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: "readonly", console: "readonly", Buffer: "readonly", setTimeout: "readonly", clearTimeout: "readonly", setInterval: "readonly", clearInterval: "readonly", performance: "readonly", URL: "readonly", AbortController: "readonly", TextEncoder: "readonly", TextDecoder: "readonly", fetch: "readonly", Headers: "readonly", structuredClone: "readonly", queueMicrotask: "readonly", setImmediate: "readonly" } },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" }],
      "@typescript-eslint/no-explicit-any": "warn",
    },
  },
  // The example web app runs in a browser.
  {
    files: ["examples/web/*.js"],
    languageOptions: { globals: { window: "readonly", document: "readonly", location: "readonly", URLSearchParams: "readonly" } },
  },
);
