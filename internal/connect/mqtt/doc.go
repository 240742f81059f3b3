// Package mqtt is the MQTT input and output: MQTT 5 subscribe and publish
// with QoS 0/1/2 and persistent sessions, on paho.golang (which speaks
// MQTT 5 only, so 3.1.1 is not supported). The input acknowledges
// messages to the broker only after the stream delivered them; the output
// reports a batch written only after the broker acknowledged every
// message. It must not buffer messages beyond what the broker will
// redeliver.
package mqtt
