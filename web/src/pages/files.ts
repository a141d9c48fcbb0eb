// Files: the workspace's tree, a viewer, and an editor for small text
// files. The tree is listed by a find run in the session's own jail
// (warren has no host-side directory listing to trust), the viewer and
// editor use read_file and write_file.
import { h, replace, errorBox, button, formatBytes } from "../dom";
import { mcp } from "../mcp";
import type { SessionContext, Tab } from "./session";

interface Entry {
  path: string;
  dir: boolean;
  size: number;
}

interface Node {
  name: string;
  path: string;
  dir: boolean;
  size: number;
  children: Map<string, Node>;
}

// Files larger than this are shown, not edited.
const maxEdit = 256 << 10;
const maxEntries = 5000;

// The listing runs in a subshell so that the session's cwd does not move;
// %y is the type, %s the size and %P the path under /workspace.
const listCommand = `find /workspace -xdev -name .git -prune -o \\( -type f -o -type d \\) -printf '%y %s %P\\n' 2>/dev/null | head -n ${maxEntries + 1}`;

function parse(out: string): Entry[] {
  const entries: Entry[] = [];
  for (const line of out.split("\n")) {
    const m = /^([fd]) (\d+) (.+)$/.exec(line);
    if (m) entries.push({ dir: m[1] === "d", size: Number(m[2]), path: m[3] });
  }
  return entries;
}

function tree(entries: Entry[]): Node {
  const root: Node = { name: "", path: "", dir: true, size: 0, children: new Map() };
  for (const e of entries) {
    const parts = e.path.split("/");
    let n = root;
    parts.forEach((part, i) => {
      let c = n.children.get(part);
      if (!c) {
        c = { name: part, path: parts.slice(0, i + 1).join("/"), dir: i < parts.length - 1 || e.dir, size: 0, children: new Map() };
        n.children.set(part, c);
      }
      if (i === parts.length - 1) c.size = e.size;
      n = c;
    });
  }
  return root;
}

export function filesTab(ctx: SessionContext): Tab {
  const id = ctx.session.session_id;
  const readOnly = ctx.session.state !== "active";
  const err = errorBox();
  const treeEl = h("nav", { class: "tree", attrs: { "aria-label": "Workspace files" } }, h("p", { class: "muted" }, "Listing…"));
  const viewer = h("div", { class: "viewer" }, h("p", { class: "muted" }, "Choose a file."));

  function renderNode(n: Node): HTMLElement {
    const kids = [...n.children.values()].sort((a, b) => (a.dir === b.dir ? a.name.localeCompare(b.name) : a.dir ? -1 : 1));
    // A plain nested list: a role on the ul would take its items out of
    // the list (axe: listitem), and this is not an ARIA tree widget.
    return h(
      "ul",
      null,
      ...kids.map((c) =>
        c.dir
          ? h("li", null, h("details", null, h("summary", null, c.name + "/"), renderNode(c)))
          : h("li", null, button(c.name, () => void open(c.path), { class: "file", attrs: { "data-path": c.path, title: `${c.path} · ${formatBytes(c.size)}` } })),
      ),
    );
  }

  async function list(): Promise<void> {
    err.clear();
    try {
      const r = await mcp.call<{ stdout: string }>("shell_exec", { session_id: id, command: listCommand, timeout_ms: 30_000 });
      const entries = parse(r.stdout);
      const cut = entries.length > maxEntries;
      replace(treeEl, renderNode(tree(entries.slice(0, maxEntries))), cut ? h("p", { class: "muted" }, `Only the first ${maxEntries} entries are listed.`) : null);
    } catch (e) {
      replace(treeEl);
      err.show(e);
    }
  }

  async function open(path: string): Promise<void> {
    const fileErr = errorBox();
    replace(viewer, h("p", { class: "muted" }, `Opening ${path}…`));
    let r: { content: string; encoding?: string; mime_type?: string; total_bytes: number; total_lines: number; truncated: boolean };
    try {
      r = await mcp.call("read_file", { session_id: id, path, limit: 100_000 });
    } catch (e) {
      fileErr.show(e);
      replace(viewer, h("h2", null, path), fileErr.el);
      return;
    }
    const heading = h("h2", { class: "path" }, path);
    if (r.encoding === "image") {
      // read_file returns a picture as image content, not text: no
      // editor, whose Save would replace it with nothing.
      replace(viewer, heading, h("p", { class: "muted" }, `${r.mime_type ?? "image"} image · ${formatBytes(r.total_bytes)} · not editable here`), fileErr.el);
      return;
    }
    const editable = !readOnly && !r.truncated && r.total_bytes <= maxEdit;
    const meta = h("p", { class: "muted" }, `${formatBytes(r.total_bytes)} · ${r.total_lines} lines${r.truncated ? " · only the start is shown" : ""}`);
    if (!editable) {
      replace(viewer, heading, meta, h("pre", { class: "file-view", attrs: { tabindex: 0, "aria-label": `contents of ${path}` } }, r.content), fileErr.el);
      return;
    }
    const area = h("textarea", { id: "editor", attrs: { spellcheck: "false", "aria-label": `contents of ${path}` }, props: { value: r.content } });
    const saved = h("span", { class: "muted", attrs: { role: "status" } });
    const save = button("Save", async () => {
      fileErr.clear();
      save.disabled = true;
      try {
        await mcp.call("write_file", { session_id: id, path, content: area.value });
        saved.replaceChildren("Saved. ", h("a", { attrs: { href: `#/s/${encodeURIComponent(id)}/diff` } }, "See the diff"));
      } catch (e) {
        fileErr.show(e);
      } finally {
        save.disabled = false;
      }
    }, { attrs: { id: "save" } });
    area.addEventListener("keydown", (ev) => {
      if (ev.key === "s" && (ev.ctrlKey || ev.metaKey)) {
        ev.preventDefault();
        save.click();
      }
    });
    replace(viewer, heading, meta, area, h("div", { class: "row" }, save, saved), fileErr.el);
  }

  void list();
  return {
    el: h("div", { class: "files" }, h("div", { class: "row" }, button("Refresh the tree", () => void list())), err.el, h("div", { class: "split" }, treeEl, viewer)),
  };
}
