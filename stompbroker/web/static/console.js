// The management console: tables over the management API (/api/), refreshed
// every two seconds.  Credentials live in this page's memory only (no cookie, no
// storage): every call carries them as HTTP Basic (or a bearer token the
// operator pasted), with X-Requested-With so that
// a refusal does not make the browser ask on its own.  Everything the broker
// sends is shown with textContent, never parsed as HTML.  Destructive actions
// (purge, delete, retry, move, close) wait for a confirmation in a <dialog>.
"use strict";

const REFRESH_MS = 2000;
const BROWSE_COUNT = 20;
let authorization = null;
let timer = null;

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
  const headers = { "X-Requested-With": "stompbroker-console" };
  if (authorization) headers.Authorization = authorization;
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

function confirmAction(text) {
  return new Promise((resolve) => {
    const dialog = $("confirm");
    $("confirm-text").textContent = text;
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
  });
}

function notice(text) {
  $("notice").textContent = text;
}

async function act(question, call, done) {
  if (question !== null && !(await confirmAction(question))) return;
  try {
    const answer = await call();
    notice(done(answer));
  } catch (error) {
    notice(error.message);
  }
  await refresh();
}

function rate(value) {
  return value ? value.toFixed(1) : "0";
}

function renderDestinations(rows) {
  const body = $("destinations").tBodies[0];
  body.replaceChildren();
  for (const row of rows) {
    const tr = document.createElement("tr");
    tr.dataset.destination = row.destination;
    cell(tr, row.destination);
    cell(tr, row.kind);
    cell(tr, row.depth).className = "depth";
    cell(tr, row.in_flight);
    cell(tr, row.consumers);
    cell(tr, row.producers).className = "producers";
    cell(tr, rate(row.messages_in_per_second));
    cell(tr, rate(row.messages_delivered_per_second));
    const actions = cell(tr, "");
    actions.className = "actions";
    if (row.kind !== "topic") {
      const name = row.destination;
      button(actions, "Browse", () => browse(name));
      button(actions, "Move", () => {
        $("move-from").value = name;
        $("move-to").focus();
      });
      button(actions, "Purge", () => act(
        `Purge every message waiting in ${name}?`,
        () => api("DELETE", `destinations/${encode(name)}/messages`),
        (answer) => `purged ${answer.purged} messages from ${name}`), true);
      if (/^\/queue\/DLQ\./.test(name)) {
        button(actions, "Retry", () => act(
          `Send the messages of ${name} back to their original destinations?`,
          () => api("POST", `destinations/${encode(name)}/retry`, {}),
          (answer) => `sent ${answer.retried} messages back, ${answer.left} stayed`), true);
      }
      button(actions, "Delete", () => act(
        `Delete ${name} and what waits in it?`,
        () => api("DELETE", `destinations/${encode(name)}`),
        (answer) => `deleted ${name} (${answer.discarded} messages)`), true);
    }
    body.appendChild(tr);
  }
}

function renderConnections(rows) {
  const body = $("connections").tBodies[0];
  body.replaceChildren();
  for (const row of rows) {
    const tr = document.createElement("tr");
    tr.dataset.connection = row.id;
    const since = row.connected_since.replace("T", " ").replace(/\.\d+Z$/, " UTC");
    for (const [name, value] of [["id", row.id], ["peer", row.peer], ["login", row.login],
                                 ["transport", row.transport], ["version", row.version],
                                 ["subscriptions", row.subscriptions.length],
                                 ["messages-in", row.messages_in],
                                 ["messages-out", row.messages_out],
                                 ["bytes-in", row.bytes_in], ["bytes-out", row.bytes_out],
                                 ["since", since]]) {
      cell(tr, value).className = name;
    }
    const actions = cell(tr, "");
    actions.className = "actions";
    button(actions, "Close", () => act(
      `Close connection ${row.id} from ${row.peer}? The client gets an ERROR.`,
      () => api("DELETE", `connections/${encode(row.id)}?reason=closed+from+the+console`),
      (answer) => `closed ${answer.id}`), true);
    body.appendChild(tr);
  }
}

function renderDetached(rows) {
  const body = $("detached").tBodies[0];
  body.replaceChildren();
  const time = (text) => text.replace("T", " ").replace(/\.\d+Z$/, " UTC");
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
    button(actions, "End", () => act(
      `End detached session ${row.id} of ${row.login || "no login"}? Its client can no longer resume it.`,
      () => api("DELETE", `detached-sessions/${encode(row.id)}`),
      (answer) => `ended ${answer.id}`), true);
    body.appendChild(tr);
  }
}

function renderOverview(overview) {
  const broker = overview.broker || {};
  const figures = [
    ["connections", broker.connections],
    ["messages in", broker.messages_in],
    ["delivered", broker.messages_delivered],
    ["messages/s", rate(broker.messages_per_second)],
    ["uptime", broker.uptime_s === undefined ? "" : `${Math.round(broker.uptime_s)} s`],
  ];
  const resumable = overview.resumable_sessions;
  if (resumable) {
    figures.push(["detached sessions", resumable.detached],
                 ["resume buffers", `${resumable.connected_bytes + resumable.detached_bytes} B`]);
  }
  const list = $("figures");
  list.replaceChildren();
  for (const [name, value] of figures) {
    const div = document.createElement("div");
    const dt = document.createElement("dt");
    const dd = document.createElement("dd");
    dt.textContent = name;
    dd.textContent = value === undefined ? "" : String(value);
    div.append(dt, dd);
    list.appendChild(div);
  }
  $("updated").textContent = overview.ts ? `at ${overview.ts}` : "";
}

function renderConsumers(subscribers) {
  const body = $("consumers").tBodies[0];
  body.replaceChildren();
  for (const consumer of subscribers) {
    const tr = document.createElement("tr");
    for (const value of [consumer.connection, consumer.subscription, consumer.ack,
                         consumer.in_flight, consumer.window]) {
      cell(tr, value);
    }
    body.appendChild(tr);
  }
  $("consumers").hidden = subscribers.length === 0;
}

async function browse(name) {
  try {
    const [detail, messages] = await Promise.all([
      api("GET", `destinations/${encode(name)}`),
      api("GET", `destinations/${encode(name)}/messages?count=${BROWSE_COUNT}`),
    ]);
    $("browsed").textContent = name;
    renderConsumers(detail.subscribers || []);
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
    $("browser").hidden = false;
  } catch (error) {
    notice(error.message);
  }
}

async function refresh() {
  try {
    const [overview, destinations, connections, detached] = await Promise.all([
      api("GET", "overview"), api("GET", "destinations"), api("GET", "connections"),
      api("GET", "detached-sessions"),
    ]);
    renderOverview(overview);
    renderDestinations(destinations);
    renderConnections(connections);
    renderDetached(detached);
    setStatus("live", "live");
  } catch (error) {
    if (error.code === 401) {
      signOut(error.message);
    } else {
      setStatus("error", error.message);
    }
  }
}

function signOut(message) {
  clearInterval(timer);
  timer = null;
  authorization = null;
  $("console").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  setStatus("signed-out", "signed out");
}

async function signIn(event) {
  event.preventDefault();
  const user = $("user").value;
  const password = $("password").value;
  const token = $("token").value.trim();
  if (token) {
    authorization = `Bearer ${token}`;
  } else {
    authorization = user ? "Basic " + btoa(String.fromCharCode(
      ...new TextEncoder().encode(`${user}:${password}`))) : null;
  }
  $("password").value = "";
  $("token").value = "";
  try {
    await api("GET", "overview");
  } catch (error) {
    authorization = null;
    $("login-error").textContent = error.message;
    return;
  }
  $("login-error").textContent = "";
  $("login").hidden = true;
  $("console").hidden = false;
  await refresh();
  timer = setInterval(refresh, REFRESH_MS);
}

async function publish(event) {
  event.preventDefault();
  const name = $("publish-destination").value;
  await act(null, () => api("POST", `destinations/${encode(name)}/publish`,
                            { body: $("publish-body").value }),
            (answer) => `published ${answer.message_id} to ${name}`);
}

async function move(event) {
  event.preventDefault();
  const from = $("move-from").value;
  const to = $("move-to").value;
  const copy = $("move-copy").checked;
  const request = { to, copy };
  const count = $("move-count").value;
  if (count) request.count = Number(count);
  const verb = copy ? "Copy" : "Move";
  await act(`${verb} ${count || "all the"} messages waiting in ${from} to ${to}?`,
            () => api("POST", `destinations/${encode(from)}/move`, request),
            (answer) => `${copy ? "copied" : "moved"} ${answer.moved} messages to ${to}`);
}

$("login").addEventListener("submit", signIn);
$("publish").addEventListener("submit", publish);
$("move").addEventListener("submit", move);
$("close-browser").addEventListener("click", () => { $("browser").hidden = true; });
