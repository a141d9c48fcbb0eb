// The console's only way to the server: MCP over streamable HTTP at /mcp,
// with the official TypeScript SDK. A console session is two secrets: the
// session cookie (HttpOnly: no script here ever sees it or a token), which
// the browser also sends to every other port of this host, and the console
// key from the sign-in answer, which this module keeps in the origin's
// localStorage (no other origin, not even another port, can read it) and
// sends as a header with every request. The server takes neither alone.
// This module keeps one connection, reports its state (online,
// reconnecting, signed out), and reconnects by itself when the server
// comes back.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

export type ConnState = "connecting" | "online" | "offline" | "signed-out";

// ToolError is a tool's own error result (isError), in its words, with
// the structured output the tool still gave (agent_run's chat id and
// totals of a run that failed).
export class ToolError extends Error {
  constructor(readonly tool: string, message: string, readonly structured?: Record<string, unknown>) {
    super(message);
  }
}

// SignedOut is raised when the server refuses the cookie.
export class SignedOut extends Error {}

// Offline is raised when the server cannot be reached.
export class Offline extends Error {}

export interface CallOptions {
  onProgress?: (message: string, progress: number) => void;
  signal?: AbortSignal;
  // timeoutMs bounds the call, reset by each progress notification.
  timeoutMs?: number;
}

// An elicitation request (the agent asks before a tool call).
export interface Elicitation {
  message: string;
  schema: Record<string, any>;
}
export type ElicitAnswer = { action: "accept"; content?: Record<string, unknown> } | { action: "decline" | "cancel" };
type ElicitHandler = (e: Elicitation) => Promise<ElicitAnswer>;

// The console key: sent in this header, kept under this name in
// localStorage, so that a reload and the console's other tabs in this
// browser share the sign-in (as they share its cookie). It never goes into
// a URL or a cookie.
const KEY_HEADER = "Warren-Console-Key";
const KEY_STORE = "warren-console-key";
let keyInMemory = ""; // when storage is unavailable (a locked-down browser)

function consoleKey(): string {
  try {
    return localStorage.getItem(KEY_STORE) ?? keyInMemory;
  } catch {
    return keyInMemory;
  }
}

function storeKey(key: string): void {
  keyInMemory = key;
  try {
    if (key) localStorage.setItem(KEY_STORE, key);
    else localStorage.removeItem(KEY_STORE);
  } catch {
    // keyInMemory holds it for this page.
  }
}

// keyed is fetch with the console key, read at each request: a sign-in in
// another tab replaces the cookie and the key together.
function keyed(url: string | URL, init?: RequestInit): Promise<Response> {
  const headers = new Headers(init?.headers);
  const key = consoleKey();
  if (key) headers.set(KEY_HEADER, key);
  return fetch(url, { ...init, headers, credentials: "same-origin" });
}

const noValidation = { getValidator: () => (data: unknown) => ({ valid: true, data, errorMessage: undefined }) };

class Connection {
  state: ConnState = "connecting";
  detail = "";
  tools = new Set<string>();
  private client: Client | null = null;
  private connecting: Promise<Client> | null = null;
  private listeners = new Set<(s: ConnState) => void>();
  private retry = 0;
  private retryTimer: number | undefined;
  elicit: ElicitHandler | null = null;

  onState(fn: (s: ConnState) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private set(state: ConnState, detail = ""): void {
    const changed = state !== this.state || detail !== this.detail;
    this.state = state;
    this.detail = detail;
    if (changed) for (const fn of this.listeners) fn(state);
  }

  // connect opens a fresh MCP session (also after the server restarted and
  // forgot the old one).
  connect(): Promise<Client> {
    if (this.client) return Promise.resolve(this.client);
    if (this.connecting) return this.connecting;
    this.connecting = (async () => {
      const client = new Client(
        { name: "warren-console", version: "1" },
        { capabilities: { elicitation: { form: {} } }, jsonSchemaValidator: noValidation as any },
      );
      client.setRequestHandler(ElicitRequestSchema, async (req: any) => {
        if (!this.elicit) return { action: "decline" };
        const p = req.params ?? {};
        return this.elicit({ message: String(p.message ?? ""), schema: p.requestedSchema ?? {} });
      });
      const transport = new StreamableHTTPClientTransport(new URL("/mcp", location.origin), {
        requestInit: { credentials: "same-origin" },
        fetch: keyed,
      });
      try {
        await client.connect(transport);
        const list = await client.listTools();
        this.tools = new Set(list.tools.map((t) => t.name));
      } catch (err) {
        void client.close().catch(() => {});
        throw this.classify(err);
      }
      client.onerror = () => {};
      this.client = client;
      this.retry = 0;
      this.set("online");
      return client;
    })();
    this.connecting.catch(() => {}).finally(() => (this.connecting = null));
    return this.connecting;
  }

  // classify turns a transport failure into the state it means.
  private classify(err: unknown): Error {
    if (err instanceof StreamableHTTPError && err.code === 401) {
      const text = String(err.message).replace(/^Streamable HTTP error: Error POSTing to endpoint: /, "").trim();
      this.dropClient();
      this.set("signed-out", text || "Sign in to continue.");
      return new SignedOut(text);
    }
    if (err instanceof StreamableHTTPError && err.code === 404) {
      // The server no longer knows this MCP session (it restarted).
      this.dropClient();
      return new Offline("the server restarted: reconnecting");
    }
    if (err instanceof TypeError || (err instanceof StreamableHTTPError && (err.code ?? 0) >= 500)) {
      this.dropClient();
      this.set("offline", "The server cannot be reached.");
      this.scheduleReconnect();
      return new Offline("the server cannot be reached: the console reconnects by itself");
    }
    return err instanceof Error ? err : new Error(String(err));
  }

  private dropClient(): void {
    const c = this.client;
    this.client = null;
    if (c) void c.close().catch(() => {});
  }

  private scheduleReconnect(): void {
    if (this.retryTimer !== undefined) return;
    const delay = Math.min(1000 * 2 ** this.retry, 10_000);
    this.retry++;
    this.retryTimer = window.setTimeout(() => {
      this.retryTimer = undefined;
      this.connect().catch(() => {});
    }, delay);
  }

  // reconnect after signing in.
  reset(): void {
    this.dropClient();
    this.set("connecting");
  }

  // call calls a tool and returns its structured content; a tool error
  // becomes a ToolError with the tool's own message.
  async call<T = any>(name: string, args: Record<string, unknown> = {}, opts: CallOptions = {}): Promise<T> {
    let client = await this.connect();
    const run = () =>
      client.callTool({ name, arguments: args }, undefined, {
        signal: opts.signal,
        timeout: opts.timeoutMs ?? 120_000,
        resetTimeoutOnProgress: true,
        onprogress: opts.onProgress ? (p: any) => opts.onProgress!(String(p.message ?? ""), Number(p.progress ?? 0)) : undefined,
      });
    let res: any;
    try {
      res = await run();
    } catch (err) {
      const e = this.classify(err);
      if (e instanceof Offline && this.state !== "offline") {
        // A forgotten MCP session: open a new one and try once more.
        client = await this.connect();
        res = await run().catch((err2) => {
          throw this.classify(err2);
        });
      } else {
        throw e;
      }
    }
    if (res.isError) {
      const text = (res.content ?? []).map((c: any) => (c.type === "text" ? c.text : "")).join("\n");
      throw new ToolError(name, text || `${name} failed`, res.structuredContent as Record<string, unknown> | undefined);
    }
    return (res.structuredContent ?? {}) as T;
  }

  has(tool: string): boolean {
    return this.tools.has(tool);
  }
}

export const mcp = new Connection();

// signIn trades a login code or a pasted token for the session cookie and
// the console key.
export async function signIn(body: { code?: string; token?: string }): Promise<void> {
  let resp: Response;
  try {
    resp = await fetch("/console/login", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      credentials: "same-origin",
    });
  } catch {
    throw new Offline("the server cannot be reached");
  }
  const j = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    throw new Error(j.error || `sign-in failed (${resp.status})`);
  }
  if (typeof j.key !== "string" || !j.key) throw new Error("the server's sign-in answer has no console key: reload the page");
  storeKey(j.key);
  mcp.reset();
}

// signOut ends the console session on the server, which ends its key
// there too. It returns false when the server runs without authentication
// (there is nothing to end).
export async function signOut(): Promise<boolean> {
  const resp = await keyed("/console/logout", { method: "POST" }).catch(() => null);
  if (resp?.status === 409) return false;
  storeKey("");
  mcp.reset();
  return true;
}
