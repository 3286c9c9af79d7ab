// Authoring page: live server-side preview of the Markdown (the renderer students see) and the
// narration progress bar, polled while Piper synthesizes on the cpu workers.

const PREVIEW_DELAY_MS = 500;
const POLL_MS = 1000;

function csrfToken(form) {
  return form.querySelector('input[name="csrfmiddlewaretoken"]').value;
}

function livePreview() {
  const form = document.getElementById("module-form");
  const preview = document.getElementById("preview");
  const source = form && form.querySelector('textarea[name="source"]');
  if (!form || !preview || !source) return;
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
      if (mine === sequence && (response.ok || response.status === 422)) preview.innerHTML = html;
    } catch {
      /* offline: keep the last preview */
    }
  };
  source.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(refresh, PREVIEW_DELAY_MS);
  });
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
    label.textContent = state.busy ? `${state.label} (${Math.round(state.progress * 100)}%)` : state.label;
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

livePreview();
narrationProgress();
