// Renders terminal output into a <pre>: SGR colours and bold/italic/
// underline become CSS classes on spans; every other escape sequence is
// dropped; a lone carriage return rewrites the current line (progress
// bars). Text only ever becomes text nodes. warren's shell is not a PTY,
// so this is all a terminal emulator would add for it.

interface Style {
  fg: number; // -1: default; 0-15
  bg: number;
  bold: boolean;
  dim: boolean;
  italic: boolean;
  underline: boolean;
}

const plain = (): Style => ({ fg: -1, bg: -1, bold: false, dim: false, italic: false, underline: false });

// An escape sequence: CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \),
// or a two-byte ESC x. Also C1 CSI (U+009B).
const ESC = /\x1b\[[0-?]*[ -/]*[@-~]|\x9b[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[P^_][^\x1b]*\x1b\\|\x1b[@-Z\\-_]|\x1b/g;

// The start of an escape sequence cut off at the end of a chunk.
const INCOMPLETE = /(?:\x1b|\x1b\[[0-?]*[ -/]*|\x1b\][^\x07\x1b]*\x1b?|\x1b[P^_][^\x1b]*\x1b?)$/;

// Control characters other than tab, newline and carriage return are
// shown as nothing.
const CONTROL = /[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]/g;

export class AnsiView {
  readonly el: HTMLPreElement;
  private style = plain();
  private line: HTMLSpanElement;
  private pending = ""; // an escape sequence cut between two chunks
  private bytes = 0;
  // maxChars bounds what the view keeps: the oldest lines go first.
  constructor(el: HTMLPreElement, private maxChars = 2_000_000) {
    this.el = el;
    this.line = this.newLine();
  }

  private newLine(): HTMLSpanElement {
    const span = document.createElement("span");
    span.className = "line";
    this.el.appendChild(span);
    return span;
  }

  clear(): void {
    this.el.replaceChildren();
    this.style = plain();
    this.pending = "";
    this.bytes = 0;
    this.line = this.newLine();
  }

  // write renders a chunk of output.
  write(chunk: string, cls?: string): void {
    let s = this.pending + chunk;
    this.pending = "";
    // Keep an unfinished escape sequence for the next chunk.
    const cut = INCOMPLETE.exec(s);
    if (cut) {
      this.pending = cut[0].length < 4096 ? cut[0] : "";
      s = s.slice(0, cut.index);
    }
    let at = 0;
    ESC.lastIndex = 0;
    for (let m = ESC.exec(s); m; m = ESC.exec(s)) {
      this.text(s.slice(at, m.index), cls);
      this.escape(m[0]);
      at = m.index + m[0].length;
    }
    this.text(s.slice(at), cls);
    this.trim();
  }

  // note writes a line of the console's own (a prompt, an exit code).
  note(text: string, cls: string): void {
    if (this.line.childNodes.length > 0) this.text("\n");
    const span = document.createElement("span");
    span.className = cls;
    span.textContent = text;
    this.line.appendChild(span);
    this.text("\n");
  }

  private text(t: string, cls?: string): void {
    if (!t) return;
    t = t.replace(/\r\n/g, "\n").replace(CONTROL, "");
    const parts = t.split(/(\n|\r)/);
    for (const p of parts) {
      if (p === "\n") {
        this.line.appendChild(document.createTextNode("\n"));
        this.line = this.newLine();
      } else if (p === "\r") {
        this.line.replaceChildren(); // rewrite the line from its start
      } else if (p) {
        this.bytes += p.length;
        const span = document.createElement("span");
        const c = this.classes(cls);
        if (c) span.className = c;
        span.textContent = p;
        this.line.appendChild(span);
      }
    }
  }

  private classes(extra?: string): string {
    const st = this.style;
    const c: string[] = [];
    if (extra) c.push(extra);
    if (st.fg >= 0) c.push(`fg${st.fg}`);
    if (st.bg >= 0) c.push(`bg${st.bg}`);
    if (st.bold) c.push("b");
    if (st.dim) c.push("dim");
    if (st.italic) c.push("i");
    if (st.underline) c.push("u");
    return c.join(" ");
  }

  private escape(seq: string): void {
    if (!seq.startsWith("\x1b[") || !seq.endsWith("m")) return; // only SGR has a visible effect
    const params = seq.slice(2, -1).split(";").map((p) => (p === "" ? 0 : Number(p)));
    for (let i = 0; i < params.length; i++) {
      const p = params[i];
      const st = this.style;
      if (p === 0) this.style = plain();
      else if (p === 1) st.bold = true;
      else if (p === 2) st.dim = true;
      else if (p === 3) st.italic = true;
      else if (p === 4) st.underline = true;
      else if (p === 22) st.bold = st.dim = false;
      else if (p === 23) st.italic = false;
      else if (p === 24) st.underline = false;
      else if (p >= 30 && p <= 37) st.fg = p - 30;
      else if (p === 39) st.fg = -1;
      else if (p >= 40 && p <= 47) st.bg = p - 40;
      else if (p === 49) st.bg = -1;
      else if (p >= 90 && p <= 97) st.fg = p - 90 + 8;
      else if (p >= 100 && p <= 107) st.bg = p - 100 + 8;
      else if (p === 38 || p === 48) {
        // 256 colours: the first 16 map to the palette; others and
        // true colour are left at the default rather than guessed.
        const which = p === 38 ? "fg" : "bg";
        if (params[i + 1] === 5) {
          const n = params[i + 2];
          st[which] = n >= 0 && n < 16 ? n : -1;
          i += 2;
        } else if (params[i + 1] === 2) {
          st[which] = -1;
          i += 4;
        }
      }
    }
  }

  // trim drops the oldest lines past maxChars.
  private trim(): void {
    while (this.bytes > this.maxChars && this.el.firstChild && this.el.firstChild !== this.line) {
      this.bytes -= (this.el.firstChild.textContent ?? "").length;
      this.el.removeChild(this.el.firstChild);
    }
  }
}
