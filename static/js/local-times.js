// A due date is written in its cohort's time zone; a reader elsewhere also gets it in their own.
// Each <span data-local-time="ISO 8601" data-zone="IANA name"> is filled with the moment in the browser's zone
// and shown, unless the browser is in that same zone (then it stays hidden: nothing to add).
const FORMAT = { weekday: "short", day: "numeric", month: "short", year: "numeric", hour: "2-digit",
  minute: "2-digit", hourCycle: "h23" };

// "Tue 2 Mar 2027, 07:00", as the server writes dates (Django's "D j M Y, H:i").
export function inReadersZone(iso, readerZone) {
  const moment = new Date(iso);
  if (Number.isNaN(moment.getTime())) return "";
  const parts = Object.fromEntries(new Intl.DateTimeFormat("en-GB", { ...FORMAT, timeZone: readerZone })
    .formatToParts(moment).map(({ type, value }) => [type, value]));
  return `${parts.weekday} ${parts.day} ${parts.month} ${parts.year}, ${parts.hour}:${parts.minute}`;
}

export function fillLocalTimes(root = document) {
  const readerZone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  for (const slot of root.querySelectorAll("[data-local-time]")) {
    if (!readerZone || slot.dataset.zone === readerZone) continue;
    const text = inReadersZone(slot.dataset.localTime, readerZone);
    if (!text) continue;
    slot.textContent = ` In your time zone (${readerZone}): ${text}.`;
    slot.hidden = false;
  }
}

if (typeof document !== "undefined") fillLocalTimes();
