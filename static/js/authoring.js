// Authoring page: live server-side preview of the Markdown (the renderer students see), the
// narration progress bar, polled while Piper synthesizes on the cpu workers, and a warning before
// leaving the editor with changes that are not saved.

const PREVIEW_DELAY_MS = 500;
const STATIC_JS = "/static/js/";
const CALCULATOR_NAME = /^[a-z][a-z0-9-]*$/;

/** Run the preview's demos and calculators as the student page does (innerHTML runs no scripts). */
async function mountPreview(preview) {
  const names = new Set([...preview.querySelectorAll(".calculator[data-calculator]")]
    .map((node) => node.dataset.calculator).filter((name) => CALCULATOR_NAME.test(name)));
  try {
    await Promise.all([...names].map((name) => import(`${STATIC_JS}calculators/${name}.js`)));
    (await import(`${STATIC_JS}calculators/ui.js`)).mountCalculators(preview);
  } catch {
    /* an unknown calculator: the renderer already refused it, so only a stale page gets here */
  }
  if (preview.querySelector(".ilab-demo[data-module]")) (await import(`${STATIC_JS}demo-embed.js`)).mountDemos(preview);
}
const POLL_MS = 1000;

function csrfToken(form) {
  return form.querySelector('input[name="csrfmiddlewaretoken"]').value;
}

/**
 * Line numbers beside the Markdown editor, matching the "Line N" of every error message, with the
 * erroneous line marked. Lines soft-wrap, so each number is as tall as its line measured in a hidden
 * mirror with the textarea's width and font. The gutter lies over the textarea's widened left padding:
 * the textarea itself is never moved (a moved field can lose what was typed before this script ran).
 * Returns `markError(line | null)`.
 */
function lineNumbers(textarea) {
  const gutter = document.createElement("div");
  gutter.className = "md-gutter";
  gutter.setAttribute("aria-hidden", "true");
  const mirror = document.createElement("div");
  mirror.className = "md-mirror";
  mirror.setAttribute("aria-hidden", "true");
  textarea.classList.add("has-gutter");
  textarea.parentElement.classList.add("md-field");
  textarea.after(gutter, mirror);
  let errorLine = Number(textarea.dataset.errorLine) || null;

  const render = () => {
    const style = getComputedStyle(textarea);
    mirror.style.width = `${textarea.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight)}px`;
    for (const name of ["fontFamily", "fontSize", "fontWeight", "lineHeight", "letterSpacing", "tabSize"]) {
      mirror.style[name] = style[name];
    }
    const lines = textarea.value.split("\n");
    mirror.replaceChildren(...lines.map((text) => {
      const row = document.createElement("div");
      row.textContent = text || "\u200b";
      return row;
    }));
    const heights = [...mirror.children].map((row) => row.getBoundingClientRect().height);
    const border = parseFloat(style.borderTopWidth);
    Object.assign(gutter.style, {
      top: `${textarea.offsetTop + border}px`, left: `${textarea.offsetLeft + parseFloat(style.borderLeftWidth)}px`,
      height: `${textarea.clientHeight}px`, paddingTop: style.paddingTop,
    });
    gutter.replaceChildren(...heights.map((height, index) => {
      const number = document.createElement("div");
      number.textContent = String(index + 1);
      number.style.height = `${height}px`;
      if (index + 1 === errorLine) number.className = "is-error";
      return number;
    }));
    gutter.scrollTop = textarea.scrollTop;
  };
  let pending = null;
  const schedule = () => {
    cancelAnimationFrame(pending);
    pending = requestAnimationFrame(render);
  };
  textarea.addEventListener("input", schedule);
  textarea.addEventListener("scroll", () => { gutter.scrollTop = textarea.scrollTop; });
  new ResizeObserver(schedule).observe(textarea);
  render();
  return (line) => {
    errorLine = line;
    schedule();
  };
}

/** Put the caret on `line` (1-based) of the textarea and scroll it into view. */
function goToLine(textarea, line) {
  const lines = textarea.value.split("\n");
  const start = lines.slice(0, line - 1).reduce((sum, text) => sum + text.length + 1, 0);
  textarea.focus();
  textarea.setSelectionRange(start, start + (lines[line - 1] || "").length);
  const lineHeight = parseFloat(getComputedStyle(textarea).lineHeight) || 20;
  textarea.scrollTop = Math.max(0, (line - 3) * lineHeight);
}

/** A "Go to line N" button beside each error that names a line. */
function errorLinks(textarea) {
  for (const box of document.querySelectorAll(".field-errors, .error-summary li")) {
    const match = /Line (\d+):/.exec(box.textContent);
    if (!match || box.querySelector(".go-to-line")) continue;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "button-small go-to-line";
    button.textContent = `Go to line ${match[1]}`;
    button.addEventListener("click", () => goToLine(textarea, Number(match[1])));
    box.append(" ", button);
  }
}

function livePreview() {
  const form = document.getElementById("module-form");
  const preview = document.getElementById("preview");
  const source = form && form.querySelector('textarea[name="source"]');
  if (!form || !preview || !source) return;
  const markError = lineNumbers(source);
  errorLinks(source);
  let timer = null;
  let sequence = 0;
  const refresh = async () => {
    const mine = ++sequence;
    const body = new FormData();
    body.append("csrfmiddlewaretoken", csrfToken(form));
    body.append("source", source.value);
    try {
      const response = await fetch(form.dataset.previewUrl, {
        method: "POST",
        body,
        headers: { "X-Requested-With": "fetch" },
        credentials: "same-origin",
      });
      const html = await response.text();
      if (mine === sequence && (response.ok || response.status === 422)) {
        preview.innerHTML = html;
        const line = response.status === 422 ? /Line (\d+):/.exec(preview.textContent) : null;
        markError(line ? Number(line[1]) : null);
        mountPreview(preview);
      }
    } catch {
      /* offline: keep the last preview */
    }
  };
  source.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(refresh, PREVIEW_DELAY_MS);
  });
  mountPreview(preview);
}

function narrationProgress() {
  const panel = document.getElementById("narration");
  if (!panel) return;
  const bar = panel.querySelector("progress");
  const label = panel.querySelector(".narration-label");
  const error = panel.querySelector(".narration-error");
  const form = panel.querySelector(".narration-generate");
  let polling = false;

  const show = (state) => {
    bar.value = state.progress;
    bar.textContent = `${Math.round(state.progress * 100)}%`;
    // A queued job shows its place in the queue (the label says it); a running one its progress.
    label.textContent = state.status === "running"
      ? `${state.label} (${Math.round(state.progress * 100)}%)` : state.label;
    error.hidden = !state.error;
    error.textContent = state.error || "";
  };
  const poll = async () => {
    if (polling) return;
    polling = true;
    try {
      for (;;) {
        const response = await fetch(panel.dataset.statusUrl, { credentials: "same-origin" });
        if (!response.ok) break;
        const state = await response.json();
        show(state);
        if (!state.busy) break;
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      }
    } finally {
      polling = false;
    }
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const response = await fetch(form.action, {
      method: "POST",
      body: new FormData(form),
      headers: { "X-Requested-With": "fetch" },
      credentials: "same-origin",
    });
    if (response.ok) show(await response.json());
    poll();
  });
  if (/Queued|Synthesizing/.test(label.textContent)) poll();
}

/** The editor's fields as one comparable value (the CSRF token changes nothing an author wrote). */
function formState(form) {
  return JSON.stringify([...new FormData(form)].filter(([name]) => name !== "csrfmiddlewaretoken"));
}

/**
 * Ask before leaving the page while the editor holds changes that are not saved: typed since the page
 * loaded, or shown again unsaved by the server (a preview, a save refused for errors: `data-unsaved`).
 * Submitting the editor (Save, Preview, Publish these changes) is not leaving it: no warning then.
 */
function unsavedChangesWarning() {
  const form = document.getElementById("module-form");
  if (!form) return;
  const loaded = formState(form);
  let submitting = false;
  form.addEventListener("submit", () => { submitting = true; });
  window.addEventListener("pageshow", () => { submitting = false; });  // back from the bfcache
  window.addEventListener("beforeunload", (event) => {
    if (submitting || (!("unsaved" in form.dataset) && formState(form) === loaded)) return;
    event.preventDefault();
    event.returnValue = "";  // older browsers show the dialog only when this is set
  });
}

livePreview();
narrationProgress();
unsavedChangesWarning();
