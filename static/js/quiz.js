// Quiz enhancement: submit without a page reload. Grading stays on the server, which returns the
// same quiz fragment it renders for the no-JavaScript form post; we swap it in and move focus to
// the score so screen readers announce it.

function enhance(form) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const section = form.closest(".quiz");
    const button = form.querySelector('button[type="submit"]');
    button.disabled = true;
    try {
      const response = await fetch(form.action, {
        method: "POST",
        body: new FormData(form),
        headers: { "X-Requested-With": "fetch" },
        credentials: "same-origin",
      });
      // A refused answer (400) comes back as the quiz fragment with its error, like a graded one.
      if (!response.ok && response.status !== 400) throw new Error(`HTTP ${response.status}`);
      const template = document.createElement("template");
      template.innerHTML = (await response.text()).trim();
      const fresh = template.content.querySelector(".quiz");
      if (!fresh) throw new Error("unexpected response");
      section.replaceWith(fresh);
      const next = fresh.querySelector(".quiz-form");
      if (next) enhance(next);
      const score = fresh.querySelector("#quiz-score");
      if (score) score.focus();
    } catch {
      form.submit(); // fall back to the plain form post
    }
  });
}

for (const form of document.querySelectorAll(".quiz-form")) enhance(form);
