// The diff of a session since it was created: a summary of the changed
// files with their line counts, then each file's patch.
import { h, replace, errorBox, button } from "../dom";
import { split, renderPatch } from "../diff";
import { mcp } from "../mcp";
import type { SessionContext, Tab } from "./session";

interface FileChange {
  path: string;
  status: string;
  additions: number;
  deletions: number;
  binary: boolean;
}

export function diffTab(ctx: SessionContext): Tab {
  const id = ctx.session.session_id;
  const err = errorBox();
  const body = h("div", { class: "diffs" }, h("p", { class: "muted" }, "Comparing…"));

  async function load(): Promise<void> {
    err.clear();
    try {
      const r = await mcp.call<{ patch: string; files: FileChange[]; truncated: boolean }>("session_diff", { session_id: id });
      const files = r.files ?? [];
      if (!files.length) {
        replace(body, h("p", { class: "empty" }, "No changes since the session was created."));
        return;
      }
      const adds = files.reduce((n, f) => n + f.additions, 0);
      const dels = files.reduce((n, f) => n + f.deletions, 0);
      const patches = new Map(split(r.patch).map((p) => [p.path, p]));
      replace(
        body,
        h("p", { class: "summary", attrs: { role: "status" } }, `${files.length} file${files.length === 1 ? "" : "s"} changed, `, h("span", { class: "add" }, `+${adds}`), " ", h("span", { class: "del" }, `−${dels}`)),
        h(
          "ul",
          { class: "changed" },
          ...files.map((f) =>
            h("li", null, h("a", { attrs: { href: `#diff-${encodeURIComponent(f.path)}` }, on: { click: (ev) => { ev.preventDefault(); document.getElementById(`diff-${f.path}`)?.scrollIntoView(); } } }, f.path), " ", h("span", { class: `badge ${f.status}` }, f.status), " ", h("span", { class: "add" }, `+${f.additions}`), " ", h("span", { class: "del" }, `−${f.deletions}`), f.binary ? " (binary)" : null),
          ),
        ),
        r.truncated ? h("p", { class: "muted" }, "The patch was cut at its size limit: the list above still names every change.") : null,
        ...files.map((f) => {
          const p = patches.get(f.path);
          return h("section", { class: "file-diff", id: `diff-${f.path}` }, h("h2", { class: "path" }, f.path), p ? renderPatch(p) : h("p", { class: "muted" }, f.binary ? "Binary file: not shown." : "No patch text (cut at the size limit)."));
        }),
      );
    } catch (e) {
      replace(body);
      err.show(e);
    }
  }
  void load();
  return { el: h("div", null, h("div", { class: "row" }, button("Refresh", () => void load())), err.el, body) };
}
