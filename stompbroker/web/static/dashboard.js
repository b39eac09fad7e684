// The dashboard's behaviour: subscribe to the broker's live stats over WebSocket with
// @stomp/stompjs (StompJs), and draw them with uPlot. Each message on
// /topic/stompbroker.stats is one interval: flow counters over interval_s seconds, gauges
// at ts (docs/monitoring.md). /stats fills the figures at once, before the first one comes.
// The STOMP connection logs in with the pages' shared sign-in (signin.js); a broker that
// refuses it (--auth without --allow-anonymous, or wrong credentials) opens the sign-in.
import { apiHeaders, connectHeaders, isLoginRefused, mountSignIn, signIn } from "./signin.js";
import { bytes, duration, number } from "./format.js";

(function () {
  const STATS_TOPIC = "/topic/stompbroker.stats";
  const HISTORY = 180; // points kept per chart: 15 minutes at the default 5 s
  const MAX_SERIES = 8; // destinations per chart: the busiest
  const COLOURS = ["#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#0a7b83", "#57606a"];
  const $ = (id) => document.getElementById(id);

  const times = []; // seconds since the epoch, one per interval
  const history = new Map(); // destination -> {rate: [], depth: [], traffic, peakDepth}
  const connections = { open: [], opened: [], closed: [] };
  const charts = {};

  function websocketUrl() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    return scheme + (location.host || "127.0.0.1:15674") + "/ws";
  }

  function setStatus(state, text) {
    $("status").dataset.state = state;
    $("status").textContent = text;
  }

  function showFigures(broker, destinations, deliveriesPerSecond) {
    $("uptime").textContent = duration(broker.uptime_s);
    $("connections").textContent = number(broker.connections);
    $("rate").textContent = number(broker.messages_per_second, 1);
    $("deliveries").textContent = number(deliveriesPerSecond, 1);
    $("rss").textContent = bytes(broker.rss_bytes);
    $("destination-count").textContent = number(destinations);
  }

  function showTable(records, seconds) {
    const rows = records
      .slice()
      .sort((a, b) => b.messages_in + b.messages_delivered - (a.messages_in + a.messages_delivered) ||
        b.depth - a.depth || a.destination.localeCompare(b.destination))
      .map((record) => {
        const row = document.createElement("tr");
        row.className = "destination";
        row.dataset.destination = record.destination;
        const cells = [
          record.destination,
          number(seconds ? record.messages_in / seconds : 0, 1),
          number(seconds ? record.messages_delivered / seconds : 0, 1),
          number(record.depth),
          number(record.in_flight),
          number(record.consumers),
          number(record.producers),
        ];
        for (const value of cells) {
          const cell = document.createElement("td");
          cell.textContent = value;
          row.appendChild(cell);
        }
        return row;
      });
    if (rows.length === 0) {
      const row = document.createElement("tr");
      row.className = "empty";
      row.innerHTML = '<td colspan="7">no destination had traffic in the latest interval</td>';
      rows.push(row);
    }
    $("destinations").replaceChildren(...rows);
  }

  // One point per interval for every destination known so far (null before it appeared).
  function remember(snapshot) {
    const seconds = snapshot.interval_s;
    times.push(Date.parse(snapshot.ts) / 1000);
    const seen = new Set();
    for (const record of snapshot.destinations) {
      let entry = history.get(record.destination);
      if (!entry) {
        entry = { rate: times.slice(0, -1).map(() => null), depth: times.slice(0, -1).map(() => null), traffic: 0, peakDepth: 0 };
        history.set(record.destination, entry);
      }
      entry.rate.push(seconds ? record.messages_in / seconds : 0);
      entry.depth.push(record.depth);
      entry.traffic += record.messages_in + record.messages_delivered;
      entry.peakDepth = Math.max(entry.peakDepth, record.depth);
      seen.add(record.destination);
    }
    for (const [name, entry] of history) {
      if (!seen.has(name)) {
        entry.rate.push(0);
        entry.depth.push(0);
      }
    }
    connections.open.push(snapshot.broker.connections);
    connections.opened.push(snapshot.broker.connections_opened);
    connections.closed.push(snapshot.broker.connections_closed);
    if (times.length > HISTORY) {
      times.shift();
      for (const entry of history.values()) {
        entry.rate.shift();
        entry.depth.shift();
      }
      for (const series of Object.values(connections)) series.shift();
    }
  }

  function busiest(key) {
    return Array.from(history.entries())
      .filter(([, entry]) => entry[key] > 0)
      .sort((a, b) => b[1][key] - a[1][key] || a[0].localeCompare(b[0]))
      .slice(0, MAX_SERIES)
      .map(([name]) => name)
      .sort();
  }

  function width(element) {
    return Math.max(element.clientWidth, 300);
  }

  // Draw a chart, making it again when its series change (uPlot's series are fixed).
  function draw(id, names, data, valueLabel) {
    const element = $(id);
    const key = names.join("\n");
    let chart = charts[id];
    if (chart && chart.key !== key) {
      chart.plot.destroy();
      chart = null;
    }
    if (!chart) {
      element.replaceChildren();
      const options = {
        width: width(element),
        height: 240,
        series: [{}].concat(names.map((name, index) => ({
          label: name,
          stroke: COLOURS[index % COLOURS.length],
          width: 2,
          spanGaps: false,
          value: (plot, value) => (value == null ? "–" : number(value, 1)),
        }))),
        axes: [{}, { label: valueLabel, size: 60 }],
        scales: { y: { range: (plot, min, max) => [0, Math.max(1, max * 1.1)] } },
        legend: { live: true },
      };
      chart = { key: key, plot: new uPlot(options, data, element) };
      charts[id] = chart;
    } else {
      chart.plot.setData(data);
    }
  }

  function redraw() {
    const rateNames = busiest("traffic");
    draw("throughput", rateNames, [times.slice()].concat(rateNames.map((name) => history.get(name).rate.slice())), "msg/s");
    const depthNames = busiest("peakDepth");
    draw("depth", depthNames, [times.slice()].concat(depthNames.map((name) => history.get(name).depth.slice())), "messages");
    draw("connections-chart", ["open", "opened", "closed"],
      [times.slice(), connections.open.slice(), connections.opened.slice(), connections.closed.slice()], "connections");
  }

  // In a cluster every node publishes the cluster's figures; show those of the node
  // that serves this page (named by /stats), not each node's copy in turn.
  let ownNode = null;

  function onStats(message) {
    const snapshot = JSON.parse(message.body);
    if (ownNode && snapshot.node && snapshot.node !== ownNode) {
      return;
    }
    $("node-count").textContent = String((snapshot.nodes || []).length || 1);
    const seconds = snapshot.interval_s;
    const delivered = snapshot.destinations.reduce((sum, record) => sum + record.messages_delivered, 0);
    showFigures(snapshot.broker, snapshot.destinations.length, seconds ? delivered / seconds : 0);
    showTable(snapshot.destinations, seconds);
    remember(snapshot);
    redraw();
    $("updated").textContent = "at " + new Date(snapshot.ts).toLocaleTimeString() +
      ", every " + number(seconds, 1) + " s";
    document.body.dataset.points = String(times.length);
  }

  function loadNow() {
    fetch("stats", { cache: "no-store", credentials: "omit", headers: apiHeaders() })
      .then((response) => response.json())
      .then((stats) => {
        ownNode = stats.node || null;
        $("node-count").textContent = String((stats.nodes || []).length || 1);
        if (times.length === 0) {
          showFigures(stats.broker, Object.keys(stats.destinations).length, stats.broker.deliveries_per_second);
        }
      })
      .catch(() => undefined);
  }

  document.body.dataset.points = "0";
  const client = new StompJs.Client({
    brokerURL: websocketUrl(),
    reconnectDelay: 2000,
    heartbeatIncoming: 10000,
    heartbeatOutgoing: 10000,
  });
  // Every (re)connect logs in with the credentials signed in with at that moment.
  client.beforeConnect = () => {
    client.connectHeaders = connectHeaders();
  };
  client.onConnect = () => {
    setStatus("live", "live");
    client.subscribe(STATS_TOPIC, onStats);
  };
  client.onWebSocketClose = () => {
    if ($("status").dataset.state !== "signed-out") setStatus("connecting", "reconnecting");
  };
  client.onStompError = async (frame) => {
    const message = frame.headers.message || "refused";
    if (!isLoginRefused(frame)) {
      setStatus("error", "error: " + message);
      return;
    }
    // Retrying the same credentials every few seconds would only fill the broker's log.
    setStatus("signed-out", "sign in to follow the stats: " + message);
    await client.deactivate();
    if (await signIn(message)) reconnect();
  };
  function reconnect() {
    setStatus("connecting", "connecting");
    loadNow();
    client.activate();
  }
  mountSignIn("dashboard", reconnect);
  window.addEventListener("resize", () => {
    for (const [id, chart] of Object.entries(charts)) {
      chart.plot.setSize({ width: width($(id)), height: 240 });
    }
  });
  loadNow();
  client.activate();
})();
