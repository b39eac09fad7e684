// A destination's rates and depth over time, for the console's destination
// page: every refresh of the page is one point (its in/s and out/s over the
// broker's latest live interval, and its depth then), kept for the last
// MAX_POINTS refreshes, drawn with the vendored uPlot (loaded first as uPlot).
// A destination is its virtual host and name: the same name in two virtual
// hosts is two destinations (docs/virtual-hosts.md).
"use strict";

const MAX_POINTS = 300; // ten minutes at the console's refresh of two seconds
const HEIGHT = 220;

/** The key of a destination of a virtual host (``/`` for the default one). */
export function destinationKey(vhost, name) {
  return `${vhost || "/"} ${name}`;
}

export class DestinationHistory {
  constructor() {
    this.times = [];
    this.series = new Map(); // destinationKey -> {in: [], out: [], depth: []}
    this.chart = null; // {name, plot}
  }

  /** One point per destination: those absent now get null (a gap in the chart). */
  record(seconds, rows) {
    this.times.push(seconds);
    const seen = new Set();
    for (const row of rows) {
      const key = destinationKey(row.vhost, row.destination);
      let entry = this.series.get(key);
      if (!entry) {
        const empty = () => this.times.slice(0, -1).map(() => null);
        entry = { in: empty(), out: empty(), depth: empty() };
        this.series.set(key, entry);
      }
      entry.in.push(row.messages_in_per_second || 0);
      entry.out.push(row.messages_delivered_per_second || 0);
      entry.depth.push(row.depth);
      seen.add(key);
    }
    for (const [name, entry] of this.series) {
      if (!seen.has(name)) {
        entry.in.push(null);
        entry.out.push(null);
        entry.depth.push(null);
      }
    }
    if (this.times.length > MAX_POINTS) {
      this.times.shift();
      for (const entry of this.series.values()) {
        entry.in.shift();
        entry.out.shift();
        entry.depth.shift();
      }
    }
  }

  /** Draw the chart of ``name`` (a destinationKey) in ``element``, anew when it changes. */
  draw(name, element) {
    const entry = this.series.get(name);
    const data = entry
      ? [this.times.slice(), entry.in.slice(), entry.out.slice(), entry.depth.slice()]
      : [[], [], [], []];
    element.dataset.points = String(entry ? entry.depth.filter((value) => value !== null).length : 0);
    if (this.chart && this.chart.name === name && element.contains(this.chart.plot.root)) {
      this.chart.plot.setData(data);
      return;
    }
    if (this.chart) this.chart.plot.destroy();
    element.replaceChildren();
    const value = (plot, number) => (number == null ? "–" : number.toFixed(1));
    const options = {
      width: Math.max(element.clientWidth, 300),
      height: HEIGHT,
      series: [
        {},
        { label: "in/s", stroke: "#1f6feb", width: 2, scale: "rate", value },
        { label: "out/s", stroke: "#1a7f37", width: 2, scale: "rate", value },
        { label: "depth", stroke: "#d1242f", width: 2, scale: "depth", value },
      ],
      scales: {
        rate: { range: (plot, min, max) => [0, Math.max(1, max * 1.1)] },
        depth: { range: (plot, min, max) => [0, Math.max(1, max * 1.1)] },
      },
      axes: [
        {},
        { scale: "rate", label: "msg/s", size: 60 },
        { scale: "depth", label: "messages waiting", side: 1, size: 60, grid: { show: false } },
      ],
      legend: { live: true },
    };
    this.chart = { name, plot: new uPlot(options, data, element) };
  }

  /** Fit the chart to its element's width. */
  resize(element) {
    if (this.chart) {
      this.chart.plot.setSize({ width: Math.max(element.clientWidth, 300), height: HEIGHT });
    }
  }
}
