// The agent panel: runs warren's agent (agent_run) in this session and
// renders its events as they stream (one JSON event a line, in progress
// notifications); approval requests (MCP elicitation) get buttons.
// Shown only when the server serves agent_run.
import { h, errorBox, button, field, formatCost, formatTokens } from "../dom";
import { mcp, ToolError, type Elicitation, type ElicitAnswer } from "../mcp";
import type { SessionContext, Tab } from "./session";

interface AgentEvent {
  type: string;
  text?: string;
  call?: { id: string; name: string; arguments: string };
  result?: { id: string; name: string; text: string; is_error?: boolean; denied?: boolean; ms?: number };
  usage?: { model: string; input_tokens: number; output_tokens: number; cost_micros: number };
  done?: { reason?: string };
}

interface AgentOutput {
  answer: string;
  chat_id: string;
  ended: string;
  error?: string;
  input_tokens: number;
  output_tokens: number;
  cost_usd: number;
}

export function agentTab(ctx: SessionContext): Tab {
  const id = ctx.session.session_id;
  const prompt = h("textarea", { id: "agent-prompt", attrs: { rows: 3, placeholder: "What should the agent do in this session?" } });
  const model = h("input", { id: "agent-model", attrs: { type: "text", autocomplete: "off", placeholder: "server default" } });
  const turns = h("input", { id: "agent-turns", attrs: { type: "number", min: 1, max: 500, placeholder: "50" } });
  const err = errorBox();
  const log = h("div", { class: "agent-log", attrs: { role: "log", "aria-live": "polite", "aria-label": "Agent events" } });
  const approvals = h("div", { class: "approvals" });
  const totals = h("p", { class: "muted", attrs: { role: "status" } });
  let chatId = "";
  let text: HTMLElement | null = null;
  const calls = new Map<string, HTMLElement>();
  let abort = new AbortController();

  function show(ev: AgentEvent): void {
    switch (ev.type) {
      case "text":
        if (!text) {
          text = h("p", { class: "agent-text" });
          log.appendChild(text);
        }
        text.appendChild(document.createTextNode(ev.text ?? ""));
        return;
      case "tool_call": {
        text = null;
        const out = h("pre", { class: "agent-out", props: { hidden: true } });
        const line = h("div", { class: "agent-call", attrs: { "data-call": ev.call?.id ?? "" } }, h("code", null, `${ev.call?.name ?? "?"} ${ev.call?.arguments ?? ""}`), h("span", { class: "outcome pending" }, "…"), out);
        calls.set(ev.call?.id ?? "", line);
        log.appendChild(line);
        return;
      }
      case "progress": {
        const last = [...calls.values()].pop();
        const out = last?.querySelector("pre");
        if (out) {
          out.hidden = false;
          out.appendChild(document.createTextNode(ev.text ?? ""));
        }
        return;
      }
      case "tool_result": {
        const line = calls.get(ev.result?.id ?? "");
        const o = line?.querySelector(".outcome");
        if (o) {
          o.textContent = ev.result?.denied ? "denied" : ev.result?.is_error ? "failed" : `done${ev.result?.ms ? ` · ${ev.result.ms} ms` : ""}`;
          o.className = `outcome ${ev.result?.denied || ev.result?.is_error ? "failed" : "ok"}`;
        }
        return;
      }
      case "usage":
        if (ev.usage) totals.textContent = `last model call: ${ev.usage.model}, ${formatTokens(ev.usage.input_tokens + ev.usage.output_tokens)} tokens, ${formatCost(ev.usage.cost_micros / 1e6)}`;
        return;
      case "warning":
      case "error":
        text = null;
        log.appendChild(h("p", { class: ev.type === "error" ? "error" : "warning" }, ev.text ?? ev.type));
        return;
      case "done":
        text = null;
        return;
    }
  }

  // Approvals arrive as elicitation requests while the run waits.
  function ask(e: Elicitation): Promise<ElicitAnswer> {
    return new Promise((resolve) => {
      const box = h("div", { class: "approval", attrs: { role: "alertdialog", "aria-label": "Approve a tool call" } });
      const answer = (a: ElicitAnswer) => {
        box.remove();
        resolve(a);
      };
      const approve = button("Approve", () => answer({ action: "accept", content: { approve: true } }), { attrs: { id: "approve" } });
      box.append(
        h("p", null, e.message),
        h("div", { class: "row" }, approve, button("Decline", () => answer({ action: "decline" }), { class: "danger", attrs: { id: "decline" } })),
      );
      approvals.appendChild(box);
      approve.focus();
    });
  }

  const run = button("Run", async () => {
    const p = prompt.value.trim();
    if (!p) {
      err.show("Write what the agent should do first.");
      return;
    }
    err.clear();
    run.disabled = true;
    abort = new AbortController();
    log.appendChild(h("p", { class: "agent-prompt" }, `› ${p}`));
    text = null;
    mcp.elicit = ask;
    let buf = "";
    const args: Record<string, unknown> = { session_id: id, prompt: p };
    if (model.value.trim()) args.model = model.value.trim();
    if (turns.value) args.max_turns = Number(turns.value);
    if (chatId) args.resume = chatId;
    try {
      const out = await mcp.call<AgentOutput>("agent_run", args, {
        signal: abort.signal,
        timeoutMs: 300_000,
        onProgress: (msg) => {
          buf += msg;
          let nl: number;
          while ((nl = buf.indexOf("\n")) >= 0) {
            const line = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            try {
              show(JSON.parse(line));
            } catch {
              /* a line that is not an event */
            }
          }
        },
      });
      chatId = out.chat_id || chatId;
      log.appendChild(h("div", { class: "agent-answer" }, h("strong", null, "Answer: "), out.answer || "(none)"));
      totals.textContent = `${out.ended} · ${formatTokens(out.input_tokens + out.output_tokens)} tokens · ${formatCost(out.cost_usd)}`;
      if (out.error) err.show(out.error);
      prompt.value = "";
    } catch (e) {
      // A run that failed still has its chat: the next prompt continues it.
      const failed = e instanceof ToolError ? (e.structured as Partial<AgentOutput> | undefined) : undefined;
      if (failed?.chat_id) chatId = failed.chat_id;
      if (!abort.signal.aborted) err.show(e);
    } finally {
      mcp.elicit = null;
      run.disabled = false;
      ctx.refreshCost();
    }
  }, { attrs: { id: "agent-run" } });

  const stop = button("Stop", () => abort.abort(), { class: "danger" });
  const el = h(
    "div",
    { class: "agent" },
    field("Prompt", prompt),
    h("div", { class: "row wrap" }, field("Model", model), field("Max turns", turns), run, stop),
    err.el,
    approvals,
    log,
    totals,
  );
  return {
    el,
    dispose: () => {
      abort.abort();
      mcp.elicit = null;
    },
  };
}
