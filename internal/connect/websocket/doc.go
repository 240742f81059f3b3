// Package websocket is the websocket input: a WebSocket client that
// connects to one server URL and turns every text or binary message it
// receives into a message of the stream. WebSocket has no
// acknowledgements, so delivery is at-most-once: what the server sends
// while the client is disconnected, or what is in flight when the process
// stops, is lost. It must not listen on a port (no server mode).
package websocket
