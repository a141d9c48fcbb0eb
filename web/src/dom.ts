// A small DOM builder instead of a UI framework. Every piece of text goes
// through createTextNode, so shell output, file contents and diffs can
// never become markup, whatever they hold; the build refuses the
// HTML-parsing APIs outright.

export type Child = Node | string | number | null | undefined | false | Child[];

export interface Props {
  class?: string;
  id?: string;
  // Attributes, set with setAttribute (aria-*, role, type, for, ...).
  attrs?: Record<string, string | number | boolean | undefined>;
  // Event listeners: { click: fn, keydown: fn }.
  on?: Partial<{ [K in keyof HTMLElementEventMap]: (ev: HTMLElementEventMap[K]) => void }>;
  // Properties set directly (value, checked, disabled, hidden, ...).
  props?: Record<string, unknown>;
}

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, p?: Props | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (p) {
    if (p.class) el.className = p.class;
    if (p.id) el.id = p.id;
    for (const [k, v] of Object.entries(p.attrs ?? {})) {
      if (v === undefined || v === false) continue;
      el.setAttribute(k, v === true ? "" : String(v));
    }
    for (const [k, v] of Object.entries(p.props ?? {})) (el as any)[k] = v;
    for (const [k, fn] of Object.entries(p.on ?? {})) el.addEventListener(k, fn as EventListener);
  }
  append(el, children);
  return el;
}

const SVG = "http://www.w3.org/2000/svg";

export function svg(tag: string, attrs: Record<string, string | number> = {}, ...children: Child[]): SVGElement {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  append(el, children);
  return el;
}

export function append(el: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// replace swaps an element's children.
export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

// errorBox shows an error where it happened, in words, for screen readers
// too; empty text hides it.
export function errorBox(): { el: HTMLElement; show(err: unknown): void; clear(): void } {
  const el = h("p", { class: "error", attrs: { role: "alert" }, props: { hidden: true } });
  return {
    el,
    show(err) {
      el.textContent = message(err);
      el.hidden = false;
    },
    clear() {
      el.textContent = "";
      el.hidden = true;
    },
  };
}

export function message(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

// button builds a button with an accessible name.
export function button(label: string, onclick: (ev: MouseEvent) => void, p: Props = {}): HTMLButtonElement {
  return h("button", { ...p, attrs: { type: "button", ...(p.attrs ?? {}) }, on: { click: onclick, ...(p.on ?? {}) } }, label);
}

// field wraps a control with its visible label.
export function field(label: string, control: HTMLElement): HTMLLabelElement {
  return h("label", { class: "field" }, h("span", null, label), control);
}

export function formatBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) return "–";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n >= 10 || i === 0 ? Math.round(n) : n.toFixed(1)} ${units[i]}`;
}

export function formatAge(iso: string, now = Date.now()): string {
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) return "–";
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

export function formatCost(usd: number): string {
  if (!usd) return "$0";
  return usd < 0.01 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`;
}

export function formatTokens(n: number): string {
  if (n < 1000) return String(n);
  if (n < 1e6) return `${(n / 1000).toFixed(n < 1e4 ? 1 : 0)}k`;
  return `${(n / 1e6).toFixed(1)}M`;
}

// confirmDialog asks a yes/no question in a modal dialog (keyboard:
// Enter confirms, Escape cancels) and resolves with the answer.
export function confirmDialog(question: string, yes: string): Promise<boolean> {
  return new Promise((resolve) => {
    const dlg = h("dialog", { class: "confirm", attrs: { "aria-label": question } });
    const done = (v: boolean) => {
      dlg.close();
      dlg.remove();
      resolve(v);
    };
    const ok = button(yes, () => done(true), { class: "danger" });
    append(dlg, [h("p", null, question), h("div", { class: "row" }, button("Cancel", () => done(false)), ok)]);
    dlg.addEventListener("cancel", (ev) => {
      ev.preventDefault();
      done(false);
    });
    document.body.appendChild(dlg);
    dlg.showModal();
    ok.focus();
  });
}

// download offers text as a file.
export function download(name: string, type: string, text: string): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = h("a", { attrs: { href: url, download: name } });
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
