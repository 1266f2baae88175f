// Drawing with plain SVG: heatmaps (attention weights, activations) and a
// line chart (the training loss). No library: a heatmap is one rectangle per
// value, a chart one polyline per series.

const SVG_NS = "http://www.w3.org/2000/svg";

export function svg(name, attrs = {}, parent = null) {
  const e = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

export function html(name, attrs = {}, parent = null, text = null) {
  const e = document.createElement(name);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  if (text !== null) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

// ---- colours ----------------------------------------------------------------------------------

function mix(a, b, t) {
  return a.map((x, i) => Math.round(x + (b[i] - x) * t));
}
const WHITE = [255, 255, 255];
const BLUE = [23, 64, 135];
const RED = [178, 34, 52];

// an attention weight in [0, 1]: white to dark blue (a square root, so small weights still show)
export function weightColor(v) {
  const t = Math.sqrt(Math.min(1, Math.max(0, v)));
  return `rgb(${mix(WHITE, BLUE, t).join(",")})`;
}

// an activation: blue below zero, red above, white at zero, scaled by the largest magnitude
export function signedColor(v, max) {
  const t = max > 0 ? Math.min(1, Math.abs(v) / max) : 0;
  return `rgb(${mix(WHITE, v < 0 ? BLUE : RED, Math.sqrt(t)).join(",")})`;
}

function fmt(v) {
  return Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 1 ? v.toFixed(2) : v.toFixed(3);
}

// ---- heatmaps ---------------------------------------------------------------------------------

// A matrix (an array of rows) as a grid of coloured cells.
//   rowLabels, colLabels: token labels (drawn when given)
//   cell: the side of a cell in pixels (cellHeight: its height, when the rows need room for their labels)
//   signed: activations (blue–white–red) instead of weights (white–blue)
//   onFocusToken(kind, index): a row or column label was hovered or focused ("row"/"col"), or left (null)
// Returns {root, highlight(row, col)}: highlight outlines a row and a column (-1 for none).
export function heatmap(matrix, options = {}) {
  const rows = matrix.length;
  const cols = rows ? matrix[0].length : 0;
  const cw = options.cell || 18;
  const ch = options.cellHeight || cw;
  const rowLabels = options.rowLabels || null;
  const colLabels = options.colLabels || null;
  const charWidth = 7.2;
  const longest = (labels) => (labels ? Math.max(1, ...labels.map((l) => l.length)) : 0);
  const left = rowLabels ? Math.min(170, longest(rowLabels) * (charWidth + 1) + 14) : 0;  // room for a bold label
  // column labels are turned 50°: they rise above the map and lean past its right edge
  const top = colLabels ? Math.min(120, longest(colLabels) * charWidth * 0.77 + 12) : 0;
  const right = colLabels ? Math.min(100, longest(colLabels) * charWidth * 0.64) : 0;
  const width = left + cols * cw + 2 + right;
  const height = top + rows * ch + 2;
  const root = svg("svg", {
    width,
    height,
    viewBox: `0 0 ${width} ${height}`,
    class: "heatmap",
    role: "img",
    "aria-label": options.label || `a ${rows} by ${cols} map`,
  });
  let max = 0;
  for (const row of matrix) for (const v of row) max = Math.max(max, Math.abs(v));
  const color = options.signed ? (v) => signedColor(v, max) : weightColor;
  const cells = [];
  const grid = svg("g", { transform: `translate(${left},${top})` }, root);
  for (let r = 0; r < rows; ++r) {
    const line = [];
    for (let c = 0; c < cols; ++c) {
      const v = matrix[r][c];
      const rect = svg("rect", { x: c * cw, y: r * ch, width: cw, height: ch, fill: color(v) }, grid);
      rect.dataset.row = r;
      rect.dataset.col = c;
      if (options.titles !== false) {
        const t = svg("title", {}, rect);
        t.textContent =
          (rowLabels ? `${rowLabels[r]} → ${colLabels ? colLabels[c] : c}` : `[${r}, ${c}]`) + `: ${fmt(v)}`;
      }
      line.push(rect);
    }
    cells.push(line);
  }
  svg("rect", { x: 0, y: 0, width: cols * cw, height: rows * ch, class: "frame" }, grid);
  const rowMark = svg("rect", { x: -1, y: 0, width: cols * cw + 2, height: ch, class: "mark", visibility: "hidden" }, grid);
  const colMark = svg("rect", { x: 0, y: -1, width: cw, height: rows * ch + 2, class: "mark col", visibility: "hidden" }, grid);
  const labels = { row: [], col: [] };

  const label = (kind, index, text, attrs) => {
    const g = svg("g", { class: "token", tabindex: options.onFocusToken ? 0 : -1, ...attrs }, root);
    if (options.onFocusToken) {
      g.setAttribute("role", "button");
      g.setAttribute("aria-label", `${kind === "row" ? "row" : "column"} ${index + 1}: ${text}`);
      const enter = () => options.onFocusToken(kind, index);
      const leave = () => options.onFocusToken(null, -1);
      g.addEventListener("mouseenter", enter);
      g.addEventListener("focus", enter);
      g.addEventListener("mouseleave", leave);
      g.addEventListener("blur", leave);
    }
    const t = svg("text", {}, g);
    t.textContent = text;
    labels[kind].push(g);
    return t;
  };
  if (rowLabels)
    rowLabels.forEach((text, r) => {
      const t = label("row", r, text, {});
      t.setAttribute("x", left - 6);
      t.setAttribute("y", top + r * ch + ch / 2);
      t.setAttribute("text-anchor", "end");
      t.setAttribute("dominant-baseline", "central");
    });
  if (colLabels)
    colLabels.forEach((text, c) => {
      const x = left + c * cw + cw / 2;
      const t = label("col", c, text, { transform: `translate(${x},${top - 6}) rotate(-50)` });
      t.setAttribute("x", 0);
      t.setAttribute("y", 0);
      t.setAttribute("dominant-baseline", "central");
    });

  function highlight(row, col) {
    rowMark.setAttribute("visibility", row >= 0 ? "visible" : "hidden");
    colMark.setAttribute("visibility", col >= 0 ? "visible" : "hidden");
    if (row >= 0) rowMark.setAttribute("y", row * ch);
    if (col >= 0) colMark.setAttribute("x", col * cw);
    cells.forEach((line, r) =>
      line.forEach((rect, c) => {
        rect.classList.toggle("hl-row", r === row);
        rect.classList.toggle("hl-col", c === col);
      }),
    );
    labels.row.forEach((g, r) => g.classList.toggle("on", r === row));
    labels.col.forEach((g, c) => g.classList.toggle("on", c === col));
  }
  return { root, highlight };
}

// ---- a line chart -----------------------------------------------------------------------------

// series: [{name, points: [[x, y], ...], className}], drawn over shared axes
export function lineChart(series, options = {}) {
  const width = options.width || 1100;
  const height = options.height || 300;
  const m = { left: 56, right: 16, top: 14, bottom: 40 };
  const root = svg("svg", {
    width,
    height,
    viewBox: `0 0 ${width} ${height}`,
    class: "chart",
    role: "img",
    "aria-label": options.label || "a chart",
  });
  const all = series.flatMap((s) => s.points).filter(([, y]) => Number.isFinite(y));
  if (!all.length) {
    const t = svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle", class: "axis" }, root);
    t.textContent = "no steps yet";
    return root;
  }
  const xs = all.map(([x]) => x);
  const ys = all.map(([, y]) => y);
  const x0 = Math.min(...xs);
  const x1 = Math.max(...xs, x0 + 1);
  const y0 = Math.min(...ys);
  const y1 = Math.max(...ys, y0 + 1e-9);
  const X = (x) => m.left + ((x - x0) / (x1 - x0)) * (width - m.left - m.right);
  const Y = (y) => height - m.bottom - ((y - y0) / (y1 - y0)) * (height - m.top - m.bottom);
  const axes = svg("g", { class: "axis" }, root);
  for (let i = 0; i <= 4; ++i) {
    const y = y0 + ((y1 - y0) * i) / 4;
    svg("line", { x1: m.left, x2: width - m.right, y1: Y(y), y2: Y(y), class: "gridline" }, axes);
    const t = svg("text", { x: m.left - 6, y: Y(y), "text-anchor": "end", "dominant-baseline": "central" }, axes);
    t.textContent = fmt(y);
  }
  for (let i = 0; i <= 5; ++i) {
    const x = x0 + ((x1 - x0) * i) / 5;
    const t = svg("text", { x: X(x), y: height - m.bottom + 16, "text-anchor": "middle" }, axes);
    t.textContent = Math.round(x);
  }
  const xl = svg("text", { x: (m.left + width - m.right) / 2, y: height - 6, "text-anchor": "middle" }, axes);
  xl.textContent = options.xLabel || "";
  const yl = svg("text", { x: 12, y: (m.top + height - m.bottom) / 2, "text-anchor": "middle",
                          transform: `rotate(-90 12 ${(m.top + height - m.bottom) / 2})` }, axes);
  yl.textContent = options.yLabel || "";
  for (const s of series) {
    if (!s.points.length) continue;
    const points = s.points.filter(([, y]) => Number.isFinite(y)).map(([x, y]) => `${X(x).toFixed(1)},${Y(y).toFixed(1)}`);
    svg("polyline", { points: points.join(" "), class: `series ${s.className || ""}` }, root);
    if (s.dots)
      for (const [x, y] of s.points) svg("circle", { cx: X(x), cy: Y(y), r: 3.5, class: `dot ${s.className || ""}` }, root);
  }
  const legend = svg("g", { class: "legend", transform: `translate(${width - m.right - 150},${m.top + 4})` }, root);
  series.forEach((s, i) => {
    svg("line", { x1: 0, x2: 18, y1: i * 16 + 6, y2: i * 16 + 6, class: `series ${s.className || ""}` }, legend);
    const t = svg("text", { x: 24, y: i * 16 + 6, "dominant-baseline": "central" }, legend);
    t.textContent = s.name;
  });
  return root;
}
