// Renewing an OAuth 2 token on a live STOMP connection with @stomp/stompjs.
// This module is the example of docs/security.md, word for word; the broker
// serves it as /static/examples/renewal.js, and a test runs it in Chromium.
import { Client } from '@stomp/stompjs';

// getToken() is your OAuth 2 library's (a refresh through oidc-client-ts, say),
// show(body) is your page's, and renewEvery (milliseconds) is a little less
// than your tokens' lifetime.
export function watchPrices({ brokerURL, getToken, show, renewEvery }) {
  const client = new Client({
    brokerURL,
    // Every (re)connect logs in with a token that is fresh at that moment.
    beforeConnect: async (client) => {
      client.connectHeaders = { passcode: await getToken() };
    },
    onConnect: () => {
      client.subscribe('/topic/prices.#', (message) => show(message.body));
    },
    onStompError: (frame) => console.error(frame.headers.message, frame.body),
  });

  // Before the token expires, give the broker the new one on the same connection.
  async function renewCredentials() {
    if (!client.active) {
      clearInterval(renewing);  // deactivated: nothing left to renew
      return;
    }
    const token = await getToken();
    if (!client.connected) {
      return;  // between connections: the next CONNECT sends a fresh token
    }
    const receipt = `renew-${Date.now()}`;
    client.watchForReceipt(receipt, () => console.log('credentials renewed'));
    client.publish({
      destination: '/control/credentials',
      body: token,
      headers: { receipt },
    });
  }
  const renewing = setInterval(renewCredentials, renewEvery);

  client.activate();
  return client;
}
