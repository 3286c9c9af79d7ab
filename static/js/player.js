// Module page behaviour: the sticky "Audio version of this page" player, and the reading bookmark
// behind "Resume where you left off".
//
// The player is a progressive enhancement of the native <audio controls> element that the server renders: custom
// controls (play/pause, ±10 s, seek, time, speed 0.75–2×, volume), keyboard shortcuts while focus is in
// the player, the paragraph being spoken highlighted from the WebVTT cues (`cuechange`) and, inside it, the
// sentence being spoken (from the cue's WebVTT timestamp tags, marked with the CSS Custom Highlight API so the
// lesson's DOM is never rewritten), click a paragraph to listen from there, and the listening position saved
// for the learner; step markers in the lesson move their demo's timeline as the narration reaches them.

import { driveDemos, showSpoken } from "./narration-demo.js";

const SPEEDS = [0.75, 1, 1.25, 1.5, 1.75, 2];
const SAVE_EVERY_S = 10;
const STORAGE = { rate: "ilab.player.rate", volume: "ilab.player.volume", follow: "ilab.player.follow" };
const IGNORE_CLICKS = "a, button, input, label, select, textarea, summary, details, .quiz, .ilab-demo, .demo-embed, .calculator";

function clock(seconds) {
  if (!Number.isFinite(seconds) || seconds < 0) seconds = 0;
  const total = Math.round(seconds);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = String(total % 60).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${s}` : `${m}:${s}`;
}

const SENTENCE_HIGHLIGHT = "ilab-sentence";
const TAG_TIME = /<(?:(\d{1,6}):)?(\d{2}):(\d{2})\.(\d{3})>/;
const NOT_READ = ".glossary-tip, .listen-here, math";

/** A cue's sentences: [{start, text}], the first at the cue's start, the others at their timestamp tags. */
export function cueSentences(cue) {
  const pieces = cue.text.split(TAG_TIME);
  const sentences = [{ start: cue.startTime, text: pieces[0] }];
  for (let i = 1; i + 4 < pieces.length + 1; i += 5) {
    const [h, m, s, ms] = pieces.slice(i, i + 4).map((v) => Number(v || 0));
    sentences.push({ start: h * 3600 + m * 60 + s + ms / 1000, text: pieces[i + 4] || "" });
  }
  const plain = (text) => text.replace(/<[^>]*>/g, "").replace(/&lt;/g, "<").replace(/&gt;/g, ">")
    .replace(/&nbsp;/g, " ").replace(/&amp;/g, "&").replace(/\s+/g, " ").trim();
  return sentences.map((s) => ({ start: s.start, text: plain(s.text) })).filter((s) => s.text);
}

/** The element's visible text with runs of white space collapsed, and where each character lives. */
function textMap(element) {
  const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT, {
    acceptNode: (node) => (node.parentElement.closest(NOT_READ) ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT),
  });
  let text = "";
  const where = [];
  while (walker.nextNode()) {
    const node = walker.currentNode;
    for (let i = 0; i < node.nodeValue.length; i += 1) {
      const space = /\s/.test(node.nodeValue[i]);
      if (space && (!text || text.endsWith(" "))) continue;
      text += space ? " " : node.nodeValue[i];
      where.push([node, i]);
    }
  }
  return { text, where };
}

/** Ranges of `element` holding each sentence (null where the page's words differ from the spoken ones). */
export function sentenceRanges(element, sentences) {
  const { text, where } = textMap(element);
  let from = 0;
  return sentences.map(({ text: sentence }) => {
    let at = text.indexOf(sentence, from);
    let length = sentence.length;
    if (at < 0 && /[.!?]$/.test(sentence)) { // a list item's cue adds a full stop the page does not show
      at = text.indexOf(sentence.slice(0, -1), from);
      length -= 1;
    }
    if (at < 0 || !length) return null;
    from = at + length;
    const range = document.createRange();
    range.setStart(where[at][0], where[at][1]);
    const [endNode, endOffset] = where[at + length - 1];
    range.setEnd(endNode, endOffset + 1);
    return range;
  });
}

function stored(key, fallback) {
  try {
    const value = window.localStorage.getItem(key);
    return value === null ? fallback : value;
  } catch {
    return fallback;
  }
}

function store(key, value) {
  try {
    window.localStorage.setItem(key, String(value));
  } catch {
    /* private mode: preferences are simply not remembered */
  }
}

export function initPlayer(section) {
  const audio = section.querySelector("audio");
  const trackElement = audio.querySelector("track");
  const controls = section.querySelector(".player-controls");
  const lesson = document.getElementById("lesson");
  const ui = {
    toggle: controls.querySelector('[data-action="toggle"]'),
    seek: controls.querySelector(".player-seek"),
    current: controls.querySelector(".player-current"),
    duration: controls.querySelector(".player-duration"),
    speed: controls.querySelector(".player-speed"),
    volume: controls.querySelector(".player-volume"),
    follow: controls.querySelector(".player-follow-input"),
  };
  const cueStarts = new Map();
  let speaking = null;
  let seeking = false;
  let lastSaved = Number(section.dataset.resume) || 0;
  const reducedMotion = window.matchMedia("(prefers-reduced-motion: reduce)").matches;

  // Swap the native controls for ours (the native ones remain without JavaScript).
  audio.controls = false;
  controls.hidden = false;
  document.body.classList.add("narration-ready");

  // One row by default (a phone keeps its screen for the lesson); "More" shows speed, volume and options.
  const expand = controls.querySelector(".player-expand");
  const setCollapsed = (collapsed) => {
    section.classList.toggle("is-collapsed", collapsed);
    expand.setAttribute("aria-expanded", String(!collapsed));
    expand.textContent = collapsed ? "More" : "Less";
  };
  setCollapsed(true);
  expand.addEventListener("click", () => setCollapsed(!section.classList.contains("is-collapsed")));
  // Headings jumped to land below the sticky player (CSS scroll-margin-top reads --player-height).
  const publishHeight = () => document.documentElement.style.setProperty("--player-height", `${Math.ceil(section.offsetHeight)}px`);
  if ("ResizeObserver" in window) new ResizeObserver(publishHeight).observe(section);
  publishHeight();

  const duration = () => (Number.isFinite(audio.duration) && audio.duration > 0 ? audio.duration : Number(ui.seek.max) || 0);

  // --- Cues: highlight the paragraph being spoken -------------------------------------------
  const track = trackElement.track;
  track.mode = "hidden";
  const readCues = () => {
    if (!track.cues) return;
    for (const cue of Array.from(track.cues)) cueStarts.set(cue.id, cue.startTime);
    section.dataset.cues = String(cueStarts.size);
  };
  trackElement.addEventListener("load", readCues);
  if (trackElement.readyState === 2) readCues();
  driveDemos(track, lesson); // step markers in the lesson move their demo's timeline (narration-demo.js)

  function highlight(id) {
    if (!id || id === (speaking && speaking.dataset.cue)) return;
    const element = lesson && lesson.querySelector(`[data-cue="${CSS.escape(id)}"]`);
    if (!element) return;
    if (speaking) speaking.classList.remove("is-speaking");
    speaking = element;
    element.classList.add("is-speaking");
    section.dataset.currentCue = id;
    if (ui.follow.checked && !audio.paused) showSpoken(lesson, element, reducedMotion); // a demo's cue: its picture
  }

  // --- The sentence being spoken, inside that paragraph ------------------------------------------
  const canMarkSentences = typeof CSS !== "undefined" && "highlights" in CSS && typeof Highlight === "function";
  let sentences = [];
  let ranges = [];
  let markedSentence = -1;
  let followedCue = null;
  function markSentence() {
    if (!ranges.length) return;
    let index = 0;
    while (index + 1 < sentences.length && sentences[index + 1].start <= audio.currentTime + 0.05) index += 1;
    if (index === markedSentence) return;
    markedSentence = index;
    section.dataset.currentSentence = String(index + 1);
    if (ranges[index]) CSS.highlights.set(SENTENCE_HIGHLIGHT, new Highlight(ranges[index]));
    else CSS.highlights.delete(SENTENCE_HIGHLIGHT);
  }
  function followSentences(cue) {
    followedCue = cue.id;
    if (!canMarkSentences) return;
    const element = lesson && lesson.querySelector(`[data-cue="${CSS.escape(cue.id)}"]`);
    sentences = element ? cueSentences(cue) : [];
    ranges = sentences.length > 1 ? sentenceRanges(element, sentences) : [];
    markedSentence = -1;
    delete section.dataset.currentSentence;
    CSS.highlights.delete(SENTENCE_HIGHLIGHT);
    markSentence();
  }
  audio.addEventListener("timeupdate", markSentence);
  audio.addEventListener("seeked", markSentence);

  track.addEventListener("cuechange", () => {
    const active = track.activeCues;
    // Between cues (the short pauses) nothing is active: keep the last paragraph highlighted.
    if (!active || !active.length) return;
    const cue = active[active.length - 1];
    highlight(cue.id);
    if (cue.id !== followedCue) followSentences(cue);
  });

  // --- Click a paragraph to listen from there ---------------------------------------------------
  if (lesson) {
    lesson.addEventListener("click", (event) => {
      if (event.target.closest(IGNORE_CLICKS)) return;
      const selection = window.getSelection();
      if (selection && !selection.isCollapsed) return; // the reader is selecting text
      const block = event.target.closest("[data-cue]");
      if (!block || !cueStarts.has(block.dataset.cue)) return;
      audio.currentTime = cueStarts.get(block.dataset.cue);
      highlight(block.dataset.cue);
      if (audio.paused) audio.play().catch(() => {});
    });
  }

  // Keyboard users get the same "listen from here" at each section heading.
  if (lesson) {
    for (const heading of lesson.querySelectorAll("h2[data-cue], h3[data-cue]")) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "listen-here";
      button.dataset.cue = heading.dataset.cue;
      // The name starts with the visible text ("Listen from here"), then says which heading.
      button.setAttribute("aria-label", `Listen from here: “${heading.textContent.trim()}”`);
      button.append(Object.assign(document.createElement("span"), { ariaHidden: "true", textContent: "▶ " }), "Listen from here");
      button.addEventListener("click", () => {
        if (!cueStarts.has(button.dataset.cue)) return;
        audio.currentTime = cueStarts.get(button.dataset.cue);
        highlight(button.dataset.cue);
        if (audio.paused) audio.play().catch(() => {});
      });
      heading.after(button);
    }
  }

  // --- Transport ---------------------------------------------------------------------------------
  const togglePlay = () => (audio.paused ? audio.play().catch(() => {}) : audio.pause());
  const skip = (delta) => {
    audio.currentTime = Math.min(Math.max(0, audio.currentTime + delta), duration());
  };
  const setRate = (rate) => {
    const value = SPEEDS.includes(rate) ? rate : 1;
    audio.playbackRate = value;
    ui.speed.value = String(value);
    store(STORAGE.rate, value);
  };
  const stepRate = (direction) => {
    const index = SPEEDS.indexOf(audio.playbackRate);
    setRate(SPEEDS[Math.min(SPEEDS.length - 1, Math.max(0, (index < 0 ? 1 : index) + direction))]);
  };

  controls.addEventListener("click", (event) => {
    const action = event.target.closest("[data-action]")?.dataset.action;
    if (action === "toggle") togglePlay();
    else if (action === "back") skip(-10);
    else if (action === "forward") skip(10);
  });
  ui.seek.addEventListener("input", () => {
    seeking = true;
    ui.current.textContent = clock(Number(ui.seek.value));
  });
  ui.seek.addEventListener("change", () => {
    audio.currentTime = Number(ui.seek.value);
    seeking = false;
  });
  ui.speed.addEventListener("change", () => setRate(Number(ui.speed.value)));
  ui.volume.addEventListener("input", () => {
    audio.volume = Number(ui.volume.value);
    audio.muted = audio.volume === 0;
    store(STORAGE.volume, audio.volume);
  });
  ui.follow.addEventListener("change", () => store(STORAGE.follow, ui.follow.checked ? "1" : "0"));

  // Single-key shortcuts act only while focus is inside the player (WCAG 2.1.4).
  section.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.target.matches("textarea, input[type='text']")) return;
    const keys = {
      k: togglePlay,
      j: () => skip(-10),
      l: () => skip(10),
      ",": () => stepRate(-1),
      ".": () => stepRate(1),
      m: () => {
        audio.muted = !audio.muted;
      },
    };
    const handler = keys[event.key.toLowerCase()];
    if (handler) {
      event.preventDefault();
      handler();
    }
  });

  // --- State → UI --------------------------------------------------------------------------------
  const render = () => {
    const playing = !audio.paused;
    section.classList.toggle("is-playing", playing);
    ui.toggle.setAttribute("aria-label", playing ? "Pause" : "Play");
  };
  const renderTime = () => {
    const total = duration();
    ui.seek.max = String(total);
    if (!seeking) {
      ui.seek.value = String(audio.currentTime);
      ui.current.textContent = clock(audio.currentTime);
    }
    ui.duration.textContent = clock(total);
    ui.seek.setAttribute("aria-valuetext", `${clock(audio.currentTime)} of ${clock(total)}`);
  };
  audio.addEventListener("play", render);
  audio.addEventListener("pause", render);
  audio.addEventListener("ended", render);
  audio.addEventListener("timeupdate", renderTime);
  audio.addEventListener("durationchange", renderTime);
  audio.addEventListener("volumechange", () => {
    ui.volume.value = String(audio.muted ? 0 : audio.volume);
  });
  audio.addEventListener("error", () => {
    const note = document.createElement("p");
    note.className = "field-errors";
    note.setAttribute("role", "alert");
    note.textContent = "The audio could not be loaded.";
    controls.after(note);
  });

  // --- Resume position, saved on the server per learner ----------------------------------------
  const savePosition = (useBeacon = false) => {
    const position = audio.currentTime;
    if (!section.dataset.positionUrl || Math.abs(position - lastSaved) < 1) return;
    lastSaved = position;
    const body = new FormData();
    body.append("csrfmiddlewaretoken", section.dataset.csrf);
    body.append("position", position.toFixed(1));
    if (useBeacon && navigator.sendBeacon) {
      navigator.sendBeacon(section.dataset.positionUrl, body);
    } else {
      fetch(section.dataset.positionUrl, { method: "POST", body, credentials: "same-origin" }).catch(() => {});
    }
  };
  audio.addEventListener("timeupdate", () => {
    if (Math.abs(audio.currentTime - lastSaved) >= SAVE_EVERY_S) savePosition();
  });
  audio.addEventListener("pause", () => savePosition());
  window.addEventListener("pagehide", () => savePosition(true));

  const start = () => {
    const resume = Number(section.dataset.resume) || 0;
    if (resume > 1 && resume < duration() - 2) audio.currentTime = resume;
    renderTime();
    if (section.dataset.autoplay === "true") audio.play().catch(() => {}); // opt-in only (WCAG 1.4.2)
  };
  if (audio.readyState >= 1) start();
  else audio.addEventListener("loadedmetadata", start, { once: true });

  setRate(Number(stored(STORAGE.rate, "1")));
  audio.volume = Math.min(1, Math.max(0, Number(stored(STORAGE.volume, "1"))));
  ui.volume.value = String(audio.volume);
  ui.follow.checked = stored(STORAGE.follow, "1") === "1";
  render();
  section.dataset.ready = "true";
  return audio;
}

// Reading bookmark: remember the section heading the learner has scrolled to (sent at most every few
// seconds, only when it changes); the server offers "Resume where you left off" on the next visit.
export function trackReading(article) {
  const headings = Array.from(article.querySelectorAll("#lesson h2[id], #lesson h3[id]"));
  if (!headings.length || !article.dataset.placeUrl || !("IntersectionObserver" in window)) return;
  let current = null;
  let sent = null;
  let timer = null;
  const send = (useBeacon = false) => {
    if (!current || current === sent) return;
    sent = current;
    const body = new FormData();
    body.append("csrfmiddlewaretoken", article.dataset.csrf);
    body.append("section", current);
    if (useBeacon && navigator.sendBeacon) navigator.sendBeacon(article.dataset.placeUrl, body);
    else fetch(article.dataset.placeUrl, { method: "POST", body, credentials: "same-origin" }).catch(() => {});
  };
  const observer = new IntersectionObserver(
    (entries) => {
      for (const entry of entries) {
        // A heading leaving through the top means its section is being read.
        if (!entry.isIntersecting && entry.boundingClientRect.top < 0) current = entry.target.id;
        else if (entry.isIntersecting) {
          const index = headings.indexOf(entry.target);
          if (entry.boundingClientRect.top < window.innerHeight / 2) current = entry.target.id;
          else if (current === entry.target.id && index > 0) current = headings[index - 1].id;
        }
      }
      clearTimeout(timer);
      timer = setTimeout(send, 3000);
    },
    { rootMargin: "0px 0px -50% 0px" },
  );
  for (const heading of headings) observer.observe(heading);
  window.addEventListener("pagehide", () => send(true));
}

// Audio still being generated (a fresh server narrates every module in the background for its first
// minutes): poll the page's narration state, keep the note and its progress bar current, and put the player
// in its place once the audio is ready.
export function watchNarration(note, { every = 4000 } = {}) {
  const url = note.dataset.statusUrl;
  if (!url || note.dataset.state !== "busy") return;
  let delay = every;
  const check = async () => {
    try {
      const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const status = await response.json();
      if (status.state === "ready" && status.player) {
        const holder = document.createElement("div");
        holder.innerHTML = status.player;
        const player = holder.querySelector("#player");
        if (player && player.querySelector("audio")) {
          note.replaceWith(player);
          initPlayer(player);
          return;
        }
      }
      note.dataset.state = status.state;
      note.querySelector(".narration-message").textContent = status.message || "";
      const bar = note.querySelector(".narration-progress");
      if (bar && typeof status.progress === "number") bar.value = status.progress;
      if (bar && status.state !== "busy") bar.remove();
      if (status.state !== "busy") return; // failed or stalled: nothing more to wait for here
      delay = every;
    } catch {
      delay = Math.min(delay * 2, 60000); // the server is restarting or gone: ask less often
    }
    setTimeout(check, delay);
  };
  setTimeout(check, delay);
}

const section = document.getElementById("player");
if (section && section.querySelector("audio")) initPlayer(section);
else if (section && section.dataset.statusUrl) watchNarration(section);
const article = document.querySelector("article.lesson");
if (article) trackReading(article);
