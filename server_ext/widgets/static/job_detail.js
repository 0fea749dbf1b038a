// JobDetail view (anywidget ES module). Protocol: ../protocol.md, "JobDetail".
// Plain ES2020, no dependencies (clusters are air-gapped), text only (log lines never become HTML).
// Uses common.js's names (h, button, badge, formatSeconds, injectStyle, run, FINAL), which
// views.JobDetail serves before this file as one module.
//
// DOM hooks (stable; browser tests rely on them):
//   .mlp-job-detail[data-job-id="<id>"]     the widget root
//   .mlp-status                             the `status` trait's problem line (hidden when "")
//   .mlp-header .mlp-state.mlp-state-<S>    the job's state badge; .mlp-duration, .mlp-age ticking
//   .mlp-job-error                          the job's errorMessage (hidden when "")
//   .mlp-job-waiting                        what the job waits for, its statusMessage (hidden when "")
//   .mlp-train-progress[data-percent="<n>"]       the trainer's last progress report (hidden when none):
//     progress.mlp-progress-bar (max 100), .mlp-progress-text ("42% · about 1m 3s left"),
//     .mlp-progress-metrics (one .mlp-progress-metric[data-name="<name>"] per metric: "name value")
//   ol.mlp-timeline > li.mlp-timeline-entry[data-state="<S>"]   one per state change, oldest
//                                           first, with .mlp-state badge and time.mlp-time
//   select.mlp-task                         the task whose log is shown (the `task` trait)
//   input[type=checkbox].mlp-follow         the `follow` trait (auto-scroll + live lines)
//   button.mlp-download                     downloads the full log as <jobId>-<task>.log;
//                                           .mlp-download-status says how it went
//   .mlp-log-earlier                        "N earlier lines not shown" (hidden when none)
//   .mlp-log > .mlp-log-line[data-seq="<n>"]  the log lines (at most `log_cap`, the newest)
//   .mlp-log-end                            "log complete (STATE)" after log_end
//   button.mlp-cancel                       asks Python for a confirmation (disabled when final)
//   .mlp-cancel-box                         the inline confirmation (hidden until Python asks):
//     .mlp-cancel-message, button.mlp-cancel-confirm (sends cancel_confirmed),
//     button.mlp-cancel-dismiss
//   .mlp-cancel-result[data-ok="true|false"]  the cancel_result message

const CONFIRM_TTL_MS = 55000; // Python's tokens expire after 60 s

const CSS = `
.mlp-job-detail [hidden] { display: none !important; }
.mlp-job-detail { font-family: var(--jp-ui-font-family, system-ui, sans-serif);
  font-size: var(--jp-ui-font-size1, 13px); color: var(--jp-ui-font-color1, #212121); }
.mlp-job-detail .mlp-header, .mlp-job-detail .mlp-toolbar { display: flex; gap: 10px;
  align-items: center; flex-wrap: wrap; margin: 4px 0; }
.mlp-job-detail .mlp-job-title { font-weight: 600; }
.mlp-job-detail .mlp-meta, .mlp-job-detail .mlp-log-info, .mlp-job-detail .mlp-log-earlier,
.mlp-job-detail .mlp-log-end { color: var(--jp-ui-font-color2, #616161); }
.mlp-job-detail select, .mlp-job-detail button { font: inherit; color: inherit;
  background: var(--jp-layout-color1, #fff); border: 1px solid var(--jp-border-color1, #bdbdbd);
  border-radius: 3px; padding: 2px 6px; cursor: pointer; }
.mlp-job-detail button:disabled { cursor: default; opacity: 0.5; }
.mlp-job-detail .mlp-status, .mlp-job-detail .mlp-job-error { color: var(--jp-error-color1, #d32f2f); }
.mlp-job-detail .mlp-job-waiting { color: var(--jp-ui-font-color2, #616161); }
.mlp-job-detail .mlp-train-progress { display: flex; gap: 10px; align-items: center; flex-wrap: wrap; margin: 4px 0; }
.mlp-job-detail .mlp-progress-bar { width: 16em; }
.mlp-job-detail .mlp-progress-metrics { display: inline-flex; gap: 10px; color: var(--jp-ui-font-color2, #616161);
  font-family: var(--jp-code-font-family, monospace); }
.mlp-job-detail .mlp-timeline { list-style: none; display: flex; flex-wrap: wrap; gap: 4px 14px; padding: 0; margin: 4px 0; }
.mlp-job-detail .mlp-timeline .mlp-time { margin-left: 4px; color: var(--jp-ui-font-color2, #616161); }
.mlp-job-detail .mlp-timeline .mlp-gap { margin-left: 4px; color: var(--jp-ui-font-color3, #9e9e9e); font-size: 0.9em; }
.mlp-job-detail .mlp-log { font-family: var(--jp-code-font-family, monospace); font-size: var(--jp-code-font-size, 12px);
  background: var(--jp-layout-color2, #f5f5f5); border: 1px solid var(--jp-border-color2, #e0e0e0);
  height: 24em; overflow: auto; padding: 4px; white-space: pre; }
.mlp-job-detail .mlp-log-line { min-height: 1.2em; }
.mlp-job-detail .mlp-cancel-box { display: inline-flex; gap: 6px; align-items: center; padding: 2px 6px;
  border: 1px solid var(--jp-warn-color1, #f57c00); border-radius: 3px; }
.mlp-job-detail button.mlp-cancel-confirm { border-color: var(--jp-error-color1, #d32f2f);
  color: var(--jp-error-color1, #d32f2f); }
.mlp-job-detail .mlp-cancel-result[data-ok="false"] { color: var(--jp-error-color1, #d32f2f); }
`;

/** The server's base URL from JupyterLab / Notebook page config (always ends with "/"). */
function baseUrl() {
  let base = "/";
  try {
    const node = document.getElementById("jupyter-config-data");
    if (node) base = JSON.parse(node.textContent || "{}").baseUrl || "/";
  } catch (e) {
    base = "/";
  }
  return base.endsWith("/") ? base : base + "/";
}

/**
 * Reads a finished Server-Sent Events log (`data: {"seq","task","text"}` per line, then
 * `event: end`) from a fetch Response; calls progress(count) now and then; resolves to the lines.
 */
export async function readLogEvents(response, progress = () => {}) {
  const lines = [];
  const decoder = new TextDecoder();
  let buffer = "";
  let data = [];
  let event = "";
  let ended = false;
  const dispatch = () => {
    if (event === "end") ended = true;
    else if ((event === "" || event === "message") && data.length) {
      try {
        const item = JSON.parse(data.join("\n"));
        if (item && typeof item.text === "string") lines.push(item.text);
      } catch (e) {
        /* not a line event: skip */
      }
    }
    data = [];
    event = "";
  };
  const feed = (text) => {
    buffer += text;
    let i;
    while (!ended && (i = buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = buffer.slice(0, i);
      buffer = buffer.slice(i + (buffer[i] === "\r" && buffer[i + 1] === "\n" ? 2 : 1));
      if (line === "") dispatch();
      else if (line.startsWith(":")) continue;
      else {
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "data") data.push(value);
        else if (field === "event") event = value;
      }
    }
  };
  if (response.body && response.body.getReader) {
    const reader = response.body.getReader();
    while (!ended) {
      const { done, value } = await reader.read();
      if (done) break;
      feed(decoder.decode(value, { stream: true }));
      progress(lines.length);
    }
    if (ended) reader.cancel().catch(() => {});
  } else {
    feed(await response.text());
  }
  if (!ended) feed("\n\n");
  return lines;
}

function render({ model, el }) {
  injectStyle("mlp-job-detail-style", CSS);
  let skew = 0;
  const now = () => Date.now() / 1000 + skew;
  // Log view state: line numbers [first, last] are in the DOM (first > last: none).
  let first = 1;
  let last = 0;
  let haveReset = false; // ignore log_append until the first log_reset
  let asked = false; // a `ready` is out after a gap: ignore appends until the reset
  let token = null;
  let tokenTimer = null;

  const root = h("div", "mlp-job-detail");
  const status = h("div", "mlp-status");
  const header = h("div", "mlp-header");
  const title = h("span", "mlp-job-title");
  const stateSlot = h("span", "mlp-state-slot");
  const meta = h("span", "mlp-meta");
  const age = h("span", "mlp-age");
  const duration = h("span", "mlp-duration");
  header.append(title, stateSlot, meta, age, duration);
  const jobError = h("div", "mlp-job-error");
  const jobWaiting = h("div", "mlp-job-waiting");
  const progressBox = h("div", "mlp-train-progress");
  const progressBar = h("progress", "mlp-progress-bar");
  progressBar.max = 100;
  const progressText = h("span", "mlp-progress-text");
  const progressMetrics = h("span", "mlp-progress-metrics");
  progressBox.append(progressBar, progressText, progressMetrics);
  const timeline = h("ol", "mlp-timeline");

  const toolbar = h("div", "mlp-toolbar");
  const taskSelect = h("select", "mlp-task");
  taskSelect.setAttribute("aria-label", "Task");
  const followLabel = h("label", "mlp-follow-label");
  const follow = h("input", "mlp-follow");
  follow.type = "checkbox";
  followLabel.append(follow, document.createTextNode(" Follow"));
  const download = button("mlp-download", "Download full log");
  const downloadStatus = h("span", "mlp-download-status");
  const logInfo = h("span", "mlp-log-info");
  const cancel = button("mlp-cancel", "Cancel job…");
  const cancelBox = h("span", "mlp-cancel-box");
  const cancelMessage = h("span", "mlp-cancel-message");
  const confirm = button("mlp-cancel-confirm", "Yes, cancel it");
  const dismiss = button("mlp-cancel-dismiss", "No");
  cancelBox.append(cancelMessage, confirm, dismiss);
  cancelBox.hidden = true;
  const cancelResult = h("span", "mlp-cancel-result");
  toolbar.append(taskSelect, followLabel, download, downloadStatus, logInfo, cancel, cancelBox, cancelResult);

  const earlier = h("div", "mlp-log-earlier");
  const log = h("div", "mlp-log");
  log.setAttribute("role", "log");
  const logEnd = h("div", "mlp-log-end");
  root.append(status, header, jobError, jobWaiting, progressBox, timeline, toolbar, earlier, log, logEnd);
  el.appendChild(root);

  // ---- traits
  function showJob() {
    const job = model.get("job") || {};
    const id = job.jobId || model.get("job_id") || "";
    root.setAttribute("data-job-id", id);
    title.textContent = id;
    stateSlot.replaceChildren(badge(job.state));
    const bits = [job.kind === "sweep" ? "sweep " + (job.trials || "") : "", job.module || "",
      job.machine || "", job.accelerator || (job.state ? "CPU" : "")];
    meta.textContent = bits.filter(Boolean).join(" · ");
    meta.title = (job.args || []).join(" ");
    jobError.textContent = job.error || "";
    jobError.hidden = !job.error;
    jobWaiting.textContent = job.waiting || "";
    jobWaiting.hidden = !job.waiting;
    showProgress(job.progress);
    cancel.disabled = !job.state || FINAL.includes(job.state) || job.state === "CANCELLING";
    showTasks();
    tick();
  }
  function showProgress(p) {
    progressBox.hidden = !p;
    if (!p) return;
    const known = typeof p.progressPercentage === "number";
    progressBox.setAttribute("data-percent", known ? String(p.progressPercentage) : "");
    if (known) progressBar.value = p.progressPercentage;
    else progressBar.removeAttribute("value"); // indeterminate
    const left = typeof p.estimatedRemainingSeconds === "number" && !FINAL.includes((model.get("job") || {}).state)
      ? "about " + formatSeconds(p.estimatedRemainingSeconds) + " left" : "";
    progressText.textContent = [known ? p.progressPercentage + "%" : "", left].filter(Boolean).join(" · ");
    progressMetrics.replaceChildren(...(p.metrics || []).map((m) => {
      const span = h("span", "mlp-progress-metric");
      span.setAttribute("data-name", m.name);
      span.textContent = m.name + " " + m.value;
      return span;
    }));
  }
  function tick() {
    const job = model.get("job") || {};
    const t = now();
    age.textContent = job.createTime ? "created " + formatSeconds(t - job.createTime) + " ago" : "";
    duration.textContent = job.startTime ? "ran " + formatSeconds((job.endTime ?? t) - job.startTime) : "";
  }
  function showTimeline() {
    const entries = model.get("timeline") || [];
    timeline.replaceChildren(...entries.map((entry, i) => {
      const li = h("li", "mlp-timeline-entry");
      li.setAttribute("data-state", entry.state || "");
      const time = h("time", "mlp-time");
      if (typeof entry.time === "number") {
        const date = new Date(entry.time * 1000);
        time.textContent = date.toLocaleTimeString();
        time.title = date.toLocaleString();
        time.setAttribute("datetime", date.toISOString());
      }
      li.append(badge(entry.state), time);
      const prev = entries[i - 1];
      if (prev && typeof prev.time === "number" && typeof entry.time === "number") {
        li.appendChild(h("span", "mlp-gap", "+" + formatSeconds(entry.time - prev.time)));
      }
      return li;
    }));
  }
  function showTasks() {
    const tasks = [...((model.get("job") || {}).tasks || [])];
    const current = model.get("task") || "";
    if (current && !tasks.includes(current)) tasks.unshift(current);
    const have = [...taskSelect.childNodes].map((o) => o.value);
    if (have.join("\n") !== tasks.join("\n")) {
      taskSelect.replaceChildren(...tasks.map((name) => {
        const opt = h("option", null, name);
        opt.value = name;
        return opt;
      }));
    }
    taskSelect.value = current;
  }
  function showStatus() {
    const text = model.get("status") || "";
    status.textContent = text;
    status.hidden = !text;
  }
  function showFollow() {
    follow.checked = !!model.get("follow");
    scrollDown();
  }
  function onTaskChange() {
    showTasks();
    clearLog(); // the log_reset for the new task is on its way
  }

  // ---- log
  function cap() {
    const n = model.get("log_cap");
    return typeof n === "number" && n > 0 ? n : 10000;
  }
  function line(seq, text) {
    const div = h("div", "mlp-log-line", text);
    div.setAttribute("data-seq", String(seq));
    return div;
  }
  function clearLog() {
    log.replaceChildren();
    first = 1;
    last = 0;
    haveReset = false;
    logEnd.textContent = "";
    logEnd.hidden = true;
    showLogInfo();
  }
  function append(seq, lines) {
    const max = cap();
    if (lines.length >= max) { // the batch alone fills the view
      log.replaceChildren();
      seq += lines.length - max;
      lines = lines.slice(lines.length - max);
      first = seq;
    } else if (last < first) {
      first = seq;
    }
    const fragment = document.createDocumentFragment();
    lines.forEach((text, i) => fragment.appendChild(line(seq + i, text)));
    log.appendChild(fragment);
    last = seq + lines.length - 1;
    if (last < first) last = first - 1;
    while (last - first + 1 > max && log.firstChild) { // bounded DOM: drop the oldest
      log.removeChild(log.firstChild);
      first += 1;
    }
    showLogInfo();
    scrollDown();
  }
  function showLogInfo() {
    const hidden = Math.max(first - 1, 0);
    earlier.textContent = hidden
      ? hidden + " earlier line" + (hidden === 1 ? " is" : "s are") + " not shown: download the full log."
      : "";
    earlier.hidden = !hidden;
    logInfo.textContent = last >= first ? "lines " + first + "–" + last : "no lines yet";
  }
  function scrollDown() {
    if (model.get("follow")) log.scrollTop = log.scrollHeight;
  }
  function askAgain() {
    if (asked) return;
    asked = true;
    model.send({ type: "ready" });
  }

  // ---- cancel
  function hideConfirm() {
    clearTimeout(tokenTimer);
    token = null;
    cancelBox.hidden = true;
  }
  cancel.addEventListener("click", () => {
    cancelResult.textContent = "";
    cancelResult.removeAttribute("data-ok");
    model.send({ type: "cancel" });
  });
  confirm.addEventListener("click", () => {
    if (token) model.send({ type: "cancel_confirmed", token });
    hideConfirm();
    cancelResult.textContent = "cancelling…";
  });
  dismiss.addEventListener("click", hideConfirm);

  // ---- download: straight from the server (the full log never passes through the kernel)
  let downloading = false;
  download.addEventListener("click", async () => {
    const path = model.get("log_url");
    if (!path || downloading) return;
    downloading = true;
    download.disabled = true;
    const task = model.get("task") || "log";
    const name = (model.get("job_id") || "job") + "-" + task + ".log";
    downloadStatus.textContent = "downloading…";
    try {
      const response = await fetch(baseUrl() + path, {
        credentials: "same-origin", headers: { Accept: "text/event-stream" },
      });
      if (!response.ok) {
        let message = response.status + " " + response.statusText;
        try { message = (await response.json()).error.message || message; } catch (e) { /* keep */ }
        throw new Error(message);
      }
      const lines = await readLogEvents(response, (n) => { downloadStatus.textContent = n + " lines…"; });
      const url = URL.createObjectURL(new Blob([lines.join("\n") + (lines.length ? "\n" : "")],
        { type: "text/plain" }));
      const a = h("a");
      a.href = url;
      a.download = name;
      a.style.display = "none";
      root.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
      downloadStatus.textContent = lines.length + " lines saved as " + name;
    } catch (e) {
      downloadStatus.textContent = "download failed: " + (e && e.message ? e.message : e);
    } finally {
      downloading = false;
      download.disabled = false;
    }
  });

  // ---- controls → traits
  taskSelect.addEventListener("change", () => {
    if (taskSelect.value === model.get("task")) return;
    model.set("task", taskSelect.value);
    model.save_changes();
    clearLog();
  });
  follow.addEventListener("change", () => {
    model.set("follow", follow.checked);
    model.save_changes();
    scrollDown();
  });

  // ---- messages
  function onMessage(msg) {
    if (!msg || typeof msg !== "object") return;
    const task = model.get("task");
    if (msg.type === "log_reset") {
      if (msg.task !== task) return; // stale: the reset for the current task follows
      asked = false;
      haveReset = true;
      log.replaceChildren();
      first = msg.seq || 1;
      last = first - 1;
      logEnd.hidden = true;
      append(first, msg.lines || []);
    } else if (msg.type === "log_append") {
      if (!haveReset || asked) return;
      if (msg.task !== task || msg.seq !== last + 1) { askAgain(); return; }
      append(msg.seq, msg.lines || []);
    } else if (msg.type === "log_end") {
      if (msg.task !== task) return;
      logEnd.textContent = "log complete" + (msg.state ? " (" + msg.state + ")" : "");
      logEnd.hidden = false;
    } else if (msg.type === "confirm_cancel") {
      hideConfirm();
      token = msg.token;
      cancelMessage.textContent = msg.message || "Cancel this job?";
      cancelBox.hidden = false;
      tokenTimer = setTimeout(hideConfirm, CONFIRM_TTL_MS);
    } else if (msg.type === "cancel_result") {
      cancelResult.textContent = msg.message || (msg.ok ? "cancel requested" : "cancel failed");
      cancelResult.setAttribute("data-ok", msg.ok ? "true" : "false");
    }
  }

  const listeners = [
    ["msg:custom", onMessage], ["change:job", showJob], ["change:job_id", showJob],
    ["change:timeline", showTimeline], ["change:task", onTaskChange], ["change:follow", showFollow],
    ["change:status", showStatus], ["change:log_cap", () => append(last + 1, [])],
  ];
  showJob();
  showTimeline();
  showStatus();
  showFollow();
  clearLog();
  return run(model, root, listeners, tick, () => clearTimeout(tokenTimer));
}

export default { render };
