// Resumable STOMP sessions for @stomp/stompjs: a small ES module over its Client.
//
// stompbroker keeps the session of a client that asked for it (CONNECT header
// resume-token) for --resume-window seconds after its connection drops: its
// subscriptions stay, and the topic messages it misses are kept for it.  This
// module does the client's half:
//
//   - it asks for a resumable session on the first CONNECT (resume-token empty),
//     keeps the token each CONNECTED gives, and sends it on every reconnect
//     (stompjs's beforeConnect), so a dropped WebSocket comes back where it was;
//     with it, the subscription and message-id of the last topic message it
//     got (resume-last-subscription, resume-last-message-id), so that what a
//     dying network swallowed before the broker noticed is sent again too;
//   - on resumed:true the broker still has the subscriptions (same ids): it
//     sends what was missed, in order, then the live flow, and this module hands
//     those messages to the callbacks they were subscribed with (a new stompjs
//     connection knows no subscriptions, so they arrive as "unhandled");
//   - on resumed:false (first connect, window passed, broker restarted) it
//     subscribes again to everything, as a fresh session must;
//   - it tells the application which happened, and resume-gap:true when the
//     broker's buffer overflowed and some messages are lost;
//   - slow-consumer advisories (stompbroker-advisory:slow-consumer) go to
//     onAdvisory instead of the subscription's callback.
//
// It is the npm package stompbroker-resumable (clients/js/ of the repository),
// and the broker serves this same file at /static/resumable.js.  Usage:
//
//   import { Client } from "@stomp/stompjs";
//   import { ResumableSession } from "stompbroker-resumable";  // or "/static/resumable.js"
//   const client = new Client({ brokerURL: "ws://host/ws", reconnectDelay: 1000 });
//   const session = new ResumableSession(client, {
//     onConnect: (frame, { resumed, gap }) => ...,
//     onAdvisory: (message) => ...,
//   });
//   session.subscribe("/topic/prices", (message) => ...);
//   client.activate();
//
// Documented in docs/resume.md, "The browser module", and clients/js/README.md.

const ADVISORY = "stompbroker-advisory";

export class ResumableSession {
  /**
   * @param client a StompJs.Client, not yet activated; this takes over its
   *   beforeConnect, onConnect and onUnhandledMessage (pass yours here).
   * @param callbacks onConnect(frame, {resumed, gap}), onAdvisory(message, id),
   *   beforeConnect(client), onUnhandledMessage(message).
   */
  constructor(client, callbacks = {}) {
    this.client = client;
    this.callbacks = callbacks;
    /** The token of the current session; "" until the first CONNECTED. */
    this.token = "";
    /** Whether the last CONNECTED resumed the session, and whether with a gap. */
    this.resumed = false;
    this.gap = false;
    this._subscriptions = new Map();
    this._numbers = 0;
    /** The subscription id and message-id of the last auto-ack topic message had. */
    this._last = null;
    client.beforeConnect = async (stomp) => {
      if (callbacks.beforeConnect) {
        await callbacks.beforeConnect(stomp);
      }
      const headers = { ...client.connectHeaders, "resume-token": this.token };
      delete headers["resume-last-subscription"];
      delete headers["resume-last-message-id"];
      if (this._last) {
        headers["resume-last-subscription"] = this._last.subscription;
        headers["resume-last-message-id"] = this._last.messageId;
      }
      client.connectHeaders = headers;
    };
    client.onConnect = (frame) => this._connected(frame);
    client.onUnhandledMessage = (message) => {
      const subscription = this._subscriptions.get(message.headers.subscription);
      if (subscription) {
        subscription.deliver(message);
      } else if (callbacks.onUnhandledMessage) {
        callbacks.onUnhandledMessage(message);
      }
    };
  }

  /**
   * Subscribe, now if connected and again on every fresh session.
   *
   * @param headers SUBSCRIBE headers; an ``id`` is made when there is none.
   * @returns {{id: string, unsubscribe: function()}}
   */
  subscribe(destination, callback, headers = {}) {
    const id = headers.id || "sub-" + ++this._numbers;
    // The broker keeps (and resends) only auto-ack topic messages; the others
    // come back from their queues.
    const kept = destination.startsWith("/topic/") && (headers.ack || "auto") === "auto";
    const subscription = {
      destination: destination,
      headers: { ...headers, id: id },
      deliver: (message) => {
        if (kept && !message.headers[ADVISORY]) {
          this._last = { subscription: id, messageId: message.headers["message-id"] };
        }
        if (message.headers[ADVISORY]) {
          if (this.callbacks.onAdvisory) {
            this.callbacks.onAdvisory(message, id);
          }
        } else {
          callback(message);
        }
      },
    };
    this._subscriptions.set(id, subscription);
    // Made while away: the broker has never heard of it, resumed or not.
    subscription.pending = !this.client.connected;
    if (!subscription.pending) {
      this.client.subscribe(destination, subscription.deliver, subscription.headers);
    }
    return {
      id: id,
      unsubscribe: (unsubscribeHeaders = {}) => {
        this._subscriptions.delete(id);
        if (this.client.connected) {
          this.client.unsubscribe(id, unsubscribeHeaders);
        }
      },
    };
  }

  _connected(frame) {
    const headers = frame.headers;
    this.token = headers["resume-token"] || "";
    this.resumed = headers.resumed === "true";
    this.gap = headers["resume-gap"] === "true";
    if (!this.resumed) {
      this._last = null;
    }
    for (const subscription of this._subscriptions.values()) {
      // A fresh session has none of our subscriptions: make them again (the
      // receipt the first SUBSCRIBE asked for has been had).
      if (subscription.pending || !this.resumed) {
        const again = { ...subscription.headers };
        if (!subscription.pending) {
          delete again.receipt;
        }
        subscription.pending = false;
        this.client.subscribe(subscription.destination, subscription.deliver, again);
      }
    }
    if (this.callbacks.onConnect) {
      this.callbacks.onConnect(frame, { resumed: this.resumed, gap: this.gap });
    }
  }
}
