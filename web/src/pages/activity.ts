// The live activity feed of a session: every client's tool calls, their
// output as it streams and their outcomes, from session_watch. A long poll
// that streams events as progress notifications while it waits.
import { h, errorBox } from "../dom";
import { AnsiView } from "../ansi";
import { mcp, Offline, SignedOut } from "../mcp";
import type { SessionContext, Tab } from "./session";

export interface WatchEvent {
  seq: number;
  at: string;
  kind: "call" | "output" | "result";
  call_id: string;
  tool: string;
  client: string;
  // The call came from this console (the server knows it from the sign-in).
  console?: boolean;
  summary?: string;
  stream?: string;
  text?: string;
  is_error?: boolean;
  duration_ms?: number;
}

interface CallItem {
  el: HTMLLIElement;
  out: AnsiView | null;
  outcome: HTMLElement;
}

const maxItems = 300;

export function activityTab(ctx: SessionContext): Tab {
  const id = ctx.session.session_id;
  const err = errorBox();
  const list = h("ol", { class: "feed hide-console", attrs: { "aria-label": "Activity", "aria-live": "polite", "aria-relevant": "additions" } });
  const empty = h("p", { class: "empty" }, "Nothing has happened in this session yet. Calls from any client appear here as they happen.");
  // The console's own calls (the Files tab's listing, the Diff tab's
  // session_diff, your commands in the Shell tab) are set apart: hidden
  // until asked for, then marked.
  const showConsole = h("input", { id: "show-console", attrs: { type: "checkbox" }, on: { change: () => counts() } });
  const showLabel = h("label", { attrs: { for: "show-console" } }, "Show the console's own calls (0)");
  function counts(): void {
    const own = list.querySelectorAll("li.console").length;
    showLabel.textContent = `Show the console's own calls (${own})`;
    list.classList.toggle("hide-console", !showConsole.checked);
    empty.hidden = list.children.length - (showConsole.checked ? 0 : own) > 0;
  }
  const items = new Map<string, CallItem>();
  let cursor = 0;
  const abort = new AbortController();

  function item(e: WatchEvent): CallItem {
    let it = items.get(e.call_id);
    if (it) return it;
    const time = new Date(e.at);
    const outcome = h("span", { class: "outcome pending" }, "running…");
    const el = h(
      "li",
      { class: e.console ? "console" : undefined, attrs: { "data-call": e.call_id, "data-tool": e.tool, "data-rendered-at": Date.now() } },
      h(
        "div",
        { class: "call" },
        h("time", { attrs: { datetime: e.at } }, time.toLocaleTimeString()),
        e.console
          ? h("span", { class: "client badge", attrs: { title: `this web console (MCP client ${e.client})` } }, "console")
          : h("span", { class: "client", attrs: { title: "MCP client" } }, e.client),
        h("span", { class: "tool" }, e.tool),
        h("code", { class: "summary" }, e.summary ?? ""),
        outcome,
      ),
    );
    it = { el, out: null, outcome };
    items.set(e.call_id, it);
    list.appendChild(el);
    while (list.children.length > maxItems) {
      const first = list.firstElementChild as HTMLElement;
      items.delete(first.dataset.call!);
      first.remove();
    }
    counts();
    return it;
  }

  function render(events: WatchEvent[]): void {
    const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    for (const e of events) {
      if (e.seq <= cursor) continue;
      cursor = e.seq;
      const it = item(e);
      if (e.kind === "call") {
        it.el.querySelector(".summary")!.textContent = e.summary ?? "";
      } else if (e.kind === "output") {
        if (!it.out) {
          const pre = h("pre", { class: "out ansi", attrs: { "aria-label": `output of ${e.tool}` } });
          it.el.appendChild(pre);
          it.out = new AnsiView(pre, 200_000);
        }
        it.out.write(e.text ?? "", e.stream === "stderr" ? "stderr" : undefined);
      } else if (e.kind === "result") {
        it.outcome.textContent = `${e.summary || (e.is_error ? "failed" : "done")}${e.duration_ms ? ` · ${e.duration_ms} ms` : ""}`;
        it.outcome.className = `outcome ${e.is_error ? "failed" : "ok"}`;
        ctx.refreshCost();
      }
    }
    if (atBottom && events.length) window.scrollTo(0, document.body.scrollHeight);
  }

  async function loop(): Promise<void> {
    let first = true;
    while (!abort.signal.aborted) {
      try {
        const args: Record<string, unknown> = { session_id: id, limit: 500 };
        if (first) args.tail = 200;
        else {
          args.after = cursor;
          args.wait_ms = 25_000;
        }
        const r = await mcp.call<{ events: WatchEvent[]; cursor: number; more: boolean }>("session_watch", args, {
          signal: abort.signal,
          timeoutMs: 60_000,
          onProgress: (msg) => {
            try {
              render(JSON.parse(msg).events ?? []);
            } catch {
              /* not an event batch */
            }
          },
        });
        err.clear();
        render(r.events ?? []);
        first = false;
      } catch (e) {
        if (abort.signal.aborted || e instanceof SignedOut) return;
        if (!(e instanceof Offline)) err.show(e);
        // Wait for the connection to come back, then go on from the cursor.
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
  }
  void loop();
  return {
    el: h("div", { class: "activity" }, h("p", { class: "row console-toggle" }, showConsole, showLabel), err.el, empty, list),
    dispose: () => abort.abort(),
  };
}
