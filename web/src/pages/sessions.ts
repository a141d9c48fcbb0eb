// Sessions: the list with state, source, age, last activity, tokens and
// cost; create from a git URL, a server directory or empty; pause,
// resume, archive, delete (confirmed).
import { h, replace, errorBox, button, field, formatAge, formatBytes, formatCost, formatTokens, confirmDialog } from "../dom";
import { mcp } from "../mcp";
import type { Page } from "../main";

export interface SessionView {
  session_id: string;
  name: string;
  state: string;
  mode: string;
  source: string;
  ref: string;
  commit: string;
  cwd: string;
  running: boolean;
  created_at: string;
  updated_at: string;
  last_activity?: string;
  disk_bytes?: number;
}

export interface UsageRow {
  key: string;
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  cost_usd: number;
  records: number;
  tool_output_bytes: number;
}

// usageBySession returns tokens and cost per session id (empty when the
// server does not meter).
export async function usageBySession(): Promise<Map<string, UsageRow>> {
  const out = new Map<string, UsageRow>();
  if (!mcp.has("usage_report")) return out;
  const r = await mcp.call<{ rows: UsageRow[] }>("usage_report", { group_by: "session" });
  for (const row of r.rows ?? []) out.set(row.key, row);
  return out;
}

export function sessionsPage(): Page {
  const err = errorBox();
  const tbody = h("tbody");
  const table = h(
    "table",
    { class: "sessions" },
    h("caption", { class: "sr-only" }, "Your sessions"),
    h(
      "thead",
      null,
      h(
        "tr",
        null,
        ...["Session", "State", "Source", "Created", "Last activity", "Disk", "Tokens", "Cost", "Actions"].map((c) => h("th", { attrs: { scope: "col" } }, c)),
      ),
    ),
    tbody,
  );
  const empty = h("p", { class: "empty", props: { hidden: true } }, "No sessions yet: create one below.");
  let disposed = false;

  async function load(): Promise<void> {
    err.clear();
    try {
      const [list, usage] = await Promise.all([
        mcp.call<{ sessions: SessionView[] }>("session_list"),
        usageBySession().catch(() => new Map<string, UsageRow>()),
      ]);
      if (disposed) return;
      const sessions = (list.sessions ?? []).slice().reverse(); // newest first
      replace(tbody, ...sessions.map((s) => row(s, usage.get(s.session_id))));
      empty.hidden = sessions.length > 0;
      table.hidden = sessions.length === 0;
      document.body.dataset.sessionsLoaded = String(sessions.length);
      if (!performance.getEntriesByName("sessions-listed").length) performance.mark("sessions-listed");
    } catch (e) {
      err.show(e);
    }
  }

  function row(s: SessionView, u?: UsageRow): HTMLTableRowElement {
    const rowErr = errorBox();
    const act = (action: string, confirmText?: string) =>
      button(
        action[0].toUpperCase() + action.slice(1),
        async (ev) => {
          const b = ev.currentTarget as HTMLButtonElement;
          if (confirmText && !(await confirmDialog(confirmText, action[0].toUpperCase() + action.slice(1)))) return;
          rowErr.clear();
          b.disabled = true;
          try {
            await mcp.call("session_control", { session_id: s.session_id, action });
            await load();
          } catch (e) {
            rowErr.show(e);
            b.disabled = false;
          }
        },
        { attrs: { "aria-label": `${action} session ${s.name || s.session_id}` }, class: action === "delete" ? "danger" : "" },
      );
    const actions: HTMLElement[] = [];
    if (s.state === "active") actions.push(act("pause"));
    if (s.state === "paused") actions.push(act("resume"));
    if (s.state === "active" || s.state === "paused") actions.push(act("archive", `Archive session ${s.name || s.session_id}? It becomes read-only for good.`));
    if (s.state !== "deleted") actions.push(act("delete", `Delete session ${s.name || s.session_id} and its workspace? This cannot be undone.`));
    const tokens = u ? u.input_tokens + u.output_tokens : 0;
    return h(
      "tr",
      { attrs: { "data-session": s.session_id } },
      h(
        "th",
        { attrs: { scope: "row", "data-label": "Session" } },
        h("a", { attrs: { href: `#/s/${encodeURIComponent(s.session_id)}` } }, s.name || s.session_id),
        s.name ? h("span", { class: "muted id" }, s.session_id) : null,
      ),
      h("td", { attrs: { "data-label": "State" } }, h("span", { class: `badge ${s.state}` }, s.state), s.running ? h("span", { class: "muted" }, " running") : null),
      h("td", { attrs: { "data-label": "Source" }, class: "source" }, s.source ? `${s.mode}: ${s.source}` : s.mode),
      h("td", { attrs: { "data-label": "Created", title: s.created_at } }, formatAge(s.created_at)),
      h("td", { attrs: { "data-label": "Last activity", title: s.last_activity || s.updated_at } }, formatAge(s.last_activity || s.updated_at)),
      h("td", { attrs: { "data-label": "Disk" }, class: "num" }, s.disk_bytes !== undefined ? formatBytes(s.disk_bytes) : "–"),
      h("td", { attrs: { "data-label": "Tokens" }, class: "num" }, formatTokens(tokens)),
      h("td", { attrs: { "data-label": "Cost" }, class: "num" }, formatCost(u?.cost_usd ?? 0)),
      h("td", { attrs: { "data-label": "Actions" } }, h("div", { class: "actions" }, ...actions), rowErr.el),
    );
  }

  // The create form.
  const source = h("input", { id: "new-source", attrs: { type: "text", placeholder: "https://github.com/you/repo.git or /srv/project", autocomplete: "off" } });
  const mode = h(
    "select",
    { id: "new-mode" },
    h("option", { attrs: { value: "" } }, "inferred"),
    h("option", { attrs: { value: "clone" } }, "clone"),
    h("option", { attrs: { value: "bind" } }, "bind (in place)"),
    h("option", { attrs: { value: "empty" } }, "empty"),
  );
  const name = h("input", { id: "new-name", attrs: { type: "text", maxlength: 100, autocomplete: "off" } });
  const createErr = errorBox();
  const progress = h("pre", { class: "progress", attrs: { "aria-live": "polite" }, props: { hidden: true } });
  const create = h("button", { attrs: { type: "submit" } }, "Create session");
  const form = h(
    "form",
    {
      class: "create",
      attrs: { "aria-labelledby": "create-title" },
      on: {
        submit: async (ev) => {
          ev.preventDefault();
          createErr.clear();
          create.disabled = true;
          progress.textContent = "";
          progress.hidden = false;
          try {
            const args: Record<string, string> = {};
            if (source.value.trim()) args.source = source.value.trim();
            if (mode.value) args.mode = mode.value;
            if (name.value.trim()) args.name = name.value.trim();
            const s = await mcp.call<SessionView>("session_create", args, {
              timeoutMs: 600_000,
              onProgress: (msg) => {
                progress.textContent = (progress.textContent + msg).slice(-4000);
              },
            });
            location.hash = `#/s/${encodeURIComponent(s.session_id)}/shell`;
          } catch (e) {
            createErr.show(e);
          } finally {
            create.disabled = false;
            progress.hidden = true;
          }
        },
      },
    },
    h("h2", { id: "create-title" }, "New session"),
    h("div", { class: "row wrap" }, field("Source (git URL, server directory, or empty)", source), field("Mode", mode), field("Name", name), create),
    progress,
    createErr.el,
  );

  const el = h("section", { class: "page" }, h("div", { class: "row" }, h("h1", null, "Sessions"), button("Refresh", () => void load())), err.el, empty, table, form);
  void load();
  return {
    el,
    dispose() {
      disposed = true;
    },
  };
}
