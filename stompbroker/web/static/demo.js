// The demo page's behaviour: a thin UI over @stomp/stompjs (loaded as StompJs)
// and resumable.js, which keeps the session across dropped connections.
// All STOMP work is theirs; this file only wires forms to them and shows what happens.
// The connection logs in with the pages' shared sign-in (signin.js); a refused
// login opens the sign-in, and connects again once it is done.
import { ResumableSession } from "./resumable.js";
import { connectHeaders, isLoginRefused, mountSignIn, signIn } from "./signin.js";

(function () {
  const $ = (id) => document.getElementById(id);
  let client = null;
  let session = null;
  let receipts = 0;

  function defaultUrl() {
    if (!location.host) {
      return "ws://127.0.0.1:15674/ws";
    }
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    return scheme + location.host + "/ws";
  }

  function log(text) {
    const item = document.createElement("li");
    item.textContent = new Date().toLocaleTimeString() + "  " + text;
    $("log").appendChild(item);
    $("log").scrollTop = $("log").scrollHeight;
  }

  function setState(state, text) {
    const connected = state === "connected";
    $("status").dataset.state = state;
    $("status").textContent = text;
    $("connect").disabled = state === "connected" || state === "connecting";
    $("disconnect").disabled = state === "disconnected" || state === "error";
    $("drop").disabled = !connected;
    $("subscribe").disabled = !connected;
    $("send").disabled = !connected;
    if (state === "disconnected" || state === "error") {
      // While reconnecting the session (and its subscriptions) is kept.
      $("subscriptions").replaceChildren();
    }
  }

  function toHex(bytes) {
    return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join(" ");
  }

  function fromHex(text) {
    const digits = text.replace(/0x/gi, "").replace(/[\s,:]/g, "");
    if (!/^([0-9a-f]{2})*$/i.test(digits)) {
      throw new Error("the body is not pairs of hex digits");
    }
    return Uint8Array.from(digits.match(/../g) || [], (pair) => parseInt(pair, 16));
  }

  // The body as text when it is UTF-8 without control characters, else null.
  function readableText(bytes) {
    let text;
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch (error) {
      return null;
    }
    return /[\u0000-\u0008\u000e-\u001f\u007f]/.test(text) ? null : text;
  }

  function showMessage(message) {
    const bytes = message.binaryBody;
    const text = readableText(bytes);
    const row = document.createElement("tr");
    row.className = "message";
    row.dataset.destination = message.headers.destination;
    row.dataset.hex = toHex(bytes);
    const cells = [new Date().toLocaleTimeString(), message.headers.destination];
    cells.forEach((value, index) => {
      const cell = document.createElement("td");
      cell.textContent = value;
      cell.className = index === 0 ? "time" : "";
      row.appendChild(cell);
    });
    const body = document.createElement("td");
    if (text === null) {
      body.className = "binary";
      body.textContent = bytes.length + " bytes: " + toHex(bytes);
    } else {
      body.textContent = text;
    }
    body.title = Object.entries(message.headers).map(([name, value]) => name + ": " + value).join("\n");
    row.appendChild(body);
    $("messages").querySelector("tr.empty")?.remove();
    $("messages").prepend(row);
  }

  function connect(event) {
    if (event) event.preventDefault();
    const url = $("url").value.trim();
    client = new StompJs.Client({
      brokerURL: url,
      reconnectDelay: 1000,
      heartbeatIncoming: 10000,
      heartbeatOutgoing: 10000,
    });
    session = new ResumableSession(client, {
      // Every (re)connect logs in with the credentials signed in with at that moment.
      beforeConnect: (stomp) => {
        stomp.connectHeaders = connectHeaders();
      },
      onConnect: (frame, { resumed, gap }) => {
        const how = resumed ? (gap ? "resumed with a gap" : "resumed") : "connected";
        setState("connected", how + ": STOMP " + frame.headers.version + ", session " + frame.headers.session);
        $("status").dataset.resumed = String(resumed);
        if (resumed) {
          log("session resumed: what was missed while away follows, in order" +
            (gap ? "; the broker's buffer overflowed, so some messages are lost" : ""));
        } else {
          log("CONNECTED to " + (frame.headers.server || "the broker"));
        }
      },
      onAdvisory: (message) => {
        log("slow-consumer advisory: " + message.headers["stompbroker-bytes-waiting"] +
          " bytes wait; policy " + message.headers["stompbroker-policy"]);
      },
    });
    // For the tests and the curious: window.stompDemo.client is the stompjs Client.
    window.stompDemo = { client: client, session: session };
    client.onStompError = async (frame) => {
      setState("error", "ERROR: " + frame.headers.message);
      log("ERROR " + frame.headers.message + (frame.body ? ": " + frame.body : ""));
      await client.deactivate();
      if (isLoginRefused(frame) && (await signIn(frame.headers.message))) {
        connect();
      }
    };
    client.onWebSocketClose = (closeEvent) => {
      const state = $("status").dataset.state;
      if (state === "error") {
        // Said already.
      } else if (client.active) {
        setState("reconnecting", "connection lost (code " + closeEvent.code + "): reconnecting to resume the session ...");
      } else {
        setState("disconnected", "disconnected (WebSocket close code " + closeEvent.code + ")");
      }
      log("WebSocket closed with code " + closeEvent.code);
    };
    client.onWebSocketError = () => log("WebSocket error (see the browser console)");
    setState("connecting", "connecting to " + url + " ...");
    log("connecting to " + url);
    client.activate();
  }

  function disconnect() {
    if (client) {
      client.deactivate();
    }
  }

  // Drop the connection as a network would (no DISCONNECT): the client
  // reconnects and resumes its session, missing nothing.
  function drop() {
    if (client) {
      log("dropping the connection");
      client.forceDisconnect();
    }
  }

  function subscribe(event) {
    event.preventDefault();
    const destination = $("subscribe-destination").value.trim();
    const receipt = "subscribe-" + ++receipts;
    const item = document.createElement("li");
    item.dataset.state = "pending";
    item.dataset.destination = destination;
    item.textContent = destination;
    client.watchForReceipt(receipt, () => {
      item.dataset.state = "active";
      log("subscribed to " + destination);
    });
    const subscription = session.subscribe(destination, showMessage, { receipt: receipt });
    const stop = document.createElement("button");
    stop.className = "secondary";
    stop.type = "button";
    stop.textContent = "unsubscribe";
    stop.addEventListener("click", () => {
      subscription.unsubscribe();
      item.remove();
      log("unsubscribed from " + destination);
    });
    item.appendChild(stop);
    $("subscriptions").appendChild(item);
  }

  function send(event) {
    event.preventDefault();
    const destination = $("send-destination").value.trim();
    const body = $("body").value;
    try {
      if ($("body-format").value === "hex") {
        const bytes = fromHex(body);
        client.publish({
          destination: destination,
          binaryBody: bytes,
          headers: { "content-type": "application/octet-stream" },
        });
        log("sent " + bytes.length + " bytes to " + destination);
      } else {
        client.publish({ destination: destination, body: body });
        log("sent text to " + destination);
      }
    } catch (error) {
      log("not sent: " + error.message);
    }
  }

  $("url").value = defaultUrl();
  mountSignIn("demo", () => undefined);
  $("connect-form").addEventListener("submit", connect);
  $("disconnect").addEventListener("click", disconnect);
  $("drop").addEventListener("click", drop);
  $("subscribe-form").addEventListener("submit", subscribe);
  $("send-form").addEventListener("submit", send);
  setState("disconnected", "disconnected");
})();
