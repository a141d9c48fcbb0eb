// An MCP client that signs in with OAuth the way remote-capable clients
// do, through the TypeScript SDK's own OAuth client
// (@modelcontextprotocol/sdk, pinned by e2e_oauth_test.go). It runs
// beside warren in the test: it listens for its redirect on loopback like
// a native app, asks the test (one JSON line on stdout) to drive a browser
// to the authorization URL, and reports each step as a JSON line.
//
// node oauth-client.mjs MCP_URL WAIT_FOR_EXPIRY_MS [CLIENT_METADATA_URL]
import http from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const [mcpURL, expiryMs, metadataURL] = process.argv.slice(2);
const say = (o) => process.stdout.write(JSON.stringify(o) + "\n");

// The redirect: a loopback listener, as native apps do (RFC 8252).
let onCode;
const server = http.createServer((req, res) => {
  const u = new URL(req.url, "http://127.0.0.1");
  res.setHeader("Content-Type", "text/plain");
  res.end("signed in: you can close this window\n");
  if (u.pathname === "/callback" && onCode) onCode(u.searchParams);
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const redirectUrl = `http://127.0.0.1:${server.address().port}/callback`;

const store = { redirects: 0 };
const provider = {
  get redirectUrl() { return redirectUrl; },
  get clientMetadata() {
    return { client_name: "SDK Test Client", redirect_uris: [redirectUrl], grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"], token_endpoint_auth_method: "none" };
  },
  clientMetadataUrl: metadataURL || undefined,
  state() { store.state = "st-" + Math.random().toString(36).slice(2); return store.state; },
  clientInformation() { return store.client; },
  saveClientInformation(c) { store.client = c; },
  tokens() { return store.tokens; },
  saveTokens(t) { store.tokens = t; },
  saveCodeVerifier(v) { store.verifier = v; },
  codeVerifier() { return store.verifier; },
  invalidateCredentials(scope) { if (scope === "all" || scope === "tokens") store.tokens = undefined; if (scope === "all") store.client = undefined; },
  redirectToAuthorization(url) { store.redirects++; say({ event: "authorize", url: url.href }); },
};

const issuer = new URL(mcpURL).origin;
function waitForCode() {
  return new Promise((resolve, reject) => {
    onCode = (q) => {
      onCode = undefined;
      if (q.get("error")) return reject(new Error("authorization refused: " + q.get("error") + " " + q.get("error_description")));
      if (q.get("state") !== store.state) return reject(new Error("wrong state in the redirect"));
      if (q.get("iss") !== issuer) return reject(new Error(`iss ${q.get("iss")} is not ${issuer} (RFC 9207)`));
      resolve(q.get("code"));
    };
  });
}

async function connect() {
  let transport = new StreamableHTTPClientTransport(new URL(mcpURL), { authProvider: provider });
  const client = new Client({ name: "sdk-oauth-test", version: "1" });
  try {
    await client.connect(transport);
    return client;
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
  }
  const code = await waitForCode();
  await transport.finishAuth(code);
  transport = new StreamableHTTPClientTransport(new URL(mcpURL), { authProvider: provider });
  await client.connect(transport);
  return client;
}

const text = (r) => r.content.map((c) => c.text ?? "").join("");
try {
  const client = await connect();
  say({ event: "authorized", client_id: store.client.client_id, resource_ok: true });
  const tools = await client.listTools();
  const call = await client.callTool({ name: "shell_exec", arguments: { command: "echo via-oauth" } });
  say({ event: "called", tools: tools.tools.length, out: text(call) });

  // Refresh after expiry: the SDK sees the 401 and refreshes by itself.
  const before = store.tokens.access_token;
  await new Promise((r) => setTimeout(r, Number(expiryMs)));
  const again = await client.callTool({ name: "shell_exec", arguments: { command: "echo after-refresh" } });
  say({ event: "refreshed", changed: store.tokens.access_token !== before, out: text(again), redirects: store.redirects });

  // Revocation (RFC 7009) of the refresh token ends the authorization:
  // the next call is refused, the refresh fails, and the SDK asks for a
  // new authorization.
  const meta = await (await fetch(issuer + "/.well-known/oauth-authorization-server")).json();
  const rv = await fetch(meta.revocation_endpoint, { method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ token: store.tokens.refresh_token, token_type_hint: "refresh_token", client_id: store.client.client_id }) });
  let refused = "";
  try {
    await client.callTool({ name: "shell_exec", arguments: { command: "echo after-revocation" } });
  } catch (e) {
    refused = String(e);
  }
  say({ event: "revoked", status: rv.status, refused, redirects: store.redirects });
  await client.close().catch(() => {});
} catch (e) {
  say({ event: "error", error: String(e && e.stack || e) });
}
server.close();
process.exit(0);
