// The status page's script: local times, reloads, the throughput chart, and a question before
// a penalty is lifted or a suspension resumed. No libraries.
"use strict";

function localTimes() {
  const today = new Date().toDateString();
  for (const el of document.querySelectorAll("time[datetime]")) {
    const at = new Date(el.getAttribute("datetime"));
    if (isNaN(at)) continue;
    el.title = el.textContent;  // the UTC time stays on hover
    el.textContent = at.toDateString() === today
      ? at.toLocaleTimeString()
      : at.toLocaleString();
  }
}

function scheduleReload() {
  const seconds = Number(document.body.dataset.refreshS || 5);
  const pause = document.getElementById("pause");
  pause.checked = sessionStorage.getItem("wbsync-pause") === "1";
  pause.addEventListener("change", () =>
    sessionStorage.setItem("wbsync-pause", pause.checked ? "1" : "0"));
  setInterval(() => {
    const typing = document.activeElement && document.activeElement.form;
    if (!pause.checked && !typing) location.reload();
  }, seconds * 1000);
}

const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#2457a6", "#0a7d32", "#a15c00", "#7b3fa0", "#b3261e", "#14808a", "#6b6b00",
  "#c2185b", "#455a64"];

function svg(tag, attrs, text) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  return el;
}

// One line per queue of pages a minute, and red bars for the 429s WB sent.
function drawThroughput(box, data) {
  box.textContent = "";
  const minutes = data.minutes;
  const queues = Object.keys(data.queues);
  if (!minutes.length || !queues.length) {
    box.innerHTML = '<p class="empty">no pages synced in the last hour</p>';
    return;
  }
  const w = 720, h = 180, left = 40, bottom = 20;
  const max = Math.max(1, ...queues.flatMap(q => data.queues[q].pages),
    ...queues.flatMap(q => data.queues[q].upstream_429));
  const x = i => left + (i * (w - left - 10)) / Math.max(1, minutes.length - 1);
  const y = v => h - bottom - (v * (h - bottom - 10)) / max;
  const chart = svg("svg", {width: w, height: h, role: "img", "aria-label": "throughput"});
  chart.append(svg("text", {x: 4, y: 14, "font-size": 11}, String(max)));
  chart.append(svg("text", {x: 4, y: h - bottom, "font-size": 11}, "0"));
  const first = new Date(minutes[0]), last = new Date(minutes[minutes.length - 1]);
  chart.append(svg("text", {x: left, y: h - 4, "font-size": 11}, first.toLocaleTimeString()));
  chart.append(svg("text", {x: w - 70, y: h - 4, "font-size": 11}, last.toLocaleTimeString()));
  const legend = document.createElement("div");
  legend.className = "legend";
  queues.forEach((q, n) => {
    const series = data.queues[q];
    const color = COLORS[n % COLORS.length];
    const points = series.pages.map((v, i) => `${x(i)},${y(v)}`).join(" ");
    chart.append(svg("polyline", {points, fill: "none", stroke: color, "stroke-width": 1.5}));
    series.upstream_429.forEach((v, i) => {
      if (v > 0) chart.append(svg("rect", {x: x(i) - 2, y: y(v), width: 4,
        height: h - bottom - y(v), fill: "#b3261e"}));
    });
    const pages = series.pages.reduce((a, b) => a + b, 0);
    const refused = series.upstream_429.reduce((a, b) => a + b, 0);
    const item = document.createElement("span");
    item.style.color = color;
    item.textContent = `${q}: ${pages} pages, ${refused} 429s   `;
    legend.append(item);
  });
  box.append(chart, legend);
}

async function loadThroughput() {
  const box = document.getElementById("throughput");
  try {
    const reply = await fetch(box.dataset.src, {credentials: "same-origin"});
    if (!reply.ok) throw new Error(`HTTP ${reply.status}`);
    drawThroughput(box, await reply.json());
  } catch (err) {
    box.innerHTML = "";
    const p = document.createElement("p");
    p.className = "empty";
    p.textContent = `throughput unavailable (${err.message})`;
    box.append(p);
  }
}

// A lift lets the seller's requests reach WB again at once, and WB may penalise them anew; a
// resumed cabinet is sent to WB again, which may refuse it anew.
function askBeforeLifting() {
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!confirm(form.dataset.confirm)) event.preventDefault();
    });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  localTimes();
  askBeforeLifting();
  scheduleReload();
  if (document.getElementById("throughput")) loadThroughput();
});
