// A small bar chart in SVG: one bar per day, a labelled axis, a <title> on
// each bar for its value, and a text summary for screen readers. Colours
// come from CSS (themes), none from script.
import { svg, h } from "./dom";

export interface Bar {
  label: string;
  value: number;
}

export function barChart(bars: Bar[], title: string, format: (n: number) => string): HTMLElement {
  const w = 640, hgt = 220, left = 56, bottom = 28, top = 10;
  const max = Math.max(0, ...bars.map((b) => b.value)) || 1;
  const step = bars.length ? (w - left - 8) / bars.length : 0;
  const bw = Math.max(2, Math.min(40, step * 0.7));
  const y = (v: number) => top + (hgt - top - bottom) * (1 - v / max);
  const root = svg("svg", { viewBox: `0 0 ${w} ${hgt}`, class: "chart", role: "img", "aria-label": `${title}: ${bars.map((b) => `${b.label} ${format(b.value)}`).join(", ") || "no data"}` });
  // Axis and three grid lines with their values.
  for (const f of [0, 0.5, 1]) {
    const yy = y(max * f);
    root.appendChild(svg("line", { x1: left, x2: w - 4, y1: yy, y2: yy, class: "grid" }));
    root.appendChild(svg("text", { x: left - 6, y: yy + 4, class: "tick", "text-anchor": "end" }, format(max * f)));
  }
  bars.forEach((b, i) => {
    const x = left + i * step + (step - bw) / 2;
    const top = y(b.value);
    root.appendChild(svg("rect", { x, y: top, width: bw, height: Math.max(0, y(0) - top), class: "bar", "data-value": b.value }, svg("title", {}, `${b.label}: ${format(b.value)}`)));
    // Label every bar when they fit, else about eight of them.
    if (bars.length <= 8 || i % Math.ceil(bars.length / 8) === 0) {
      root.appendChild(svg("text", { x: x + bw / 2, y: hgt - 8, class: "tick", "text-anchor": "middle" }, b.label.slice(5)));
    }
  });
  return h("figure", { class: "chart-box" }, root, h("figcaption", null, title));
}
