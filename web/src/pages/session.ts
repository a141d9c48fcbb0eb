// A session: its header (state, source, tokens and cost, always visible)
// and tabs: the live activity of every client, a shell of your own, files,
// the diff since creation, and the agent when the server has one.
import { h, replace, errorBox, formatCost, formatTokens } from "../dom";
import { mcp } from "../mcp";
import type { Page } from "../main";
import { usageBySession, type SessionView } from "./sessions";

export interface Tab {
  el: HTMLElement;
  dispose?(): void;
}

export interface SessionContext {
  session: SessionView;
  // refreshCost re-reads the session's tokens and cost.
  refreshCost(): void;
}

const tabs: [string, string, (ctx: SessionContext) => Promise<Tab>][] = [
  ["activity", "Activity", async (c) => (await import("./activity")).activityTab(c)],
  ["shell", "Shell", async (c) => (await import("./shell")).shellTab(c)],
  ["files", "Files", async (c) => (await import("./files")).filesTab(c)],
  ["diff", "Diff", async (c) => (await import("./diff")).diffTab(c)],
  ["agent", "Agent", async (c) => (await import("./agent")).agentTab(c)],
];

export async function sessionPage(id: string, tab: string): Promise<Page> {
  const list = await mcp.call<{ sessions: SessionView[] }>("session_list", { include_deleted: true });
  const session = (list.sessions ?? []).find((s) => s.session_id === id);
  const err = errorBox();
  if (!session) {
    err.show(`There is no session ${id} of yours: it may belong to another user, or the link is wrong.`);
    return { el: h("section", { class: "page" }, h("h1", null, "Session not found"), err.el, h("a", { attrs: { href: "#/" } }, "All sessions")) };
  }
  const cost = h("span", { class: "cost", attrs: { "aria-live": "off", title: "tokens and cost of this session" } }, "…");
  let disposed = false;
  const refreshCost = async () => {
    try {
      const u = (await usageBySession()).get(id);
      if (disposed) return;
      cost.textContent = u ? `${formatTokens(u.input_tokens + u.output_tokens)} tokens · ${formatCost(u.cost_usd)}` : "0 tokens · $0";
    } catch {
      cost.textContent = "usage unavailable";
    }
  };
  const costTimer = window.setInterval(refreshCost, 15_000);
  void refreshCost();
  const ctx: SessionContext = { session, refreshCost: () => void refreshCost() };

  const shown = tabs.filter(([key]) => key !== "agent" || mcp.has("agent_run"));
  if (!shown.some(([key]) => key === tab)) tab = "activity";
  const panel = h("div", { class: "tabpanel", id: "tabpanel", attrs: { role: "tabpanel", tabindex: -1 } });
  const tabList = h(
    "div",
    { class: "tabs", attrs: { role: "tablist", "aria-label": "Session views" } },
    ...shown.map(([key, label]) =>
      h(
        "a",
        {
          attrs: {
            role: "tab",
            href: `#/s/${encodeURIComponent(id)}/${key}`,
            "aria-selected": key === tab ? "true" : "false",
            "aria-controls": "tabpanel",
            id: `tab-${key}`,
          },
          on: {
            keydown: (ev) => {
              // Arrow keys move between tabs, as in any tablist.
              const i = shown.findIndex(([k]) => k === tab);
              const next = ev.key === "ArrowRight" ? i + 1 : ev.key === "ArrowLeft" ? i - 1 : -2;
              if (next === -2) return;
              ev.preventDefault();
              const [k] = shown[(next + shown.length) % shown.length];
              location.hash = `#/s/${encodeURIComponent(id)}/${k}`;
              requestAnimationFrame(() => document.getElementById(`tab-${k}`)?.focus());
            },
          },
        },
        label,
      ),
    ),
  );
  panel.setAttribute("aria-labelledby", `tab-${tab}`);
  let current: Tab | null = null;
  const loader = shown.find(([key]) => key === tab)![2];
  loader(ctx)
    .then((t) => {
      if (disposed) return t.dispose?.();
      current = t;
      replace(panel, t.el);
    })
    .catch((e) => {
      const box = errorBox();
      box.show(e);
      replace(panel, box.el);
    });

  const el = h(
    "section",
    { class: "page session" },
    h(
      "div",
      { class: "session-head" },
      h("h1", null, session.name || session.session_id),
      h("span", { class: `badge ${session.state}` }, session.state),
      h("span", { class: "muted source" }, session.source ? `${session.mode}: ${session.source}` : session.mode),
      cost,
    ),
    tabList,
    panel,
  );
  return {
    el,
    dispose() {
      disposed = true;
      window.clearInterval(costTimer);
      current?.dispose?.();
    },
  };
}
