// How the page's shared socket (static/js/ws-client.js) takes the server's close codes (docs/protocol.md): 4408, closed
// for idleness, is not reconnected until the page sends something; 4429, too many sockets, fails the start that
// waited with the server's own reason. Node has no WebSocket: a stand-in records what the client does with it.
// Run: node --test tests/js/
import assert from "node:assert/strict";
import { test } from "node:test";

class StandInSocket {
  static CONNECTING = 0;
  static OPEN = 1;
  static made = [];

  constructor(url) {
    this.url = url;
    this.readyState = StandInSocket.CONNECTING;
    this.sent = [];
    StandInSocket.made.push(this);
  }

  send(text) { this.sent.push(JSON.parse(text)); }

  close() { // as a browser's: the close event follows, later
    if (this.readyState === 3) return;
    this.readyState = 3;
    setTimeout(() => this.onclose && this.onclose({ code: 1005 }), 0);
  }

  open() { this.readyState = StandInSocket.OPEN; this.onopen(); }

  frame(obj) { this.onmessage({ data: JSON.stringify(obj) }); }

  closedByServer(code) { this.readyState = 3; this.onclose({ code }); }
}

globalThis.WebSocket = StandInSocket;
globalThis.fetch = async () => ({ ok: true, json: async () => ({ created: false }) });
const { DemoSocket } = await import("../../static/js/ws-client.js");
const tick = () => new Promise((resolve) => setTimeout(resolve, 20));

test("a socket closed for idleness stays closed until the page starts a run, then reopens", async () => {
  const sock = new DemoSocket("ws://127.0.0.1/ws/demos/");
  const states = [];
  sock.onState((state) => states.push(state));
  sock.connect();
  const first = StandInSocket.made.at(-1);
  first.open();
  first.frame({ type: "error", code: "idle_timeout", message: "closed after 10 minutes without use" });
  first.closedByServer(4408);
  const count = StandInSocket.made.length;
  await tick();
  assert.equal(states.at(-1), "closed_idle");
  assert.equal(StandInSocket.made.length, count, "no reconnect while nothing is asked of it");
  assert.equal(sock.reconnectTimer, null);
  sock.start("kv-cache", { prompt: "Hi" }, {});
  await tick();
  const second = StandInSocket.made.at(-1);
  assert.notEqual(second, first);
  second.open();
  assert.equal(second.sent.at(-1).action, "start");
  sock.close();
});

test("a start on a socket refused for too many sockets fails with the server's reason, and is retried slowly", async () => {
  const sock = new DemoSocket("ws://127.0.0.1/ws/demos/?b");
  const states = [];
  sock.onState((state, detail) => states.push([state, detail]));
  let failed = null;
  sock.start("kv-cache", { prompt: "Hi" }, { onError(frame) { failed = frame; } });
  await tick();
  const ws = StandInSocket.made.at(-1);
  ws.open();
  ws.frame({ type: "error", code: "too_many_sockets", retry_after: 30, message: "At most 8 demo connections per visitor" });
  ws.closedByServer(4429);
  assert.equal(failed.code, "too_many_sockets");
  const [state, detail] = states.at(-1);
  assert.equal(state, "too_many_sockets");
  assert.ok(detail.delayMs >= 6000, `retried after ${detail.delayMs} ms, not at once`);
  sock.close();
});
