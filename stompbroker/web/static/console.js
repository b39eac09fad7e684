// The management console: tables over the management API (/api/), refreshed
// every two seconds.  The sign-in is signin.js's, shared with the demo and the
// dashboard: every call carries its credentials as HTTP Basic or Bearer, with
// X-Requested-With so that a refusal does not make the browser ask on its own.
// Everything the broker sends is shown with textContent, never parsed as HTML.
// Destructive actions (purge, delete, retry, move, close) wait for a
// confirmation in a <dialog>, and their outcome shows in the section where
// they were taken.  A destination's panel charts its rates and depth from the
// refreshes since the page opened (destination_chart.js).
// With virtual hosts (docs/virtual-hosts.md) a destination is its virtual host
// and its name: every call on one names its host (?vhost=), and the tables
// show a vhost column once a row is in a host other than the default (`/`),
// as the command line does (app/admin_tables.py, with_vhost).
import { apiHeaders, forget, mountSignIn, signIn, whoami } from "./signin.js";
import { DestinationHistory, destinationKey } from "./destination_chart.js";

const REFRESH_MS = 2000;
const BROWSE_COUNT = 20;
let timer = null;
let browsed = null; // the destination whose panel is open: {name, vhost}
let hostsInUse = false; // whether a row is in a virtual host other than the default
let shownConnection = null; // the connection whose panel is open
const history = new DestinationHistory();

const $ = (id) => document.getElementById(id);

function setStatus(state, text) {
  $("status").dataset.state = state;
  $("status").textContent = text;
}

class ApiError extends Error {
  constructor(code, answer) {
    super(`${code} ${answer.error}: ${answer.detail}`);
    this.code = code;
  }
}

async function api(method, path, body) {
  const headers = apiHeaders();
  const init = { method, headers, credentials: "omit", cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(`api/${path}`, init);
  const answer = await response.json();
  if (!response.ok) throw new ApiError(response.status, answer);
  return answer;
}

const encode = (destination) => encodeURIComponent(destination);
const DEFAULT_HOST = "/";
// The query naming a destination's virtual host, after sep ("?" or "&").
const hostQuery = (vhost, sep = "?") => `${sep}vhost=${encode(vhost || DEFAULT_HOST)}`;
// A destination's path in the API: its name, and the calls on it, with its virtual host's query.
const destinationPath = (name, vhost, call = "") =>
  `destinations/${encode(name)}${call}${hostQuery(vhost)}`;
// How a destination reads in a question or a notice: its name, its host's too when hosts are in use.
const shown = (name, vhost) =>
  hostsInUse && (vhost || DEFAULT_HOST) !== DEFAULT_HOST ? `${name} (vhost ${vhost})` : name;

// The rule of the command line's with_vhost: a vhost column once any row is in another host.
const inOtherHost = (rows) => rows.some((row) => (row.vhost || DEFAULT_HOST) !== DEFAULT_HOST);

// Show the vhost columns and the forms' vhost fields, or hide them.
function showHosts(inUse) {
  hostsInUse = inUse;
  $("console").classList.toggle("hosts", inUse);
  for (const element of document.querySelectorAll(".vhost")) element.hidden = !inUse;
}

// A row's vhost cell, shown only while hosts are in use.
function hostCell(row, vhost) {
  const td = cell(row, vhost || DEFAULT_HOST);
  td.className = "vhost";
  td.hidden = !hostsInUse;
  return td;
}

// A vhost field's value: the default host when left empty.
const fieldHost = (id) => $(id).value.trim() || DEFAULT_HOST;
const time = (text) => (text || "").replace("T", " ").replace(/\.\d+Z$/, " UTC");

function cell(row, text) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "" : String(text);
  row.appendChild(td);
  return td;
}

function button(parent, label, action, danger) {
  const element = document.createElement("button");
  element.type = "button";
  element.textContent = label;
  if (danger) element.className = "danger";
  element.addEventListener("click", action);
  parent.appendChild(element);
  return element;
}

function link(parent, label, action) {
  parent.textContent = "";
  const element = button(parent, label, action);
  element.className = "link";
  return element;
}

function confirmAction(text) {
  return new Promise((resolve) => {
    const dialog = $("confirm");
    $("confirm-text").textContent = text;
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
  });
}

function notice(where, text, failed) {
  $(where).textContent = text;
  $(where).dataset.state = failed ? "error" : "done";
}

// Do an action after its confirmation (none for question null), tell its outcome
// where it was taken, and show the broker as it is after it.
async function act(where, question, call, done) {
  if (question !== null && !(await confirmAction(question))) return;
  try {
    const answer = await call();
    notice(where, done(answer), false);
  } catch (error) {
    notice(where, error.message, true);
  }
  await refresh();
}

function rate(value) {
  return value ? value.toFixed(1) : "0";
}

function destinationActions(actions, name, vhost, where) {
  const label = () => shown(name, vhost);
  if (where !== "browser-notice") button(actions, "Browse", () => openDestination(name, vhost));
  button(actions, "Move", () => {
    $("move-from").value = name;
    $("move-vhost").value = vhost || DEFAULT_HOST;
    $("move-to").focus();
  });
  button(actions, "Purge", () => act(where,
    `Purge every message waiting in ${label()}?`,
    () => api("DELETE", destinationPath(name, vhost, "/messages")),
    (answer) => `purged ${answer.purged} messages from ${label()}`), true);
  if (/^\/queue\/DLQ\./.test(name)) {
    button(actions, "Retry", () => act(where,
      `Send the messages of ${label()} back to their original destinations?`,
      () => api("POST", destinationPath(name, vhost, "/retry"), {}),
      (answer) => `sent ${answer.retried} messages back, ${answer.left} stayed`), true);
  }
  button(actions, "Delete", () => act(where,
    `Delete ${label()} and what waits in it?`,
    () => api("DELETE", destinationPath(name, vhost)),
    (answer) => `deleted ${label()} (${answer.discarded} messages)`), true);
}

// A destination's policy as the console shows it: its name, or "none" for the global options.
function policyName(policy) {
  return policy === null || policy === undefined ? "none" : policy;
}

function renderDestinations(rows) {
  const body = $("destinations").tBodies[0];
  body.replaceChildren();
  for (const row of rows) {
    const tr = document.createElement("tr");
    tr.dataset.destination = row.destination;
    const name = row.destination;
    const vhost = row.vhost || DEFAULT_HOST;
    tr.dataset.vhost = vhost;
    hostCell(tr, vhost);
    link(cell(tr, ""), name, () => openDestination(name, vhost)).classList.add("name");
    cell(tr, row.kind);
    cell(tr, row.depth).className = "depth";
    cell(tr, row.in_flight);
    cell(tr, row.consumers);
    cell(tr, row.producers).className = "producers";
    cell(tr, rate(row.messages_in_per_second));
    cell(tr, rate(row.messages_delivered_per_second));
    cell(tr, policyName(row.policy)).className = "policy";
    const actions = cell(tr, "");
    actions.className = "actions";
    if (row.kind !== "topic") destinationActions(actions, name, vhost, "destinations-notice");
    body.appendChild(tr);
  }
}

function closeConnection(id, peer, where) {
  return act(where,
    `Close connection ${id} from ${peer}? The client gets an ERROR.`,
    () => api("DELETE", `connections/${encode(id)}?reason=closed+from+the+console`),
    (answer) => `closed ${answer.id}`);
}

function renderConnections(rows) {
  const body = $("connections").tBodies[0];
  body.replaceChildren();
  for (const row of rows) {
    const tr = document.createElement("tr");
    tr.dataset.connection = row.id;
    tr.dataset.vhost = row.vhost || DEFAULT_HOST;
    hostCell(tr, row.vhost);
    link(cell(tr, ""), row.id, () => openConnection(row.id)).parentElement.className = "id";
    for (const [name, value] of [["peer", row.peer], ["login", row.login],
                                 ["transport", row.transport], ["version", row.version],
                                 ["subscriptions", row.subscriptions.length],
                                 ["messages-in", row.messages_in],
                                 ["messages-out", row.messages_out],
                                 ["bytes-in", row.bytes_in], ["bytes-out", row.bytes_out],
                                 ["since", time(row.connected_since)]]) {
      cell(tr, value).className = name;
    }
    const actions = cell(tr, "");
    actions.className = "actions";
    button(actions, "Close", () => closeConnection(row.id, row.peer, "connections-notice"), true);
    body.appendChild(tr);
  }
}

function renderDetached(rows) {
  const body = $("detached").tBodies[0];
  body.replaceChildren();
  for (const row of rows) {
    const tr = document.createElement("tr");
    tr.dataset.session = row.id;
    for (const [name, value] of [["id", row.id], ["login", row.login],
                                 ["subscriptions", row.subscriptions],
                                 ["buffered-frames", row.buffered_frames],
                                 ["buffered-bytes", row.buffered_bytes],
                                 ["missed", row.missed], ["gap", row.gap ? "gap" : ""],
                                 ["since", time(row.detached_since)],
                                 ["expires", time(row.expires_at)]]) {
      cell(tr, value).className = name;
    }
    const actions = cell(tr, "");
    actions.className = "actions";
    button(actions, "End", () => act("detached-notice",
      `End detached session ${row.id} of ${row.login || "no login"}? Its client can no longer resume it.`,
      () => api("DELETE", `detached-sessions/${encode(row.id)}`),
      (answer) => `ended ${answer.id}`), true);
    body.appendChild(tr);
  }
}

function mebibytes(value) {
  return `${(value / 1048576).toFixed(1)} MiB`;
}

function fillList(list, figures) {
  list.replaceChildren();
  for (const [name, value] of figures) {
    const div = document.createElement("div");
    const dt = document.createElement("dt");
    const dd = document.createElement("dd");
    dt.textContent = name;
    dd.textContent = value === undefined || value === null ? "" : String(value);
    div.dataset.figure = name;
    div.append(dt, dd);
    list.appendChild(div);
  }
}

function fillTable(table, rows) {
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const values of rows) {
    const tr = document.createElement("tr");
    for (const value of values) cell(tr, value);
    body.appendChild(tr);
  }
}

function renderOverview(overview) {
  const broker = overview.broker || {};
  const memory = overview.memory;
  const figures = [
    ["connections", broker.connections],
    ["messages in", broker.messages_in],
    ["delivered", broker.messages_delivered],
    ["messages/s", rate(broker.messages_per_second)],
    ["uptime", broker.uptime_s === undefined ? "" : `${Math.round(broker.uptime_s)} s`],
  ];
  if (memory && memory.enabled) {
    figures.push(["memory in use", `${mebibytes(memory.in_use_bytes)} of ${mebibytes(memory.high_bytes)}`],
                 ["publishers paused", memory.paused_publishers]);
  }
  const disk = overview.disk;
  if (disk && disk.enabled) {
    figures.push(["store disk free", `${mebibytes(disk.free_bytes)} (limit ${mebibytes(disk.limit_bytes)})`]);
  }
  const resumable = overview.resumable_sessions;
  if (resumable) {
    figures.push(["detached sessions", resumable.detached],
                 ["resume buffers", `${resumable.connected_bytes + resumable.detached_bytes} B`]);
  }
  fillList($("figures"), figures);
  const diskAlarm = $("disk-alarm");
  diskAlarm.hidden = !(disk && disk.alarm);
  if (disk && disk.alarm) {
    diskAlarm.textContent = `Disk alarm since ${time(disk.since)}: ${mebibytes(disk.free_bytes)}` +
      ` left for the message store is under --disk-free-limit (${mebibytes(disk.limit_bytes)});` +
      ` connections publishing persistent messages are held until there is room again` +
      ` (${disk.held_publishers} held now).`;
  }
  const alarm = $("memory-alarm");
  alarm.hidden = !(memory && memory.alarm);
  if (memory && memory.alarm) {
    alarm.textContent = `Memory alarm since ${time(memory.since)}: ${mebibytes(memory.in_use_bytes)}` +
      ` in use is over --memory-high (${mebibytes(memory.high_bytes)}); publishers are paused` +
      ` until it falls under ${mebibytes(memory.low_bytes)}` +
      ` (${memory.paused_publishers} paused now).`;
  }
  fillTable($("listeners"), (overview.listeners || []).map((entry) =>
    [entry.kind, entry.url || "", entry.endpoint]));
  fillTable($("configuration"), Object.entries(overview.configuration || {}));
  $("setup").hidden = !overview.listeners;
  $("updated").textContent = overview.ts ? `at ${overview.ts}` : "";
}

function renderConsumers(subscribers) {
  fillTable($("consumers"), subscribers.map((consumer) => [
    consumer.connection, consumer.subscription, consumer.ack, consumer.in_flight, consumer.window]));
  $("consumers").hidden = subscribers.length === 0;
}

function renderMessages(messages, depth) {
  const list = $("messages");
  list.replaceChildren();
  for (const message of messages) {
    const item = document.createElement("li");
    item.className = "message";
    const headers = document.createElement("div");
    headers.className = "headers";
    const lines = [`message-id: ${message.message_id}`,
                   `${message.size} bytes, ${message.body_encoding}` +
                   (message.persistent ? ", persistent" : "")];
    for (const [key, value] of Object.entries(message.headers)) lines.push(`${key}: ${value}`);
    headers.textContent = lines.join("\n");
    const body = document.createElement("pre");
    body.className = "body";
    body.textContent = message.body;
    item.append(headers, body);
    list.appendChild(item);
  }
  $("browse-count").textContent = depth === 0 ? "none" : `${messages.length} of ${depth}`;
}

// The open destination's panel, as the broker has it now.
async function showDestination() {
  const open = browsed;
  const { name, vhost } = open;
  const key = destinationKey(vhost, name);
  try {
    const detail = await api("GET", destinationPath(name, vhost));
    const messages = detail.kind === "topic" ? [] :
      await api("GET", `${destinationPath(name, vhost, "/messages")}&count=${BROWSE_COUNT}`);
    if (browsed !== open) return;
    const actions = $("browser-actions");
    if (actions.dataset.destination !== key) {
      actions.replaceChildren();
      actions.dataset.destination = key;
      if (detail.kind !== "topic") destinationActions(actions, name, vhost, "browser-notice");
    }
    $("browsed-policy").textContent = policyName(detail.policy);
    renderConsumers(detail.subscribers || []);
    renderMessages(messages, detail.depth);
  } catch (error) {
    if (error.code === 404) {
      // Deleted since: nothing waits, and the notice of whatever deleted it stays.
      renderConsumers([]);
      renderMessages([], 0);
    } else {
      notice("browser-notice", error.message, true);
    }
  }
  history.draw(key, $("destination-chart"));
}

async function openDestination(name, vhost) {
  browsed = { name, vhost: vhost || DEFAULT_HOST };
  $("browsed").textContent = name;
  $("browsed-vhost").textContent = browsed.vhost;
  $("browsed-policy").textContent = "";
  $("browser-notice").textContent = "";
  $("browser").hidden = false;
  await showDestination();
  $("browser").scrollIntoView({ block: "nearest" });
}

async function showConnection() {
  const id = shownConnection;
  let row;
  try {
    row = await api("GET", `connections/${encode(id)}`);
  } catch (error) {
    if (error.code === 404) {
      // Closed since: say so, and keep the notice of whatever closed it.
      fillList($("connection-figures"), [["state", "closed"]]);
      fillTable($("connection-subscriptions"), []);
      $("connection-actions").replaceChildren();
      delete $("connection-actions").dataset.connection;
    } else {
      notice("connection-notice", error.message, true);
    }
    return;
  }
  if (shownConnection !== id) return;
  fillList($("connection-figures"), [
    ["peer", row.peer], ["login", row.login || "(anonymous)"],
    ["virtual host", row.vhost || DEFAULT_HOST], ["transport", row.transport],
    ["version", row.version], ["connected since", time(row.connected_since)],
    ["messages in", row.messages_in], ["messages out", row.messages_out],
    ["frames in", row.frames_in], ["frames out", row.frames_out],
    ["bytes in", row.bytes_in], ["bytes out", row.bytes_out],
  ]);
  fillTable($("connection-subscriptions"), row.subscriptions.map((subscription) => [
    subscription.id, subscription.destination, subscription.ack, subscription.in_flight,
    subscription.durable || ""]));
  const actions = $("connection-actions");
  if (actions.dataset.connection !== id) {
    actions.replaceChildren();
    actions.dataset.connection = id;
    button(actions, "Close connection",
      () => closeConnection(id, row.peer, "connection-notice"), true).id = "close-connection";
  }
}

async function openConnection(id) {
  shownConnection = id;
  $("connection-id").textContent = id;
  $("connection-notice").textContent = "";
  $("connection").hidden = false;
  await showConnection();
  $("connection").scrollIntoView({ block: "nearest" });
}

async function refresh() {
  try {
    const [overview, destinations, connections, detached] = await Promise.all([
      api("GET", "overview"), api("GET", "destinations"), api("GET", "connections"),
      api("GET", "detached-sessions"),
    ]);
    history.record(Date.now() / 1000, destinations);
    showHosts(inOtherHost(destinations) || inOtherHost(connections));
    renderOverview(overview);
    renderDestinations(destinations);
    renderConnections(connections);
    renderDetached(detached);
    if (browsed !== null) await showDestination();
    if (shownConnection !== null) await showConnection();
    setStatus("live", "live");
  } catch (error) {
    if (error.code === 401) {
      stop();
      forget();
      await begin(error.message);
    } else {
      setStatus("error", error.message);
    }
  }
}

function stop() {
  clearInterval(timer);
  timer = null;
  $("console").hidden = true;
  $("signed-out").hidden = false;
  setStatus("signed-out", "signed out");
}

// Sign in if the broker asks for it, then show the console and keep it fresh.
async function begin(message = "") {
  let asked = await whoami();
  while (asked.status === 401) {
    if (!(await signIn(message))) {
      stop();
      return;
    }
    asked = await whoami();
    message = asked.answer ? asked.answer.detail : "";
  }
  if (asked.status !== 200) {
    const answer = asked.answer || { error: "unexpected answer", detail: "" };
    setStatus("error", `${asked.status} ${answer.error}: ${answer.detail}`);
    return;
  }
  $("signed-out").hidden = true;
  $("console").hidden = false;
  if (timer === null) timer = setInterval(refresh, REFRESH_MS);
  await refresh();
}

async function publish(event) {
  event.preventDefault();
  const name = $("publish-destination").value;
  const vhost = fieldHost("publish-vhost");
  await act("publish-notice", null,
            () => api("POST", destinationPath(name, vhost, "/publish"),
                      { body: $("publish-body").value }),
            (answer) => `published ${answer.message_id} to ${shown(name, vhost)}`);
}

async function move(event) {
  event.preventDefault();
  const from = $("move-from").value;
  const vhost = fieldHost("move-vhost");
  const to = $("move-to").value;
  const copy = $("move-copy").checked;
  const request = { to, copy };
  const count = $("move-count").value;
  if (count) request.count = Number(count);
  const verb = copy ? "Copy" : "Move";
  await act("move-notice",
            `${verb} ${count || "all the"} messages waiting in ${shown(from, vhost)} to ${to}?`,
            () => api("POST", destinationPath(from, vhost, "/move"), request),
            (answer) => `${copy ? "copied" : "moved"} ${answer.moved} messages to ${to}`);
}

$("publish").addEventListener("submit", publish);
$("move").addEventListener("submit", move);
$("close-browser").addEventListener("click", () => {
  browsed = null;
  $("browser").hidden = true;
});
$("close-connection-panel").addEventListener("click", () => {
  shownConnection = null;
  $("connection").hidden = true;
});
window.addEventListener("resize", () => history.resize($("destination-chart")));
mountSignIn("console", () => begin());
begin();
