// The Antrea web UI: one page per hash route (#/summary, #/traceflow,
// #/policies, #/pipeline, #/flows, #/password), each filled from one call
// of the backend's JSON API (pkg/ui). No framework: the DOM is built with
// h(), text always through textContent; the only markup taken from the
// server is the SVG pkg/diagram draws, parsed as SVG, not HTML.

import type {
  Component, Endpoints, Pipeline, Policies, PolicyView, Summary, TraceflowResult, Flows, SessionInfo, NodeRealization,
} from "./types";

// ---- DOM helpers ----

type Child = Node | string | null | undefined | false;
type Attrs = Record<string, string | boolean | number | EventListener | undefined>;

function h(tag: string, attrs: Attrs = {}, ...children: Child[]): HTMLElement {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (typeof v === "function") el.addEventListener(k.replace(/^on/, ""), v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.append(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return el;
}

// fill replaces el's children, skipping the absent ones.
function fill(el: HTMLElement, ...children: Child[]) {
  el.replaceChildren(...children.filter((c): c is Node | string => c !== null && c !== undefined && c !== false));
}

const $ = (id: string) => document.getElementById(id) as HTMLElement;

function status(msg: string) {
  $("status").textContent = msg;
}

// ---- API ----

class ApiError extends Error {
  constructor(public status: number, message: string) {
    super(message);
  }
}

let csrfToken = "";
// tokenLogin: the server offers the Kubernetes token login; tokenSession:
// this session is one (it has no Password page).
let tokenLogin = false;
let tokenSession = false;

async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET") headers["X-CSRF-Token"] = csrfToken;
  const resp = await fetch(path, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data: unknown = null;
  try {
    data = await resp.json();
  } catch {
    // a body that is not JSON: the status says enough
  }
  if (!resp.ok) {
    const msg = (data as { error?: string } | null)?.error ?? `${resp.status} ${resp.statusText}`;
    if (resp.status === 401 && path !== "/api/v1/login") {
      csrfToken = "";
      showLogin(msg);
    }
    throw new ApiError(resp.status, msg);
  }
  return data as T;
}

// ---- layout ----

const pages: Record<string, { title: string; render: (root: HTMLElement) => Promise<void> }> = {
  summary: { title: "Summary", render: renderSummary },
  traceflow: { title: "Traceflow", render: renderTraceflow },
  policies: { title: "Policies", render: renderPolicies },
  pipeline: { title: "Pipeline", render: renderPipeline },
  flows: { title: "Flows", render: renderFlows },
  password: { title: "Password", render: renderPassword },
};

let refreshTimer: number | undefined;

function navLinks(current: string) {
  const nav = $("nav");
  nav.hidden = false;
  nav.replaceChildren(...Object.entries(pages).filter(([k]) => !(tokenSession && k === "password")).map(([k, p]) =>
    h("a", { href: `#/${k}`, "aria-current": k === current ? "page" : undefined }, p.title)));
  $("logout").hidden = false;
}

function errorBox(err: unknown): HTMLElement {
  const msg = err instanceof Error ? err.message : String(err);
  const code = err instanceof ApiError ? ` (HTTP ${err.status})` : "";
  return h("div", { class: "alert", role: "alert" }, msg + code);
}

async function route() {
  window.clearInterval(refreshTimer);
  const name = location.hash.replace(/^#\/?/, "") || "summary";
  const page = pages[name] ?? pages.summary;
  const key = pages[name] ? name : "summary";
  if (!csrfToken) {
    const s = await api<SessionInfo>("GET", "/api/v1/session");
    tokenLogin = !!s.tokenLoginEnabled;
    if (!s.loggedIn || !s.csrfToken) {
      showLogin(s.reason === "not logged in" ? "" : s.reason ?? "");
      return;
    }
    csrfToken = s.csrfToken;
    whoami(s);
  }
  navLinks(key);
  document.title = `${page.title} · Antrea`;
  const main = $("main");
  const heading = h("h1", { tabindex: "-1" }, page.title);
  const body = h("div", { class: "page", "data-page": key, "aria-busy": "true" }, h("p", {}, "Loading…"));
  main.replaceChildren(heading, body);
  heading.focus();
  try {
    await page.render(body);
  } catch (err) {
    body.replaceChildren(errorBox(err));
  } finally {
    body.setAttribute("aria-busy", "false");
  }
}

// whoami shows who the session acts as.
function whoami(s: SessionInfo) {
  tokenSession = !!s.tokenLogin;
  $("whoami").textContent = s.tokenLogin ? `${s.user} (token)` : (s.user ?? "");
}

// login posts the admin password or a token, then shows the page asked for.
async function login(body: { password?: string; token?: string }) {
  const s = await api<SessionInfo>("POST", "/api/v1/login", body);
  csrfToken = s.csrfToken ?? "";
  whoami(s);
  if (!location.hash || location.hash === "#/") location.hash = "#/summary";
  else await route();
}

function showLogin(message = "") {
  window.clearInterval(refreshTimer);
  $("nav").hidden = true;
  $("logout").hidden = true;
  document.title = "Log in · Antrea";
  const input = h("input", { id: "password", name: "password", type: "password", autocomplete: "current-password", required: true }) as HTMLInputElement;
  const msg = h("div", { id: "login-error", role: "alert", class: message ? "alert" : "" }, message);
  // method=post: were the script to fail, the browser would post the form
  // (refused by the server), never put the password in a URL.
  const form = h("form", { class: "login", method: "post", "aria-describedby": "login-error" },
    h("h1", {}, "Log in to Antrea"),
    h("label", { for: "password" }, "Admin password"),
    input,
    h("button", { type: "submit" }, "Log in"),
    msg,
    h("p", { class: "hint" }, "First login: the initial password is in the Secret kube-system/antrea-ui-admin, key initialPassword (see docs/ui.md)."),
  ) as HTMLFormElement;
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    msg.textContent = "";
    msg.className = "";
    try {
      await login({ password: input.value });
    } catch (err) {
      msg.className = "alert";
      msg.textContent = err instanceof Error ? err.message : String(err);
      input.select();
    }
  });
  const parts: HTMLElement[] = [form];
  if (tokenLogin) {
    const tok = h("input", { id: "token", name: "token", type: "password", autocomplete: "off", spellcheck: "false", required: true }) as HTMLInputElement;
    const tmsg = h("div", { id: "token-error", role: "alert" });
    const tform = h("form", { class: "login token", method: "post", "aria-describedby": "token-error" },
      h("h2", {}, "Or with a Kubernetes token"),
      h("label", { for: "token" }, "Bearer token"),
      tok,
      h("button", { type: "submit" }, "Log in with token"),
      tmsg,
      h("p", { class: "hint" }, "The UI then acts with the token's own rights: e.g. kubectl -n NAMESPACE create token SERVICEACCOUNT."),
    ) as HTMLFormElement;
    tform.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      tmsg.textContent = "";
      tmsg.className = "";
      try {
        await login({ token: tok.value.trim() });
      } catch (err) {
        tmsg.className = "alert";
        tmsg.textContent = err instanceof Error ? err.message : String(err);
        tok.select();
      }
    });
    parts.push(tform);
  }
  $("main").replaceChildren(...parts);
  input.focus();
}

// ---- formatting ----

function age(seconds: number): string {
  if (seconds < 90) return `${seconds}s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)}m`;
  if (seconds < 172800) return `${Math.round(seconds / 3600)}h`;
  return `${Math.round(seconds / 86400)}d`;
}

function badge(ok: boolean, okText: string, badText: string, title = ""): HTMLElement {
  return h("span", { class: ok ? "badge ok" : "badge bad", title: title || undefined }, ok ? `✔ ${okText}` : `✖ ${badText}`);
}

function table(headers: string[], rows: HTMLElement[], caption?: string): HTMLElement {
  return h("div", { class: "scroll" }, h("table", {},
    caption ? h("caption", {}, caption) : null,
    h("thead", {}, h("tr", {}, ...headers.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, ...rows)));
}

function td(...c: Child[]): HTMLElement {
  return h("td", {}, ...c);
}

function num(n: number | undefined): string {
  return n === undefined ? "–" : n.toLocaleString("en-US");
}

// svgNode parses the server's SVG (pkg/diagram output) as SVG.
function svgNode(svg: string, label: string): HTMLElement {
  const doc = new DOMParser().parseFromString(svg, "image/svg+xml");
  const wrap = h("figure", { class: "diagram", role: "img", "aria-label": label });
  const root = doc.documentElement;
  if (root.nodeName === "svg") wrap.append(document.importNode(root, true));
  else wrap.append("The diagram could not be drawn.");
  return wrap;
}

// ---- Summary ----

function conditionBadges(c: Component): HTMLElement {
  return h("span", { class: "conds" }, ...c.conditions.map((cd) =>
    badge(cd.ok, cd.type, cd.type, [cd.reason, cd.message].filter(Boolean).join(": "))));
}

function componentRow(c: Component, kind: string): HTMLElement {
  return h("tr", { "data-component": kind, "data-name": c.name, "data-healthy": String(c.healthy) },
    h("th", { scope: "row" }, c.name),
    td(badge(c.healthy, "Healthy", "Unhealthy"), c.problem ? h("div", { class: "problem" }, c.problem) : null),
    td(c.heartbeat ? age(c.heartbeatAgeSeconds) + " ago" : "never"),
    td(c.version || "–"),
    td(c.ovsVersion || "–"),
    td(kind === "agent" ? num(c.podCount) : "–"),
    td(num(c.networkPolicies)),
    td(c.pendingPolicies === undefined ? "–" : c.pendingPolicies === 0 ? "0" : h("span", { class: "badge warn" }, `${c.pendingPolicies} behind`)),
    td(conditionBadges(c)));
}

async function renderSummary(root: HTMLElement) {
  const load = async () => {
    const s = await api<Summary>("GET", "/api/v1/summary");
    const rows: HTMLElement[] = [];
    if (s.controller) rows.push(componentRow(s.controller, "controller"));
    const healthy = s.agents.filter((a) => a.healthy).length;
    const head = ["Component", "Health", "Heartbeat", "Version", "OVS", "Pods", "Policies", "Not realized", "Conditions"];
    const parts: Child[] = [
      h("p", { class: "lead" },
        `${healthy} of ${s.agents.length} agents healthy. A component is red when a condition is not True or its last heartbeat is older than ${age(s.staleAfterSeconds)}.`),
      h("p", { id: "realization" }, s.realizationError ??
        `Realization: ${s.pendingPolicies} of ${s.policies} computed policies not yet realized in their current version on every Node of their span` +
        " (per agent: \"Not realized\")."),
      h("h2", {}, "Controller"),
      s.controller ? table(head, rows) : h("div", { class: "alert", role: "alert" }, s.controllerError ?? "no controller report"),
      h("h2", {}, "Agents"),
      s.agents.length ? table(head, s.agents.map((a) => componentRow(a, "agent")))
        : h("p", {}, "No agent has reported (no AntreaAgentInfo)."),
      h("h2", {}, "Feature gates"),
    ];
    if (s.featureGates?.length) {
      parts.push(table(["Component", "Gate", "Enabled", "Implemented", "Note"], s.featureGates.map((g) =>
        h("tr", {}, td(g.component), h("th", { scope: "row" }, g.name), td(g.enabled ? "on" : "off"),
          td(g.implemented ? "yes" : "no"), td(g.note ?? "")))));
    } else {
      parts.push(h("p", {}, s.featureGatesError ?? "No feature gates read."));
    }
    parts.push(h("p", { class: "hint" }, `Updated ${new Date(s.time).toLocaleTimeString()}; refreshes every 10 s.`));
    fill(root, ...parts);
  };
  await load();
  refreshTimer = window.setInterval(() => { load().catch((e) => status(String(e))); }, 10000);
}

// ---- Traceflow ----

function endpointOptions(items: { namespace: string; name: string; ip?: string; node?: string }[], what: string): HTMLElement[] {
  return items.map((e) => h("option", { value: `${e.namespace}/${e.name}` },
    `${e.namespace}/${e.name}${e.ip ? " (" + e.ip + (e.node ? ", " + e.node : "") + ")" : ""}${what}`));
}

function field(label: string, id: string, control: HTMLElement, hint?: string): HTMLElement {
  control.id = id;
  return h("div", { class: "field" }, h("label", { for: id }, label), control, hint ? h("small", {}, hint) : null);
}

async function renderTraceflow(root: HTMLElement) {
  const eps = await api<Endpoints>("GET", "/api/v1/endpoints");
  const src = h("select", {}, h("option", { value: "" }, "— a Pod —"), ...endpointOptions(eps.pods, "")) as HTMLSelectElement;
  const srcIP = h("input", { type: "text", inputmode: "decimal", placeholder: "or an IPv4 address (live traffic)" }) as HTMLInputElement;
  const dst = h("select", {}, h("option", { value: "" }, "— a Pod or Service —"),
    h("optgroup", { label: "Pods" }, ...endpointOptions(eps.pods, "")),
    h("optgroup", { label: "Services" }, ...endpointOptions(eps.services, " · Service"))) as HTMLSelectElement;
  const dstIP = h("input", { type: "text", inputmode: "decimal", placeholder: "or an IPv4 address" }) as HTMLInputElement;
  const proto = h("select", {}, ...["ICMP", "TCP", "UDP"].map((p) => h("option", { value: p }, p))) as HTMLSelectElement;
  const port = h("input", { type: "number", min: "1", max: "65535", placeholder: "80" }) as HTMLInputElement;
  const live = h("input", { type: "checkbox" }) as HTMLInputElement;
  const droppedOnly = h("input", { type: "checkbox", id: "tf-dropped" }) as HTMLInputElement;
  const result = h("section", { id: "traceflow-result", "aria-live": "polite" });
  const run = h("button", { type: "submit" }, "Run Traceflow") as HTMLButtonElement;
  const form = h("form", { class: "tf-form" },
    h("fieldset", {}, h("legend", {}, "Source"), field("Source Pod", "tf-src", src), field("Source IP", "tf-src-ip", srcIP)),
    h("fieldset", {}, h("legend", {}, "Destination"), field("Destination", "tf-dst", dst), field("Destination IP", "tf-dst-ip", dstIP)),
    h("fieldset", {}, h("legend", {}, "Packet"), field("Protocol", "tf-proto", proto), field("Destination port", "tf-port", port),
      h("div", { class: "field check" }, live, h("label", { for: "tf-live" }, "Live traffic (trace the next real packet)")),
      h("div", { class: "field check" }, droppedOnly, h("label", { for: "tf-dropped" }, "Live traffic: only a dropped packet"))),
    run) as HTMLFormElement;
  live.id = "tf-live";
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    run.disabled = true;
    result.replaceChildren(h("p", {}, "Tracing…"));
    status("Traceflow running");
    try {
      const r = await api<TraceflowResult>("POST", "/api/v1/traceflows", {
        source: srcIP.value.trim() || src.value,
        destination: dstIP.value.trim() || dst.value,
        protocol: proto.value,
        port: port.value ? Number(port.value) : undefined,
        liveTraffic: live.checked || droppedOnly.checked || undefined,
        droppedOnly: droppedOnly.checked || undefined,
      });
      showTraceflow(result, r);
      status(`Traceflow ${r.phase}`);
    } catch (err) {
      result.replaceChildren(errorBox(err));
      status("Traceflow failed");
    } finally {
      run.disabled = false;
    }
  });
  root.replaceChildren(
    h("p", { class: "lead" }, "Inject a packet at the source and see what every Node's OVS pipeline did with it."),
    form, result);
}

function showTraceflow(root: HTMLElement, r: TraceflowResult) {
  const ok = r.phase === "Succeeded" && !r.dropped;
  const verdict = r.dropped
    ? h("div", { class: "verdict bad", id: "tf-verdict" }, `✖ ${r.dropped}`)
    : h("div", { class: ok ? "verdict ok" : "verdict bad", id: "tf-verdict" },
      ok ? "✔ The packet was delivered" : `✖ ${r.phase}${r.reason ? ": " + r.reason : ""}`);
  fill(root,
    h("h2", {}, `Result of ${r.name}`),
    verdict,
    r.reason && r.dropped ? h("p", {}, r.reason) : null,
    h("div", { class: "tf-grid" },
      svgNode(r.svg, `Path of Traceflow ${r.name}`),
      table(["Node", "Role", "Component", "Table", "Action", "Details"], r.rows.map((o) =>
        h("tr", { class: o.action === "Dropped" || o.action === "Rejected" ? "drop" : "" },
          td(o.node), td(o.role), td(o.component), td(o.table ?? ""), td(o.action), td(o.details ?? ""))),
      "Observations, Node by Node")));
}

// ---- Policies ----

function statsCells(s?: { sessions: number; packets: number; bytes: number }): HTMLElement[] {
  return [h("td", { class: "sessions" }, num(s?.sessions)), h("td", { class: "packets" }, num(s?.packets)), h("td", { class: "bytes" }, num(s?.bytes))];
}

function realizationBadges(nodes?: NodeRealization[]): HTMLElement | null {
  if (!nodes?.length) return null;
  return h("p", { class: "nodes" }, "Nodes: ", ...nodes.map((n) =>
    h("span", { class: n.state === "realized" ? "badge ok" : n.state === "failed" ? "badge bad" : "badge warn",
      "data-node": n.node, "data-state": n.state, title: n.message || undefined },
      `${n.state === "realized" ? "✔" : n.state === "failed" ? "✖" : "…"} ${n.node} ${n.state}`)));
}

function podsLine(pods?: string[]): HTMLElement | null {
  if (!pods) return null;
  const shown = pods.slice(0, 12).join(", ");
  return h("p", { class: "pods", "data-pods": String(pods.length) },
    `Applies to ${pods.length} ${pods.length === 1 ? "member" : "members"}${pods.length ? ": " + shown : ""}${pods.length > 12 ? ", …" : ""}`);
}

function policyBlock(p: PolicyView): HTMLElement {
  const name = p.namespace ? `${p.namespace}/${p.name}` : p.name;
  return h("article", { class: "policy", "data-policy": name },
    h("h3", {}, `${p.kind} ${name}`),
    h("p", { class: "meta" },
      p.priority ? `priority ${p.priority} · ` : "",
      `applied to ${p.appliedTo || "(per rule)"}`,
      p.realization ? ` · realized on ${p.realization}` : "",
      p.stats ? ` · ${num(p.stats.sessions)} sessions, ${num(p.stats.packets)} packets, ${num(p.stats.bytes)} bytes` : ""),
    podsLine(p.pods),
    realizationBadges(p.nodes),
    table(["Direction", "Rule", "Action", "Peers", "Ports", "Sessions", "Packets", "Bytes"], p.rules.map((r) =>
      h("tr", { class: r.action === "Drop" || r.action === "Reject" ? "drop" : "", "data-rule": r.name || undefined },
        td(r.direction), td(r.name ?? ""), td(r.action), td(r.peers + (r.appliedTo ? ` → ${r.appliedTo}` : "")), td(r.ports),
        ...statsCells(r.stats)))));
}

async function renderPolicies(root: HTMLElement) {
  const load = async () => {
    const p = await api<Policies>("GET", "/api/v1/policies");
    const parts: Node[] = [h("p", { class: "lead" },
      "Tiers in evaluation order; in each, policies by priority and rules in order. K8s NetworkPolicies come after the application Tier. Counts refresh every 10 s.")];
    if (p.statsError) parts.push(h("p", { class: "note" }, p.statsError));
    if (p.computedError) parts.push(h("p", { class: "note" }, p.computedError));
    for (const t of p.tiers) {
      if (t.layer && t.name.startsWith("SIG") && !t.policies.length) continue;
      parts.push(h("section", { class: "tier", "data-tier": t.name },
        h("h2", {}, t.layer || t.priority < 0 ? t.name : `${t.name} (priority ${t.priority})`),
        t.description ? h("p", { class: "hint" }, t.description) : null,
        ...(t.policies.length ? t.policies.map(policyBlock) : [h("p", { class: "empty" }, "No policies.")])));
    }
    root.replaceChildren(...parts);
  };
  await load();
  refreshTimer = window.setInterval(() => { load().catch((e) => status(String(e))); }, 10000);
}

// ---- Pipeline ----

async function renderPipeline(root: HTMLElement, node = "") {
  const p = await api<Pipeline>("GET", "/api/v1/pipeline" + (node ? `?node=${encodeURIComponent(node)}` : ""));
  const sel = h("select", { id: "pl-node" }, ...p.nodes.map((n) =>
    h("option", { value: n, selected: n === p.node }, n))) as HTMLSelectElement;
  sel.addEventListener("change", () => {
    renderPipeline(root, sel.value).catch((e) => root.replaceChildren(errorBox(e)));
  });
  fill(root,
    p.nodes.length ? h("div", { class: "field inline" }, h("label", { for: "pl-node" }, "Node"), sel) : h("p", {}, "No Node has reported."),
    p.note ? h("p", { class: "hint" }, p.note) : null,
    h("div", { class: "scroll" }, svgNode(p.svg, `OVS pipeline of ${p.node || "the declared layout"}`)),
  );
}

// ---- Flows ----

function bytes(n: number): string {
  if (n >= 1 << 30) return `${(n / (1 << 30)).toFixed(1)} GiB`;
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  if (n >= 1 << 10) return `${(n / (1 << 10)).toFixed(1)} KiB`;
  return `${n} B`;
}

function verdictCell(denied: boolean): HTMLElement {
  return td(denied ? h("span", { class: "badge bad" }, "✖ denied") : h("span", { class: "badge ok" }, "✔ allowed"));
}

async function renderFlows(root: HTMLElement) {
  const load = async () => {
    const f = await api<Flows>("GET", "/api/v1/flows");
    if (!f.available) {
      window.clearInterval(refreshTimer);
      fill(root,
        h("p", { class: "note" }, f.message),
        h("h2", {}, "How to enable flow visibility"),
        h("ol", {}, ...(f.howTo ?? []).map((s) => h("li", {}, s))));
      return;
    }
    fill(root,
      h("p", { class: "lead", id: "flows-summary" }, f.message),
      f.svg ? h("div", { class: "scroll" }, svgNode(f.svg, "Service map: who talks to whom")) : null,
      h("h2", {}, "Connections by pair"),
      table(["Verdict", "From", "To", "Port", "Connections", "Bytes", "Policy rules"], f.edges.map((e) =>
        h("tr", { class: e.denied ? "drop" : "", "data-from": e.from, "data-to": e.to },
          verdictCell(e.denied), td(e.from), td(e.to), td(e.port), td(num(e.connections)), td(bytes(e.bytes)), td(e.policies ?? "")))),
      h("h2", {}, "Newest records"),
      table(["Verdict", "Source", "Destination", "Protocol", "Service", "Bytes", "Policy rules", "End"], f.recent.map((r) =>
        h("tr", { class: r.denied ? "drop" : "" },
          verdictCell(r.denied), td(r.source), td(r.destination), td(r.protocol), td(r.service ?? ""), td(bytes(r.bytes)),
          td(r.policy ?? ""), td(new Date(r.end).toLocaleTimeString())))),
      h("p", { class: "hint" }, "From the Flow Aggregator's latest records; refreshes every 5 s."));
  };
  await load();
  refreshTimer = window.setInterval(() => { load().catch((e) => status(String(e))); }, 5000);
}

// ---- Password ----

async function renderPassword(root: HTMLElement) {
  const cur = h("input", { type: "password", autocomplete: "current-password", required: true }) as HTMLInputElement;
  const nw = h("input", { type: "password", autocomplete: "new-password", required: true, minlength: "10" }) as HTMLInputElement;
  const msg = h("div", { role: "alert" });
  const form = h("form", { class: "login", method: "post" },
    field("Current password", "pw-current", cur),
    field("New password (10 characters or more)", "pw-new", nw),
    h("button", { type: "submit" }, "Change password"), msg) as HTMLFormElement;
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      await api("POST", "/api/v1/password", { current: cur.value, new: nw.value });
      msg.className = "verdict ok";
      msg.textContent = "Password changed; other sessions were logged out.";
      form.reset();
    } catch (err) {
      msg.className = "alert";
      msg.textContent = err instanceof Error ? err.message : String(err);
    }
  });
  root.replaceChildren(h("p", { class: "lead" }, "The admin password is stored bcrypt-hashed in a Secret."), form);
}

// ---- start ----

$("logout").addEventListener("click", async () => {
  try {
    await api("POST", "/api/v1/logout");
  } catch {
    // logged out anyway
  }
  csrfToken = "";
  $("whoami").textContent = "";
  showLogin("Logged out.");
});
window.addEventListener("hashchange", () => { route().catch((e) => status(String(e))); });
route().catch((e) => status(String(e)));
