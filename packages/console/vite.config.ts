// The console is built into dist/ (served by the admin listener at /). It
// imports the generated protobuf code from the repository's gen/ folder, so
// the console and the server speak the same API.
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

export default defineConfig({
  plugins: [react()],
  base: "/",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    // No inline scripts: the CSP allows scripts from the origin only.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    chunkSizeWarningLimit: 1500,
  },
  server: { fs: { allow: ["../.."] } },
});
