// A shell of your own in the session: a <pre> that renders the output of
// shell_exec as it streams (progress notifications), the cwd in the
// prompt, exit codes, history on the arrow keys, and Ctrl-C mapped to
// shell_kill. Not a terminal emulator: warren's shell is not a PTY.
import { h, errorBox, button } from "../dom";
import { AnsiView } from "../ansi";
import { mcp } from "../mcp";
import type { SessionContext, Tab } from "./session";

interface ShellResult {
  exit_code: number;
  stdout: string;
  stderr: string;
  cwd: string;
  duration_ms: number;
  running: boolean;
  job_id?: string;
  timed_out: boolean;
  interrupted: boolean;
  truncated: boolean;
  warning?: string;
}

const historyKey = (id: string) => `warren.history.${id}`;

export function shellTab(ctx: SessionContext): Tab {
  const id = ctx.session.session_id;
  const pre = h("pre", { class: "shell ansi", id: "shell-output", attrs: { role: "log", "aria-label": "Shell output", "aria-live": "polite", tabindex: 0 } });
  const view = new AnsiView(pre);
  let cwd = ctx.session.cwd || "/workspace";
  const prompt = h("span", { class: "prompt", id: "shell-prompt" }, `${cwd} $`);
  const input = h("input", {
    id: "shell-input",
    attrs: { type: "text", autocomplete: "off", spellcheck: "false", "aria-label": "Command", "aria-describedby": "shell-help" },
  });
  const err = errorBox();
  const state = h("span", { class: "shell-state", id: "shell-state", attrs: { role: "status" } }, "ready");
  const kill = button("Interrupt (Ctrl-C)", () => void interrupt(), { props: { disabled: true }, attrs: { id: "shell-kill" } });
  const history: string[] = JSON.parse(sessionStorage.getItem(historyKey(id)) ?? "[]");
  let hpos = history.length;
  let draft = "";
  let running = false;
  // Leaving the tab does not cancel the call: cancelling would interrupt
  // the command, which goes on and shows up in the activity feed.
  const abort = new AbortController();

  function setRunning(on: boolean): void {
    running = on;
    kill.disabled = !on;
    state.textContent = on ? "running…" : "ready";
    pre.setAttribute("aria-busy", on ? "true" : "false");
  }

  async function run(command: string): Promise<void> {
    err.clear();
    view.note(`${cwd} $ ${command}`, "cmd");
    setRunning(true);
    let streamed = 0;
    const onProgress = (chunk: string) => {
      streamed += chunk.length;
      view.write(chunk);
      pre.scrollTop = pre.scrollHeight;
    };
    try {
      let r = await mcp.call<ShellResult>("shell_exec", { session_id: id, command }, { onProgress, timeoutMs: 120_000 });
      // A long command comes back as a job after the server's yield:
      // keep waiting for it, streaming its output.
      while (r.running && r.job_id && !abort.signal.aborted) {
        if (!streamed) view.write(r.stdout + r.stderr);
        streamed = 1;
        r = await mcp.call<ShellResult>("shell_wait", { job_id: r.job_id }, { onProgress, timeoutMs: 120_000 });
      }
      if (!streamed) {
        view.write(r.stdout);
        if (r.stderr) view.write(r.stderr, "stderr");
      }
      cwd = r.cwd || cwd;
      prompt.textContent = `${cwd} $`;
      const how = r.timed_out ? "timed out" : r.interrupted ? "interrupted" : "exit";
      view.note(`[${how} ${r.exit_code} · ${r.duration_ms} ms${r.truncated ? " · output truncated" : ""}]`, r.exit_code === 0 ? "exit ok" : "exit failed");
      if (r.warning) view.note(`[warning: ${r.warning}]`, "exit failed");
    } catch (e) {
      if (!abort.signal.aborted) {
        err.show(e);
        view.note(`[error: ${e instanceof Error ? e.message : String(e)}]`, "exit failed");
      }
    } finally {
      setRunning(false);
      pre.scrollTop = pre.scrollHeight;
      ctx.refreshCost();
      input.focus();
    }
  }

  async function interrupt(): Promise<void> {
    try {
      await mcp.call("shell_kill", { session_id: id });
    } catch (e) {
      err.show(e);
    }
  }

  input.addEventListener("keydown", (ev) => {
    if (ev.key === "c" && ev.ctrlKey && !ev.shiftKey && !ev.altKey && !ev.metaKey && !input.value.slice(input.selectionStart ?? 0, input.selectionEnd ?? 0)) {
      ev.preventDefault();
      if (running) void interrupt();
      else {
        view.note(`${cwd} $ ${input.value}^C`, "cmd");
        input.value = "";
      }
      return;
    }
    if (ev.key === "l" && ev.ctrlKey) {
      ev.preventDefault();
      view.clear();
      return;
    }
    if (ev.key === "ArrowUp" || ev.key === "ArrowDown") {
      ev.preventDefault();
      if (hpos === history.length) draft = input.value;
      hpos = Math.max(0, Math.min(history.length, hpos + (ev.key === "ArrowUp" ? -1 : 1)));
      input.value = hpos === history.length ? draft : history[hpos];
      input.setSelectionRange(input.value.length, input.value.length);
      return;
    }
    if (ev.key === "Enter") {
      ev.preventDefault();
      const command = input.value;
      if (!command.trim() || running) return;
      input.value = "";
      if (history[history.length - 1] !== command) history.push(command);
      while (history.length > 500) history.shift();
      sessionStorage.setItem(historyKey(id), JSON.stringify(history));
      hpos = history.length;
      void run(command);
    }
  });
  const el = h(
    "div",
    { class: "shell-tab" },
    pre,
    h("div", { class: "shell-line" }, h("label", { attrs: { for: "shell-input" } }, prompt), input),
    h("div", { class: "row" }, state, kill),
    h("p", { id: "shell-help", class: "help" }, "Enter runs the command in the session's jailed /bin/sh; ↑ and ↓ walk the history; Ctrl-C interrupts the running command; Ctrl-L clears."),
    err.el,
  );
  requestAnimationFrame(() => input.focus());
  return { el, dispose: () => abort.abort() };
}
