// Usage: tokens and cost by day (a chart), by session, task, model and
// client (tables), totals, the alerts fired, unpriced models flagged, and
// CSV or JSON export of the table in view.
import { h, replace, errorBox, button, field, formatCost, formatTokens, formatBytes, download } from "../dom";
import { barChart } from "../chart";
import { mcp } from "../mcp";
import type { Page } from "../main";
import type { SessionView, UsageRow } from "./sessions";

interface Report {
  group_by: string;
  rows: UsageRow[];
  total: UsageRow & { unpriced_records?: number };
  unpriced_models: string[];
  alerts: { threshold: string; message: string; fired_at: string; enforce: boolean }[];
  csv?: string;
}

const groups: [string, string][] = [
  ["session", "Session"],
  ["task", "Task"],
  ["model", "Model"],
  ["client", "Client"],
];

export function usagePage(): Page {
  const err = errorBox();
  if (!mcp.has("usage_report")) {
    err.show("This server does not meter usage (the usage toolset is not served).");
    return { el: h("section", { class: "page" }, h("h1", null, "Usage"), err.el) };
  }
  const since = h("input", { id: "usage-since", attrs: { type: "date" } });
  const until = h("input", { id: "usage-until", attrs: { type: "date" } });
  const metric = h("select", { id: "usage-metric" }, h("option", { attrs: { value: "cost" } }, "cost"), h("option", { attrs: { value: "tokens" } }, "tokens"));
  const chart = h("div", { class: "chart-wrap" });
  const totals = h("div", { class: "totals" });
  const alerts = h("div", { class: "alerts" });
  // The table may be wider than a phone: it scrolls in its own box, which
  // the keyboard can reach (and a screen reader names by the caption).
  const tableBox = h("div", { class: "usage-table", attrs: { tabindex: 0, role: "region", "aria-labelledby": "usage-caption" } });
  const groupSelect = h("select", { id: "usage-group" }, ...groups.map(([k, l]) => h("option", { attrs: { value: k } }, l)));
  let view: Report | null = null;
  let byDay: Report | null = null;

  const range = () => {
    const a: Record<string, string> = {};
    if (since.value) a.since = since.value;
    if (until.value) a.until = until.value;
    return a;
  };

  function drawChart(): void {
    if (!byDay) return;
    const tokens = metric.value === "tokens";
    const bars = (byDay.rows ?? []).map((r) => ({ label: r.key, value: tokens ? r.input_tokens + r.output_tokens : r.cost_usd }));
    replace(chart, bars.length ? barChart(bars, tokens ? "Tokens by day (UTC)" : "Cost by day (UTC, USD)", tokens ? formatTokens : formatCost) : h("p", { class: "empty" }, "No usage in this range."));
  }

  async function loadTable(): Promise<void> {
    try {
      const bySession = groupSelect.value === "session";
      const [report, sessions] = await Promise.all([
        mcp.call<Report>("usage_report", { group_by: groupSelect.value, ...range() }),
        bySession ? mcp.call<{ sessions: SessionView[] }>("session_list", { include_deleted: true }) : null,
      ]);
      view = report;
      const names = new Map((sessions?.sessions ?? []).filter((x) => x.name).map((x) => [x.session_id, x.name]));
      const label = groups.find(([k]) => k === groupSelect.value)![1];
      // A session by its name, the id under it (and on hover).
      const rowHead = (key: string) =>
        names.has(key)
          ? h("th", { attrs: { scope: "row", title: key } }, names.get(key)!, h("span", { class: "id" }, key))
          : h("th", { attrs: { scope: "row" } }, key || "(none)");
      replace(
        tableBox,
        h(
          "table",
          null,
          h("caption", { id: "usage-caption" }, `By ${label.toLowerCase()}`),
          h("thead", null, h("tr", null, ...[label, "Input tokens", "Output tokens", "Cached", "Tool output", "Cost"].map((c) => h("th", { attrs: { scope: "col" } }, c)))),
          h(
            "tbody",
            null,
            ...(view.rows ?? []).map((r) =>
              h("tr", null, rowHead(r.key), ...[formatTokens(r.input_tokens), formatTokens(r.output_tokens), formatTokens(r.cached_tokens), formatBytes(r.tool_output_bytes), formatCost(r.cost_usd)].map((c) => h("td", { class: "num" }, c))),
            ),
          ),
        ),
      );
    } catch (e) {
      err.show(e);
    }
  }

  async function load(): Promise<void> {
    err.clear();
    try {
      byDay = await mcp.call<Report>("usage_report", { group_by: "day", ...range() });
      drawChart();
      const t = byDay.total;
      replace(
        totals,
        h("dl", null, h("dt", null, "Tokens"), h("dd", null, formatTokens(t.input_tokens + t.output_tokens)), h("dt", null, "Cost"), h("dd", null, formatCost(t.cost_usd)), h("dt", null, "Tool output"), h("dd", null, formatBytes(t.tool_output_bytes))),
        byDay.unpriced_models?.length ? h("p", { class: "warning", attrs: { role: "note" } }, `Unpriced models (counted at $0): ${byDay.unpriced_models.join(", ")}`) : null,
      );
      replace(
        alerts,
        h("h2", null, "Alerts"),
        byDay.alerts?.length ? h("ul", null, ...byDay.alerts.map((a) => h("li", { class: a.enforce ? "error" : "warning" }, `${a.fired_at.slice(0, 16).replace("T", " ")} ${a.message}`))) : h("p", { class: "muted" }, "No alert fired in this range."),
      );
      await loadTable();
    } catch (e) {
      err.show(e);
    }
  }

  const exportCSV = button("Export CSV", async () => {
    try {
      const r = await mcp.call<Report>("usage_report", { group_by: groupSelect.value, format: "csv", ...range() });
      download(`warren-usage-by-${groupSelect.value}.csv`, "text/csv", r.csv ?? "");
    } catch (e) {
      err.show(e);
    }
  });
  const exportJSON = button("Export JSON", () => {
    if (view) download(`warren-usage-by-${groupSelect.value}.json`, "application/json", JSON.stringify(view, null, 2));
  });
  for (const c of [since, until]) c.addEventListener("change", () => void load());
  groupSelect.addEventListener("change", () => void loadTable());
  metric.addEventListener("change", drawChart);
  void load();
  return {
    el: h(
      "section",
      { class: "page" },
      h("h1", null, "Usage"),
      h("div", { class: "row wrap" }, field("Since", since), field("Until", until), field("Chart", metric), button("Refresh", () => void load())),
      err.el,
      chart,
      totals,
      h("div", { class: "row wrap" }, field("Table by", groupSelect), exportCSV, exportJSON),
      tableBox,
      alerts,
    ),
  };
}
