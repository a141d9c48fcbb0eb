// The console's entry: the frame (navigation, connection state), sign-in,
// and a hash router that loads each page's code only when it is opened,
// so the first load stays small.
import "./style.css";
import { h, replace, errorBox, message } from "./dom";
import { mcp, signIn, signOut, SignedOut } from "./mcp";

export interface Page {
  el: HTMLElement;
  // dispose stops the page's long polls and timers.
  dispose?(): void;
}

type Loader = (params: string[]) => Promise<Page>;

const routes: [RegExp, Loader][] = [
  [/^\/?$/, async () => (await import("./pages/sessions")).sessionsPage()],
  [/^\/s\/([^/]+)(?:\/(\w+))?$/, async ([id, tab]) => (await import("./pages/session")).sessionPage(decodeURIComponent(id), tab || "activity")],
  [/^\/tasks$/, async () => (await import("./pages/tasks")).tasksPage()],
  [/^\/usage$/, async () => (await import("./pages/usage")).usagePage()],
  [/^\/identities$/, async () => (await import("./pages/identities")).identitiesPage()],
];

const main = h("main", { id: "main", attrs: { tabindex: -1 } });
const status = h("div", { class: "status", attrs: { role: "status", "aria-live": "polite" } });
const signOutButton = h("button", { attrs: { type: "button" }, on: { click: () => void doSignOut() } }, "Sign out");
let current: Page | null = null;
let currentPath = "";

function nav(): HTMLElement {
  const link = (href: string, label: string) => h("a", { attrs: { href } }, label);
  return h(
    "header",
    { class: "top" },
    h("a", { class: "brand", attrs: { href: "#/", "aria-label": "warren: sessions" } }, "warren"),
    h("nav", { attrs: { "aria-label": "Main" } }, link("#/", "Sessions"), link("#/tasks", "Tasks"), link("#/usage", "Usage"), link("#/identities", "Git")),
    status,
    signOutButton,
  );
}

function markCurrentLink(path: string): void {
  for (const a of document.querySelectorAll<HTMLAnchorElement>("header nav a")) {
    const target = a.getAttribute("href")!.slice(1);
    const on = target === "/" ? path === "/" || path.startsWith("/s/") : path.startsWith(target);
    if (on) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

function showState(): void {
  status.className = `status ${mcp.state}`;
  switch (mcp.state) {
    case "online":
      status.textContent = "";
      break;
    case "connecting":
      status.textContent = "Connecting…";
      break;
    case "offline":
      status.textContent = "Server unreachable: reconnecting…";
      break;
    case "signed-out":
      status.textContent = "Signed out";
      break;
  }
  signOutButton.hidden = mcp.state === "signed-out";
}

async function route(): Promise<void> {
  const path = location.hash.replace(/^#/, "") || "/";
  if (mcp.state === "signed-out") {
    showLogin(mcp.detail);
    return;
  }
  if (path === currentPath && current) return;
  current?.dispose?.();
  current = null;
  currentPath = path;
  markCurrentLink(path);
  for (const [re, load] of routes) {
    const m = re.exec(path);
    if (!m) continue;
    try {
      const page = await load(m.slice(1));
      if (currentPath !== path) {
        page.dispose?.();
        return;
      }
      current = page;
      replace(main, page.el);
    } catch (err) {
      if (err instanceof SignedOut) return; // the state listener shows the form
      const box = errorBox();
      box.show(err);
      replace(main, h("h1", null, "This page could not be loaded"), box.el);
    }
    return;
  }
  replace(main, h("h1", null, "Not found"), h("p", null, h("a", { attrs: { href: "#/" } }, "Back to the sessions")));
}

function showLogin(reason: string): void {
  status.className = "status signed-out";
  status.textContent = "Not signed in";
  signOutButton.hidden = true;
  current?.dispose?.();
  current = null;
  currentPath = "";
  const input = h("input", {
    id: "token",
    attrs: { type: "password", autocomplete: "off", spellcheck: "false", required: true, "aria-describedby": "token-help" },
  });
  const err = errorBox();
  const submit = h("button", { attrs: { type: "submit" } }, "Sign in");
  const form = h(
    "form",
    {
      class: "login",
      attrs: { "aria-labelledby": "login-title" },
      on: {
        submit: async (ev) => {
          ev.preventDefault();
          err.clear();
          submit.disabled = true;
          try {
            await signIn({ token: input.value.trim() });
            input.value = "";
            await start();
          } catch (e) {
            err.show(e);
          } finally {
            submit.disabled = false;
          }
        },
      },
    },
    h("h1", { id: "login-title" }, "Sign in to warren"),
    reason ? h("p", { class: "reason" }, reason) : null,
    h("label", { attrs: { for: "token" } }, "Token"),
    input,
    h("p", { id: "token-help", class: "help" }, "Open the console link that 'warren serve http' printed, or paste a token made with 'warren token create --user NAME'."),
    err.el,
    submit,
  );
  replace(main, form);
  input.focus();
}

async function doSignOut(): Promise<void> {
  if (!(await signOut())) {
    status.textContent = "This server runs without sign-in (--auth none): there is nothing to sign out of.";
    return;
  }
  location.hash = "#/";
  showLogin("You are signed out.");
}

async function start(): Promise<void> {
  showState();
  try {
    await mcp.connect();
  } catch (err) {
    if (mcp.state === "signed-out") {
      showLogin(mcp.detail);
      return;
    }
    const box = errorBox();
    box.show(message(err));
    replace(main, h("h1", null, "warren"), box.el);
    return;
  }
  currentPath = "";
  await route();
}

async function boot(): Promise<void> {
  const app = document.getElementById("app")!;
  replace(app, h("a", { class: "skip", attrs: { href: "#main" }, on: { click: (e) => { e.preventDefault(); main.focus(); } } }, "Skip to content"), nav(), main);
  let was = mcp.state;
  mcp.onState((s) => {
    showState();
    if (s === "signed-out") showLogin(mcp.detail);
    // Back from an outage: redraw the page with fresh data.
    if (s === "online" && was === "offline") {
      currentPath = "";
      void route();
    }
    was = s;
  });
  window.addEventListener("hashchange", () => void route());
  // A printed link carries a one-time code in its fragment: trade it for
  // the session cookie and take it out of the address bar and history.
  const code = /^#code=([A-Za-z0-9_-]+)$/.exec(location.hash)?.[1];
  if (code) {
    history.replaceState(null, "", location.pathname);
    try {
      await signIn({ code });
    } catch (err) {
      showState();
      showLogin(message(err));
      return;
    }
  }
  await start();
}

void boot();
