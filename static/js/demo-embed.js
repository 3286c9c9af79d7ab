// Mounts every live demo on the page: each `.ilab-demo` section names its ES module in `data-module`
// and carries its config as JSON. A static module (no inline script) so the pages keep a strict CSP.
// Imported once however many demos a page embeds (ES modules are evaluated once per URL).
import { attachTryNext } from "./demos/run-notes.js";

const DEMO_MODULES = "/static/js/demos/";

/** Mount every demo under `scope` not mounted yet (the authoring preview calls it after each refresh). */
export function mountDemos(scope = document) {
  for (const root of scope.querySelectorAll(".ilab-demo[data-module]")) {
    if (root.dataset.mounted) continue;
    root.dataset.mounted = "1";
    const url = new URL(root.dataset.module, document.baseURI);
    if (url.origin !== location.origin || !url.pathname.startsWith(DEMO_MODULES)) continue;
    const config = JSON.parse(root.querySelector(".ilab-demo__config").textContent);
    import(url.href)
      .then((module) => {
        module.mount(root, config);
        attachTryNext(root, config); // "What to try next", from the demo's spec, once a run is done
      })
      .catch((error) => {
        const note = document.createElement("p");
        note.className = "ilab-demo__error";
        note.setAttribute("role", "alert");
        note.textContent = `This demo could not start: ${error.message}`;
        root.append(note);
      });
  }
}

mountDemos();
