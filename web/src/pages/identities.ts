// Identities: your git identities (identity_list): who the commits a
// session pushes are by, and the public key to give GitHub, GitLab or a
// server's authorized_keys. Secrets never reach the page: the tool does
// not return them. Identities are made with 'warren identity create'.
import { h, replace, errorBox, button } from "../dom";
import { mcp } from "../mcp";
import type { Page } from "../main";

interface Identity {
  name: string;
  author_name: string;
  author_email: string;
  public_key?: string;
  fingerprint?: string;
  has_token: boolean;
  created_at: string;
}

export function identitiesPage(): Page {
  const err = errorBox();
  if (!mcp.has("identity_list")) {
    err.show("This server keeps no git identities (identity_list is not served).");
    return { el: h("section", { class: "page" }, h("h1", null, "Git identities"), err.el) };
  }
  const list = h("div", { class: "identities" });
  const copied = h("p", { class: "status-line", attrs: { role: "status", "aria-live": "polite" } });

  async function copy(id: Identity): Promise<void> {
    try {
      await navigator.clipboard.writeText(id.public_key ?? "");
      copied.textContent = `Copied the public key of ${id.name}.`;
    } catch {
      copied.textContent = "The browser did not allow copying: select the key and copy it.";
    }
  }

  function card(id: Identity): HTMLElement {
    const keyId = `key-${id.name}`;
    return h(
      "li",
      { class: "identity", attrs: { "data-identity": id.name } },
      h("h2", null, id.name),
      h(
        "dl",
        null,
        h("dt", null, "Commits by"),
        h("dd", null, `${id.author_name} <${id.author_email}>`),
        h("dt", null, "SSH key"),
        h("dd", null, id.fingerprint ? h("code", null, id.fingerprint) : "none (a token only)"),
        h("dt", null, "Forge token"),
        h("dd", null, id.has_token ? "yes: https clones and pushes, pull requests" : "no"),
        h("dt", null, "Created"),
        h("dd", null, new Date(id.created_at).toLocaleString()),
      ),
      id.public_key
        ? [
            h("label", { attrs: { for: keyId } }, "Public key: add it to GitHub, GitLab or the server's authorized_keys"),
            h("textarea", { id: keyId, class: "public-key", attrs: { readonly: true, rows: 2, spellcheck: "false" }, props: { value: id.public_key } }),
            button("Copy the public key", () => void copy(id), { attrs: { "aria-label": `copy the public key of ${id.name}` } }),
          ]
        : null,
    );
  }

  async function load(): Promise<void> {
    err.clear();
    try {
      const r = await mcp.call<{ identities: Identity[] }>("identity_list");
      const ids = r.identities ?? [];
      replace(
        list,
        ids.length
          ? h("ul", null, ...ids.map(card))
          : h("p", { class: "empty" }, "You have no identity yet. The server's operator makes one with: warren identity create --user YOU --name NAME --author-name … --author-email …"),
      );
      document.body.dataset.identitiesLoaded = String(ids.length);
    } catch (e) {
      err.show(e);
    }
  }

  void load();
  return {
    el: h(
      "section",
      { class: "page" },
      h("h1", null, "Git identities"),
      h("p", { class: "help" }, "Sessions created with an identity clone with its key or token, and session_push commits as its author. Keys and tokens stay sealed on the server."),
      err.el,
      list,
      copied,
    ),
  };
}
