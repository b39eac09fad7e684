// How the pages show figures, the same way everywhere (the console and the
// dashboard): counts with thousands separators, bytes in B/KiB/MiB/GiB,
// durations as "40 min 40 s", times as "2026-01-02 03:04:05 UTC".
"use strict";

/** A count or rate, with thousands separators and at most ``digits`` decimals. */
export function number(value, digits = 0) {
  return Number(value || 0).toLocaleString("en", { maximumFractionDigits: digits });
}

/** A size in bytes: "512 B", "1.5 KiB", "1.7 GiB". */
export function bytes(value) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let index = 0;
  value = Number(value || 0);
  while (value >= 1024 && index < units.length - 1) {
    value /= 1024;
    index += 1;
  }
  return `${number(value, index === 0 ? 0 : 1)} ${units[index]}`;
}

/** A duration in seconds: "0.5 s", "12 s", "40 min 40 s", "3 h 2 min", "2 d 4 h". */
export function duration(seconds) {
  seconds = Number(seconds || 0);
  if (seconds < 10 && seconds % 1 !== 0) return `${number(seconds, 1)} s`;
  const days = Math.floor(seconds / 86400);
  const hours = Math.floor((seconds % 86400) / 3600);
  const minutes = Math.floor((seconds % 3600) / 60);
  const rest = Math.floor(seconds % 60);
  if (days) return `${days} d ${hours} h`;
  if (hours) return `${hours} h ${minutes} min`;
  if (minutes) return rest ? `${minutes} min ${rest} s` : `${minutes} min`;
  return `${rest} s`;
}

/** An ISO-8601 time of the API as "2026-01-02 03:04:05 UTC"; "" for none. */
export function time(text) {
  return (text || "").replace("T", " ").replace(/(\.\d+)?Z$/, " UTC");
}

/** A setting's value with its unit (``bytes``, ``s`` or ``ms``, from the API), as the pages show it. */
export function setting(value, unit) {
  if (!/^\d+(\.\d+)?$/.test(value || "")) return value;
  const amount = Number(value);
  if (unit === "bytes") return amount === 0 ? "0 (off)" : bytes(amount);
  if (unit === "s") return duration(amount);
  if (unit === "ms") return amount === 0 ? "0 (none)" : duration(amount / 1000);
  return number(amount, 3);
}
