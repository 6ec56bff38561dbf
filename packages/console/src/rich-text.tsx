// The rich text field: TipTap (ProseMirror) with a small toolbar; the value
// is the HTML the CMS stores for rich_text fields.
import { useEffect } from "react";
import { EditorContent, useEditor } from "@tiptap/react";
import StarterKit from "@tiptap/starter-kit";

export function RichText({ value, onChange, label }: { value: string; onChange(html: string): void; label: string }) {
  const editor = useEditor({
    extensions: [StarterKit],
    content: value,
    editorProps: { attributes: { "aria-label": label, role: "textbox", "aria-multiline": "true", class: "rich-body" } },
    onUpdate: ({ editor: e }) => onChange(e.isEmpty ? "" : e.getHTML()),
  });
  useEffect(() => {
    if (editor && value !== editor.getHTML() && !(value === "" && editor.isEmpty)) editor.commands.setContent(value, { emitUpdate: false });
  }, [value, editor]);
  if (!editor) return null;
  const btn = (name: string, label: string, run: () => void) => (
    <button type="button" className={editor.isActive(name) ? "active" : undefined} aria-pressed={editor.isActive(name)} onClick={run}>
      {label}
    </button>
  );
  return (
    <div className="rich">
      <div className="rich-toolbar" role="toolbar" aria-label={`${label} formatting`}>
        {btn("bold", "B", () => editor.chain().focus().toggleBold().run())}
        {btn("italic", "I", () => editor.chain().focus().toggleItalic().run())}
        {btn("heading", "H2", () => editor.chain().focus().toggleHeading({ level: 2 }).run())}
        {btn("bulletList", "• List", () => editor.chain().focus().toggleBulletList().run())}
        {btn("orderedList", "1. List", () => editor.chain().focus().toggleOrderedList().run())}
        {btn("blockquote", "Quote", () => editor.chain().focus().toggleBlockquote().run())}
      </div>
      <EditorContent editor={editor} />
    </div>
  );
}
