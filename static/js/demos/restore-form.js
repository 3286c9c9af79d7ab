// Put a run's parameters back into its demo's form: a run resumed after a page reload (or a shared run redrawn)
// shows the settings it ran with, not the page's defaults, so the form and the results agree.
//   fillForm({prompt: promptInput, k: kInput, chat: chatCheckbox}, params)

/** `fields` maps a parameter name to its input (text, number, select, textarea or checkbox); a parameter the
 * params lack (or null) leaves its input as it is. */
export function fillForm(fields, params) {
  if (!params || typeof params !== "object") return;
  for (const [key, input] of Object.entries(fields)) {
    const value = params[key];
    if (!input || value === undefined || value === null) continue;
    if (input.type === "checkbox") input.checked = Boolean(value);
    else input.value = String(value);
  }
}
