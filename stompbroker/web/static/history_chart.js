// The console overview's charts of the last hour: message rates, connections
// and memory, from the history the broker keeps (GET /api/history), so that
// they show the hour before the page was opened.  The first call fetches the
// whole hour, the later ones only the points since the last (?since=); points
// older than the hour are dropped.  Drawn with the vendored uPlot (loaded
// first as uPlot); figures are formatted as everywhere else (format.js).
import { bytes, number } from "./format.js";

const HEIGHT = 180;

const CHARTS = [
  {
    id: "chart-rates",
    series: [
      { label: "in/s", stroke: "#1f6feb", field: "messages_in_per_second" },
      { label: "delivered/s", stroke: "#1a7f37", field: "messages_delivered_per_second" },
    ],
    value: (v) => number(v, 1),
  },
  {
    id: "chart-connections",
    series: [{ label: "connections", stroke: "#8250df", field: "connections" }],
    value: (v) => number(v),
  },
  {
    id: "chart-memory",
    series: [{ label: "resident", stroke: "#d1242f", field: "rss_bytes" }],
    value: (v) => bytes(v),
  },
];

export class BrokerHistory {
  constructor() {
    this.points = [];
    this.span = 3600;
    this.plots = new Map(); // chart id -> uPlot
  }

  /** The API path of the next call: everything first, then what came since. */
  path() {
    const last = this.points[this.points.length - 1];
    return last ? `history?since=${last.ts}` : "history";
  }

  /** Keep the answer's points, and no more than the span the broker keeps. */
  add(answer) {
    this.span = answer.span_s;
    this.points.push(...answer.points);
    const last = this.points[this.points.length - 1];
    if (last) {
      const oldest = last.ts - this.span;
      while (this.points.length && this.points[0].ts <= oldest) this.points.shift();
    }
  }

  /** Draw (or update) the three charts in their elements. */
  draw() {
    const times = this.points.map((point) => point.ts);
    for (const chart of CHARTS) {
      const element = document.getElementById(chart.id);
      if (!element) continue;
      const data = [times, ...chart.series.map((s) => this.points.map((point) => point[s.field]))];
      element.dataset.points = String(times.length);
      const plot = this.plots.get(chart.id);
      if (plot && element.contains(plot.root)) {
        plot.setData(data);
        continue;
      }
      if (plot) plot.destroy();
      element.replaceChildren();
      const value = (u, v) => (v == null ? "–" : chart.value(v));
      const options = {
        width: Math.max(element.clientWidth, 200),
        height: HEIGHT,
        series: [{}, ...chart.series.map((s) => ({ label: s.label, stroke: s.stroke, width: 2, value }))],
        scales: { y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] } },
        axes: [{}, { size: 70, values: (u, ticks) => ticks.map((tick) => chart.value(tick)) }],
        legend: { live: true },
      };
      this.plots.set(chart.id, new uPlot(options, data, element));
    }
  }

  /** Fit the charts to their elements' widths. */
  resize() {
    for (const [id, plot] of this.plots) {
      const element = document.getElementById(id);
      if (element && element.clientWidth) {
        plot.setSize({ width: Math.max(element.clientWidth, 200), height: HEIGHT });
      }
    }
  }
}
