// CodeMirror 6 for SQL and function code: highlighting, line numbers,
// history, and Mod-Enter to run.
import { useEffect, useRef } from "react";
import { basicSetup } from "codemirror";
import { EditorView, keymap } from "@codemirror/view";
import { EditorState } from "@codemirror/state";
import { sql, SQLite } from "@codemirror/lang-sql";
import { javascript } from "@codemirror/lang-javascript";

export function CodeEditor({ value, onChange, language, onRun, label, readOnly, minHeight = "12rem" }: {
  value: string;
  onChange?(v: string): void;
  language: "sql" | "javascript";
  onRun?(): void;
  label: string;
  readOnly?: boolean;
  minHeight?: string;
}) {
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | undefined>(undefined);
  const latest = useRef({ onChange, onRun });
  latest.current = { onChange, onRun };
  useEffect(() => {
    const v = new EditorView({
      parent: host.current!,
      state: EditorState.create({
        doc: value,
        extensions: [
          keymap.of([{ key: "Mod-Enter", run: () => (latest.current.onRun?.(), true) }]),
          basicSetup,
          language === "sql" ? sql({ dialect: SQLite }) : javascript(),
          EditorView.updateListener.of((u) => u.docChanged && latest.current.onChange?.(u.state.doc.toString())),
          EditorState.readOnly.of(!!readOnly),
          EditorView.contentAttributes.of({ "aria-label": label }),
          // The console's colour variables, so the editor follows the light or dark theme.
          EditorView.theme({
            "&": { minHeight, backgroundColor: "var(--field)", color: "var(--text)" },
            ".cm-scroller": { minHeight },
            ".cm-gutters": { backgroundColor: "var(--card)", color: "var(--muted)", borderRight: "1px solid var(--line)" },
            ".cm-activeLine, .cm-activeLineGutter": { backgroundColor: "var(--accent-soft)" },
            ".cm-cursor": { borderLeftColor: "var(--text)" },
            "&.cm-focused .cm-selectionBackground, .cm-selectionBackground": { backgroundColor: "var(--accent-soft)" },
          }),
        ],
      }),
    });
    view.current = v;
    return () => v.destroy();
  }, [language, readOnly]);
  useEffect(() => {
    const v = view.current;
    if (v && v.state.doc.toString() !== value) v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: value } });
  }, [value]);
  return <div className="code-editor" ref={host} data-testid={`editor-${language}`} />;
}
