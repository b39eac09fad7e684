// The management console: one page per view (overview, connections, a
// connection, destinations, a destination, policies, virtual hosts, nodes,
// detached sessions), each with its own URL in the fragment (#/destinations,
// #/destinations/VHOST/NAME, #/connections/ID...), so that a view can be shared
// and reloaded.  The lists are sorted, filtered and paged by the broker
// (?page=&page_size=&name=&sort=&sort_reverse=, as RabbitMQ's management API
// does), and the list's state is in the URL too: a page never holds more than
// one page of rows, however many destinations or connections there are.
// Only the open view is refreshed, every two seconds.
// The sign-in is signin.js's, shared with the demo and the dashboard: every
// call carries its credentials as HTTP Basic or Bearer, with X-Requested-With
// so that a refusal does not make the browser ask on its own.
// Everything the broker sends is shown with textContent, never parsed as HTML.
// Destructive actions (purge, delete, retry, move, close, clear) wait for a
// confirmation in a <dialog>, and their outcome shows where they were taken.
// Figures are formatted one way everywhere (format.js).
// With virtual hosts (docs/virtual-hosts.md) a destination is its virtual host
// and its name: every call on one names its host (?vhost=), and the tables
// show a vhost column.
import { apiHeaders, forget, mountSignIn, signIn, whoami } from "./signin.js";
import { DestinationHistory, destinationKey } from "./destination_chart.js";
import { BrokerHistory } from "./history_chart.js";
import { bytes, duration, number, setting, time } from "./format.js";

const REFRESH_MS = 2000;
const BROWSE_COUNT = 20;
const PAGE_SIZES = [20, 100, 500];
const DEFAULT_PAGE_SIZE = 100;
const DEFAULT_HOST = "/";
let timer = null;
let refreshing = false;
let hostsInUse = false; // whether the broker has virtual hosts
let shownView = null; // the route the page shows: {view, args, query}
const destinationHistory = new DestinationHistory();
const brokerHistory = new BrokerHistory();

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

const encode = (text) => encodeURIComponent(text);
// The query naming a destination's virtual host, after sep ("?" or "&").
const hostQuery = (vhost, sep = "?") => `${sep}vhost=${encode(vhost || DEFAULT_HOST)}`;
// A destination's path in the API: its name, and the calls on it, with its virtual host's query.
const destinationPath = (name, vhost, call = "") =>
  `destinations/${encode(name)}${call}${hostQuery(vhost)}`;
// The console's own URLs of a destination and a connection.
const destinationHref = (name, vhost) =>
  `#/destinations/${encode(vhost || DEFAULT_HOST)}/${encode(name)}`;
const connectionHref = (id) => `#/connections/${encode(id)}`;
// How a destination reads in a question or a notice: its name, its host's too when hosts are in use.
const shown = (name, vhost) =>
  hostsInUse && (vhost || DEFAULT_HOST) !== DEFAULT_HOST ? `${name} (vhost ${vhost})` : name;

// Show the vhost columns and the forms' vhost fields, or hide them.
function showHosts(inUse) {
  hostsInUse = inUse;
  $("console").classList.toggle("hosts", inUse);
  for (const element of document.querySelectorAll(".vhost")) element.hidden = !inUse;
}

// A vhost field's value: the default host when left empty.
const fieldHost = (id) => $(id).value.trim() || DEFAULT_HOST;

// A name that may break after its separators (/ . - _ :), never inside a word.
function nameNodes(parent, text) {
  const parts = String(text).split(/(?<=[/.\-_:])/);
  parts.forEach((part, index) => {
    parent.append(part);
    if (index < parts.length - 1) parent.appendChild(document.createElement("wbr"));
  });
  return parent;
}

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function linkCell(row, text, href, className) {
  const td = cell(row, "", className);
  const a = document.createElement("a");
  a.href = href;
  a.className = "name";
  nameNodes(a, text);
  td.appendChild(a);
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
  await refresh(true);
}

const rate = (value) => number(value, 1);

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

// -- routes ----------------------------------------------------------------------

/** The view the URL's fragment names: #/VIEW/ARG/ARG?QUERY. */
function route() {
  const [path, search = ""] = location.hash.replace(/^#\/?/, "").split("?");
  const parts = path.split("/").filter((part) => part !== "").map(decodeURIComponent);
  let view = parts[0] || "overview";
  const args = parts.slice(1);
  if (view === "destinations" && args.length === 2) view = "destination";
  if (view === "connections" && args.length === 1) view = "connection";
  return { view, args, query: new URLSearchParams(search) };
}

/** Go to a list's URL with ``changes`` to its query (null removes a parameter). */
function setListQuery(list, changes) {
  const query = new URLSearchParams(shownView && shownView.view === list ? shownView.query : "");
  for (const [key, value] of Object.entries(changes)) {
    if (value === null || value === "" || (key === "page" && value === 1)) query.delete(key);
    else query.set(key, String(value));
  }
  const search = query.toString();
  location.hash = `#/${list}${search ? `?${search}` : ""}`;
}

function showRoute() {
  shownView = route();
  const view = shownView.view;
  let known = false;
  for (const element of document.querySelectorAll(".view")) {
    element.hidden = element.id !== `view-${view}`;
    known = known || !element.hidden;
  }
  if (!known) {
    location.hash = "#/overview";
    return;
  }
  const section = { destination: "destinations", connection: "connections" }[view] || view;
  for (const link of document.querySelectorAll("#views a")) {
    if (link.dataset.view === section) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  for (const list of ["connections", "destinations"]) {
    const input = $(`${list}-filter`);
    if (view === list && document.activeElement !== input) {
      input.value = shownView.query.get("name") || "";
    }
  }
  if (view === "destination") openDestination(shownView.args[1], shownView.args[0]);
  if (view === "connection") openConnection(shownView.args[0]);
  showSort();
  refresh(true);
}

// -- lists: sort, filter, page ------------------------------------------------------

/** The API query of a list's page, from the URL's. */
function listQuery(query) {
  const page = Number(query.get("page")) || 1;
  const size = Number(query.get("page_size")) || DEFAULT_PAGE_SIZE;
  const api = new URLSearchParams({ page: String(page), page_size: String(size) });
  for (const key of ["name", "sort", "sort_reverse", "vhost"]) {
    if (query.get(key)) api.set(key, query.get(key));
  }
  return api.toString();
}

function showSort() {
  const query = shownView ? shownView.query : new URLSearchParams();
  for (const th of document.querySelectorAll("th[data-sort]")) {
    const sorted = query.get("sort") === th.dataset.sort;
    const reverse = query.get("sort_reverse") === "true";
    th.setAttribute("aria-sort", sorted ? (reverse ? "descending" : "ascending") : "none");
  }
}

function renderPager(list, answer, noun) {
  const pager = $(`${list}-pager`);
  pager.replaceChildren();
  const filtered = answer.filtered_count !== answer.total_count
    ? ` (${number(answer.filtered_count)} of ${number(answer.total_count)} match)` : "";
  $(`${list}-count`).textContent = `${number(answer.total_count)} ${noun}${filtered}`;
  const previous = button(pager, "‹ previous", () => setListQuery(list, { page: answer.page - 1 }));
  previous.disabled = answer.page <= 1;
  previous.dataset.page = "previous";
  const where = document.createElement("span");
  where.className = "where";
  where.textContent = `page ${number(answer.page)} of ${number(answer.page_count)}`;
  pager.appendChild(where);
  const next = button(pager, "next ›", () => setListQuery(list, { page: answer.page + 1 }));
  next.disabled = answer.page >= answer.page_count;
  next.dataset.page = "next";
  const label = document.createElement("label");
  label.className = "size";
  label.textContent = "rows ";
  const select = document.createElement("select");
  for (const size of PAGE_SIZES) {
    const option = document.createElement("option");
    option.value = option.textContent = String(size);
    option.selected = size === answer.page_size;
    select.appendChild(option);
  }
  select.addEventListener("change", () => setListQuery(list, { page_size: select.value, page: 1 }));
  label.appendChild(select);
  pager.appendChild(label);
}

function mountLists() {
  for (const th of document.querySelectorAll("th[data-sort]")) {
    const list = th.closest("table").id;
    th.tabIndex = 0;
    const sortBy = () => {
      const query = shownView.query;
      const same = query.get("sort") === th.dataset.sort;
      const reverse = same && query.get("sort_reverse") !== "true";
      setListQuery(list, { sort: th.dataset.sort, sort_reverse: reverse ? "true" : null, page: 1 });
    };
    th.addEventListener("click", sortBy);
    th.addEventListener("keydown", (event) => {
      if (event.key === "Enter") sortBy();
    });
  }
  for (const form of document.querySelectorAll("form.filter")) {
    const list = form.dataset.list;
    const input = form.querySelector("input");
    let pending = null;
    const apply = () => setListQuery(list, { name: input.value.trim(), page: 1 });
    input.addEventListener("input", () => {
      clearTimeout(pending);
      pending = setTimeout(apply, 300);
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      clearTimeout(pending);
      apply();
    });
  }
}

// -- destinations -------------------------------------------------------------------

function prefillMove(name, vhost) {
  $("move-from").value = name;
  $("move-vhost").value = vhost || DEFAULT_HOST;
  if (shownView.view !== "destinations") location.hash = "#/destinations";
  $("move-to").focus();
}

function destinationActions(actions, name, vhost, where) {
  const label = () => shown(name, vhost);
  if (where !== "browser-notice") {
    button(actions, "Browse", () => { location.hash = destinationHref(name, vhost); });
  }
  button(actions, "Move", () => prefillMove(name, vhost));
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
const policyName = (policy) => (policy === null || policy === undefined ? "none" : policy);

function renderDestinations(answer) {
  renderPager("destinations", answer, "destinations");
  const body = $("destinations").tBodies[0];
  body.replaceChildren();
  for (const row of answer.items) {
    const tr = document.createElement("tr");
    const name = row.destination;
    const vhost = row.vhost || DEFAULT_HOST;
    tr.dataset.destination = name;
    tr.dataset.vhost = vhost;
    cell(tr, vhost, "vhost").hidden = !hostsInUse;
    linkCell(tr, name, destinationHref(name, vhost), "destination");
    cell(tr, row.kind, "kind optional");
    cell(tr, number(row.depth), "depth");
    cell(tr, number(row.in_flight), "in-flight optional");
    cell(tr, number(row.consumers), "consumers");
    cell(tr, number(row.producers), "producers optional");
    cell(tr, rate(row.messages_in_per_second), "in-rate");
    cell(tr, rate(row.messages_delivered_per_second), "out-rate");
    cell(tr, policyName(row.policy), "policy optional");
    const actions = cell(tr, "", "actions");
    if (row.kind !== "topic") destinationActions(actions, name, vhost, "destinations-notice");
    body.appendChild(tr);
  }
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
                   `${bytes(message.size)}, ${message.body_encoding}` +
                   (message.persistent ? ", persistent" : "")];
    for (const [key, value] of Object.entries(message.headers)) lines.push(`${key}: ${value}`);
    headers.textContent = lines.join("\n");
    const body = document.createElement("pre");
    body.className = "body";
    body.textContent = message.body;
    item.append(headers, body);
    list.appendChild(item);
  }
  $("browse-count").textContent = depth === 0 ? "none" : `${messages.length} of ${number(depth)}`;
}

let browsed = null; // the destination whose page is open: {name, vhost}

function openDestination(name, vhost) {
  if (browsed && browsed.name === name && browsed.vhost === vhost) return;
  browsed = { name, vhost: vhost || DEFAULT_HOST };
  $("browsed").textContent = name;
  $("browsed-vhost").textContent = browsed.vhost;
  $("browsed-policy").textContent = "";
  $("browser-notice").textContent = "";
  $("browser-actions").replaceChildren();
  delete $("browser-actions").dataset.destination;
  fillList($("destination-figures"), []);
  renderConsumers([]);
  renderMessages([], 0);
}

// The open destination's page, as the broker has it now.
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
    fillList($("destination-figures"), [
      ["kind", detail.kind], ["depth", number(detail.depth)],
      ["in flight", number(detail.in_flight)], ["consumers", number(detail.consumers)],
      ["in/s", rate(detail.messages_in_per_second)],
      ["out/s", rate(detail.messages_delivered_per_second)],
    ]);
    destinationHistory.record(Date.now() / 1000, [detail]);
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
  destinationHistory.draw(key, $("destination-chart"));
}

// -- connections --------------------------------------------------------------------

function closeConnection(id, peer, where) {
  return act(where,
    `Close connection ${id} from ${peer}? The client gets an ERROR.`,
    () => api("DELETE", `connections/${encode(id)}?reason=closed+from+the+console`),
    (answer) => `closed ${answer.id}`);
}

function renderConnections(answer) {
  renderPager("connections", answer, "connections");
  const body = $("connections").tBodies[0];
  body.replaceChildren();
  for (const row of answer.items) {
    const tr = document.createElement("tr");
    tr.dataset.connection = row.id;
    tr.dataset.vhost = row.vhost || DEFAULT_HOST;
    cell(tr, row.vhost || DEFAULT_HOST, "vhost").hidden = !hostsInUse;
    linkCell(tr, row.id, connectionHref(row.id), "id");
    for (const [name, value] of [["peer", row.peer], ["login", row.login],
                                 ["transport optional", row.transport],
                                 ["version optional", row.version],
                                 ["subscriptions", row.subscriptions.length],
                                 ["messages-in", number(row.messages_in)],
                                 ["messages-out", number(row.messages_out)],
                                 ["bytes-in optional", bytes(row.bytes_in)],
                                 ["bytes-out optional", bytes(row.bytes_out)],
                                 ["since optional", time(row.connected_since)]]) {
      cell(tr, value, name);
    }
    const actions = cell(tr, "", "actions");
    button(actions, "Close", () => closeConnection(row.id, row.peer, "connections-notice"), true);
    body.appendChild(tr);
  }
}

let shownConnection = null; // the connection whose page is open

function openConnection(id) {
  if (shownConnection === id) return;
  shownConnection = id;
  $("connection-id").textContent = id;
  $("connection-notice").textContent = "";
  $("connection-actions").replaceChildren();
  delete $("connection-actions").dataset.connection;
  fillList($("connection-figures"), []);
  fillTable($("connection-subscriptions"), []);
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
    ["messages in", number(row.messages_in)], ["messages out", number(row.messages_out)],
    ["frames in", number(row.frames_in)], ["frames out", number(row.frames_out)],
    ["bytes in", bytes(row.bytes_in)], ["bytes out", bytes(row.bytes_out)],
  ]);
  const subscriptions = $("connection-subscriptions").tBodies[0];
  subscriptions.replaceChildren();
  for (const subscription of row.subscriptions) {
    const tr = document.createElement("tr");
    cell(tr, subscription.id);
    if (subscription.destination.includes("*") || subscription.destination.includes("#")) {
      cell(tr, subscription.destination);
    } else {
      linkCell(tr, subscription.destination, destinationHref(subscription.destination, row.vhost));
    }
    cell(tr, subscription.ack);
    cell(tr, number(subscription.in_flight));
    cell(tr, subscription.durable || "");
    subscriptions.appendChild(tr);
  }
  const actions = $("connection-actions");
  if (actions.dataset.connection !== id) {
    actions.replaceChildren();
    actions.dataset.connection = id;
    button(actions, "Close connection",
      () => closeConnection(id, row.peer, "connection-notice"), true).id = "close-connection";
  }
}

// -- detached sessions, virtual hosts, nodes ----------------------------------------------

function renderDetached(rows) {
  const body = $("detached").tBodies[0];
  body.replaceChildren();
  for (const row of rows) {
    const tr = document.createElement("tr");
    tr.dataset.session = row.id;
    for (const [name, value] of [["id", row.id], ["login", row.login],
                                 ["subscriptions", row.subscriptions],
                                 ["buffered-frames optional", number(row.buffered_frames)],
                                 ["buffered-bytes", bytes(row.buffered_bytes)],
                                 ["missed", number(row.missed)],
                                 ["gap optional", row.gap ? "gap" : ""],
                                 ["since optional", time(row.detached_since)],
                                 ["expires", time(row.expires_at)]]) {
      cell(tr, value, name);
    }
    const actions = cell(tr, "", "actions");
    button(actions, "End", () => act("detached-notice",
      `End detached session ${row.id} of ${row.login || "no login"}? Its client can no longer resume it.`,
      () => api("DELETE", `detached-sessions/${encode(row.id)}`),
      (answer) => `ended ${answer.id}`), true);
    body.appendChild(tr);
  }
}

function renderVhosts(rows) {
  const body = $("vhosts").tBodies[0];
  body.replaceChildren();
  for (const row of rows) {
    const tr = document.createElement("tr");
    tr.dataset.vhost = row.name;
    linkCell(tr, row.name, `#/destinations?vhost=${encode(row.name)}`, "name");
    cell(tr, row.aliases.join(", "), "aliases");
    cell(tr, number(row.connections), "connections");
    cell(tr, number(row.destinations), "destinations");
    cell(tr, number(row.messages), "messages");
    body.appendChild(tr);
  }
}

function renderNodes(rows) {
  fillTable($("nodes"), rows.map((row) => [row.name, row.engine, row.here ? "yes" : ""]));
}

// -- policies -----------------------------------------------------------------------

const definitionText = (definition) =>
  Object.entries(definition).map(([key, value]) => `${key} = ${value}`).join("; ");

function renderPolicies(rows) {
  const body = $("policies").tBodies[0];
  body.replaceChildren();
  for (const row of rows) {
    const tr = document.createElement("tr");
    tr.dataset.policy = row.name;
    tr.dataset.vhost = row.vhost;
    cell(tr, row.name, "name");
    cell(tr, row.vhost, "vhost").hidden = !hostsInUse;
    cell(tr, row.pattern, "pattern");
    cell(tr, row["apply-to"], "apply-to");
    cell(tr, row.priority, "priority");
    cell(tr, definitionText(row.definition), "definition");
    const actions = cell(tr, "", "actions");
    button(actions, "Edit", () => editPolicy(row));
    button(actions, "Clear", () => act("policies-notice",
      `Clear policy ${row.name}? Its destinations go back to the broker's options.`,
      () => api("DELETE", `policies/${encode(row.name)}${hostQuery(row.vhost)}`),
      () => `cleared ${row.name}`), true);
    body.appendChild(tr);
  }
}

function editPolicy(row) {
  $("policy-name").value = row.name;
  $("policy-vhost").value = row.vhost;
  $("policy-pattern").value = row.pattern;
  $("policy-apply-to").value = row["apply-to"];
  $("policy-priority").value = row.priority;
  $("policy-definition").value =
    Object.entries(row.definition).map(([key, value]) => `${key} = ${value}`).join("\n");
  $("policy-name").focus();
}

/** The definition typed as ``key = value`` lines; whole numbers go as numbers. */
function parseDefinition(text) {
  const definition = {};
  text.split("\n").forEach((line, index) => {
    if (!line.trim()) return;
    const at = line.indexOf("=");
    if (at < 1) throw new Error(`definition line ${index + 1}: give key = value, not ${JSON.stringify(line.trim())}`);
    const value = line.slice(at + 1).trim();
    definition[line.slice(0, at).trim()] = /^\d+$/.test(value) ? Number(value) : value;
  });
  return definition;
}

async function setPolicy(event) {
  event.preventDefault();
  const name = $("policy-name").value.trim();
  let definition;
  try {
    definition = parseDefinition($("policy-definition").value);
  } catch (error) {
    notice("policy-notice", error.message, true);
    return;
  }
  const body = {
    pattern: $("policy-pattern").value.trim(),
    priority: Number($("policy-priority").value || 0),
    "apply-to": $("policy-apply-to").value,
    vhost: fieldHost("policy-vhost"),
    definition,
  };
  await act("policy-notice", null, () => api("PUT", `policies/${encode(name)}`, body),
            (answer) => `set policy ${answer.name} on ${answer.pattern}`);
}

// -- overview -----------------------------------------------------------------------

function renderAlarms(overview) {
  const memory = overview.memory;
  const disk = overview.disk;
  const diskAlarm = $("disk-alarm");
  diskAlarm.hidden = !(disk && disk.alarm);
  if (disk && disk.alarm) {
    diskAlarm.textContent = `Disk alarm since ${time(disk.since)}: ${bytes(disk.free_bytes)}` +
      ` left for the message store is under --disk-free-limit (${bytes(disk.limit_bytes)});` +
      ` connections publishing persistent messages are held until there is room again` +
      ` (${disk.held_publishers} held now).`;
  }
  const alarm = $("memory-alarm");
  alarm.hidden = !(memory && memory.alarm);
  if (memory && memory.alarm) {
    alarm.textContent = `Memory alarm since ${time(memory.since)}: ${bytes(memory.in_use_bytes)}` +
      ` in use is over --memory-high (${bytes(memory.high_bytes)}); publishers are paused` +
      ` until it falls under ${bytes(memory.low_bytes)}` +
      ` (${memory.paused_publishers} paused now).`;
  }
}

function renderOverview(overview) {
  const broker = overview.broker || {};
  const totals = overview.object_totals || {};
  const memory = overview.memory;
  const figures = [
    ["connections", number(broker.connections)],
    ["destinations", number(totals.destinations)],
    ["messages in", number(broker.messages_in)],
    ["delivered", number(broker.messages_delivered)],
    ["messages/s", rate(broker.messages_per_second)],
    ["uptime", broker.uptime_s === undefined ? "" : duration(broker.uptime_s)],
    ["memory (resident)", bytes(broker.rss_bytes)],
  ];
  if (memory && memory.enabled) {
    figures.push(["memory in use", `${bytes(memory.in_use_bytes)} of ${bytes(memory.high_bytes)}`],
                 ["publishers paused", number(memory.paused_publishers)]);
  }
  const disk = overview.disk;
  if (disk && disk.enabled) {
    figures.push(["store disk free", `${bytes(disk.free_bytes)} (limit ${bytes(disk.limit_bytes)})`]);
  }
  const resumable = overview.resumable_sessions;
  if (resumable) {
    figures.push(["detached sessions", number(resumable.detached)],
                 ["resume buffers", bytes(resumable.connected_bytes + resumable.detached_bytes)]);
  }
  fillList($("figures"), figures);
  fillTable($("listeners"), (overview.listeners || []).map((entry) =>
    [entry.kind, entry.url || "", entry.endpoint]));
  // The memory marks in force are the alarm's: a --memory-low of 0 is derived from --memory-high.
  const configuration = { ...(overview.configuration || {}) };
  if (memory && memory.enabled) {
    configuration["memory-high"] = String(memory.high_bytes);
    configuration["memory-low"] = String(memory.low_bytes);
  }
  const units = overview.configuration_units || {};
  const body = $("configuration").tBodies[0];
  body.replaceChildren();
  for (const [name, value] of Object.entries(configuration)) {
    const tr = document.createElement("tr");
    tr.dataset.setting = name;
    cell(tr, name, "setting");
    nameNodes(cell(tr, "", "value"), setting(value, units[name]));
    body.appendChild(tr);
  }
  $("setup").hidden = !overview.listeners;
  $("updated").textContent = overview.ts ? `at ${time(overview.ts)}` : "";
}

async function showOverview() {
  const [overview, history] = await Promise.all([
    api("GET", "overview?brief=true"),
    api("GET", brokerHistory.path()).catch((error) => {
      if (error.code === 404) return null; // a broker without statistics keeps no history
      throw error;
    }),
  ]);
  renderAlarms(overview);
  renderOverview(overview);
  if (history !== null) {
    brokerHistory.add(history);
    $("history-span").textContent =
      `one point every ${duration(history.interval_s)}, kept for ${duration(history.span_s)}`;
    brokerHistory.draw();
  }
}

// -- refresh ------------------------------------------------------------------------

// Fetch what a view shows; resolve to the function that shows it.
async function loadView(view) {
  const query = view.query;
  const show = (render, path) => api("GET", path).then((answer) => () => render(answer));
  switch (view.view) {
    case "overview":
      return showOverview().then(() => () => undefined);
    case "connections":
      return show(renderConnections, `connections?${listQuery(query)}`);
    case "connection":
      return showConnection().then(() => () => undefined);
    case "destinations":
      return show(renderDestinations, `destinations?${listQuery(query)}`);
    case "destination":
      return showDestination().then(() => () => undefined);
    case "policies":
      return show(renderPolicies, "policies");
    case "vhosts":
      return show(renderVhosts, "vhosts");
    case "nodes":
      return show(renderNodes, "nodes");
    case "detached":
      return show(renderDetached, "detached-sessions");
    default:
      return () => undefined;
  }
}

let generation = 0; // the latest refresh: an older one's answer is not shown

// Show the open view as the broker has it now.  The timer's refresh is skipped while
// one is running; a new view (routeChanged) is fetched at once, and a refresh of the
// view before it shows nothing when it ends.
async function refresh(routeChanged = false) {
  if ((refreshing && !routeChanged) || shownView === null || $("console").hidden) return;
  const mine = ++generation;
  refreshing = true;
  try {
    const render = await loadView(shownView);
    if (mine !== generation) return;
    render();
    setStatus("live", "live");
  } catch (error) {
    if (error.code === 401) {
      stop();
      forget();
      await begin(error.message);
    } else if (error.code === 400 && /page \d+ is past the last/.test(error.message)) {
      setListQuery(shownView.view, { page: 1 });
    } else {
      setStatus("error", error.message);
    }
  } finally {
    if (mine === generation) refreshing = false;
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
  try {
    showHosts((await api("GET", "vhosts")).length > 1);
  } catch (error) {
    setStatus("error", error.message);
  }
  if (timer === null) timer = setInterval(refresh, REFRESH_MS);
  showRoute();
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
$("policy-form").addEventListener("submit", setPolicy);
mountLists();
window.addEventListener("hashchange", () => {
  if (!$("console").hidden) showRoute();
});
window.addEventListener("resize", () => {
  destinationHistory.resize($("destination-chart"));
  brokerHistory.resize();
});
mountSignIn("console", () => begin());
begin();
