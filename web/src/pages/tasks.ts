// Tasks: the board by status; claim a task for one of your sessions, add
// a note, mark it done with a link; who holds what and until when.
import { h, replace, errorBox, button, field } from "../dom";
import { mcp } from "../mcp";
import type { Page } from "../main";
import type { SessionView } from "./sessions";

interface Task {
  id: string;
  title: string;
  status: string;
  owner?: string;
  link?: string;
  notes: { at: string; by?: string; text: string }[];
  claim?: { user: string; session_id: string; expires_at: string };
  conflict: boolean;
}

// Each column with what it says when it is empty.
const columns: [string, string, string][] = [
  ["open", "Open", "No open task. Add one above; agents add theirs with task_add."],
  ["in_progress", "In progress", "Nothing in progress: claim an open task for one of your sessions."],
  ["blocked", "Blocked", "Nothing is blocked."],
  ["done", "Done", "Nothing done yet."],
];

export function tasksPage(): Page {
  const err = errorBox();
  const board = h("div", { class: "board" });
  const sessionSelect = h("select", { id: "claim-session" });
  const names = new Map<string, string>();
  let disposed = false;

  if (!mcp.has("task_list")) {
    err.show("This server has no task board (the tasks toolset is not served).");
    return { el: h("section", { class: "page" }, h("h1", null, "Tasks"), err.el) };
  }

  async function load(): Promise<void> {
    err.clear();
    try {
      const [r, s] = await Promise.all([mcp.call<{ tasks: Task[]; warning?: string }>("task_list"), mcp.call<{ sessions: SessionView[] }>("session_list")]);
      if (disposed) return;
      const active = (s.sessions ?? []).filter((x) => x.state === "active");
      for (const x of s.sessions ?? []) if (x.name) names.set(x.session_id, x.name);
      const chosen = sessionSelect.value;
      replace(sessionSelect, ...active.map((x) => h("option", { attrs: { value: x.session_id } }, x.name ? `${x.name} (${x.session_id})` : x.session_id)));
      if (chosen) sessionSelect.value = chosen;
      if (r.warning) err.show(r.warning);
      replace(
        board,
        ...columns.map(([status, label, none]) => {
          const tasks = (r.tasks ?? []).filter((t) => t.status === status);
          return h(
            "section",
            { class: "column", attrs: { "aria-labelledby": `col-${status}` } },
            h("h2", { id: `col-${status}` }, `${label} (${tasks.length})`),
            tasks.length ? h("ul", null, ...tasks.map(card)) : h("p", { class: "empty" }, none),
          );
        }),
      );
    } catch (e) {
      err.show(e);
    }
  }

  function card(t: Task): HTMLLIElement {
    const cardErr = errorBox();
    const act = async (b: HTMLButtonElement, tool: string, args: Record<string, unknown>) => {
      cardErr.clear();
      b.disabled = true;
      try {
        await mcp.call(tool, args);
        await load();
      } catch (e) {
        cardErr.show(e);
        b.disabled = false;
      }
    };
    const note = h("input", { attrs: { type: "text", "aria-label": `note for ${t.id}`, placeholder: "a note" } });
    const link = h("input", { attrs: { type: "url", "aria-label": `commit or pull request link for ${t.id}`, placeholder: "commit or PR link" } });
    const session = () => t.claim?.session_id || sessionSelect.value;
    const controls: HTMLElement[] = [];
    if (t.status !== "done") {
      controls.push(
        button(t.claim ? "Renew the claim" : "Claim", (ev) => void act(ev.currentTarget as HTMLButtonElement, "task_claim", { task_id: t.id, session_id: t.claim?.session_id || sessionSelect.value }), {
          attrs: { "aria-label": t.claim ? `renew the claim on ${t.id}` : `claim ${t.id} for the chosen session` },
        }),
        h("div", { class: "row" }, note, button("Add note", (ev) => {
          if (!note.value.trim()) return cardErr.show("Write the note first.");
          void act(ev.currentTarget as HTMLButtonElement, "task_update", { task_id: t.id, note: note.value.trim(), session_id: session() });
        }, { attrs: { "aria-label": `add note to ${t.id}` } })),
        h("div", { class: "row" }, link, button("Done", (ev) => {
          const args: Record<string, unknown> = { task_id: t.id, status: "done", session_id: session() };
          if (link.value.trim()) args.link = link.value.trim();
          void act(ev.currentTarget as HTMLButtonElement, "task_update", args);
        }, { attrs: { "aria-label": `mark ${t.id} done` } })),
      );
    }
    return h(
      "li",
      { class: "task", attrs: { "data-task": t.id } },
      h("div", { class: "row" }, h("strong", null, t.id), t.conflict ? h("span", { class: "badge failed" }, "conflict") : null),
      h("p", { class: "title" }, t.title),
      t.owner ? h("p", { class: "muted" }, `owner @${t.owner}`) : null,
      t.claim ? h("p", { class: "claim" }, `held by ${t.claim.user} in ${sessionLabel(t.claim.session_id)} until ${new Date(t.claim.expires_at).toLocaleString()}`) : null,
      t.link ? h("p", null, "link: ", h("a", { attrs: { href: safeLink(t.link), rel: "noopener noreferrer", target: "_blank" } }, t.link)) : null,
      t.notes?.length ? h("details", null, h("summary", null, `${t.notes.length} note${t.notes.length === 1 ? "" : "s"}`), h("ul", { class: "notes" }, ...t.notes.map((n) => h("li", null, `${n.at.slice(0, 16).replace("T", " ")} ${n.by ? n.by + ": " : ""}${n.text}`)))) : null,
      ...controls,
      cardErr.el,
    );
  }

  const sessionLabel = (id: string) => (names.get(id) ? `${names.get(id)} (${id})` : id);

  // Adding a task: task_add, as an agent would; the board writes it to
  // TASKS.md.
  const title = h("input", { id: "new-task", attrs: { type: "text", required: true, autocomplete: "off", maxlength: 500, placeholder: "what is to be done, on one line" } });
  const addErr = errorBox();
  const add = h("button", { attrs: { type: "submit" } }, "Add task");
  const addForm = h(
    "form",
    {
      class: "add-task",
      attrs: { "aria-label": "Add a task" },
      on: {
        submit: async (ev) => {
          ev.preventDefault();
          addErr.clear();
          if (!title.value.trim()) return addErr.show("Write the task's title first.");
          add.disabled = true;
          try {
            await mcp.call("task_add", { title: title.value.trim() });
            title.value = "";
            await load();
          } catch (e) {
            addErr.show(e);
          } finally {
            add.disabled = false;
          }
        },
      },
    },
    h("div", { class: "row wrap" }, field("New task", title), add),
    addErr.el,
  );

  void load();
  return {
    el: h("section", { class: "page" }, h("div", { class: "row wrap" }, h("h1", null, "Tasks"), field("Claim for session", sessionSelect), button("Refresh", () => void load())), err.el, addForm, board),
    dispose() {
      disposed = true;
    },
  };
}

// safeLink lets only http(s) links be followed: a link on the board is
// anyone's text.
function safeLink(link: string): string {
  try {
    const u = new URL(link);
    return u.protocol === "https:" || u.protocol === "http:" ? u.href : "#";
  } catch {
    return "#";
  }
}
