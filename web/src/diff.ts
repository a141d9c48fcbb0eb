// Renders a unified diff as text: one section per file, each line a span
// whose class says whether it was added, removed, context or a hunk
// header. Never HTML: a diff is the workspace's untrusted text.
import { h } from "./dom";

export interface FilePatch {
  path: string;
  lines: string[];
}

// split cuts a git patch into its files.
export function split(patch: string): FilePatch[] {
  const files: FilePatch[] = [];
  let cur: FilePatch | null = null;
  for (const line of patch.split("\n")) {
    if (line.startsWith("diff --git ")) {
      const m = / b\/(.*)$/.exec(line);
      cur = { path: m ? m[1] : line.slice(11), lines: [line] };
      files.push(cur);
    } else if (cur) {
      cur.lines.push(line);
    } else if (line) {
      cur = { path: "", lines: [line] };
      files.push(cur);
    }
  }
  return files;
}

function cls(line: string): string {
  if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff --git") || line.startsWith("index ")) return "meta";
  if (line.startsWith("@@")) return "hunk";
  if (line.startsWith("+")) return "add";
  if (line.startsWith("-")) return "del";
  return "ctx";
}

export function renderPatch(f: FilePatch): HTMLPreElement {
  const pre = h("pre", { class: "diff", attrs: { tabindex: 0, "aria-label": `changes to ${f.path}` } });
  for (const line of f.lines) pre.appendChild(h("span", { class: cls(line) }, line + "\n"));
  return pre;
}
